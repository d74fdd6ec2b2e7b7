package app

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/steptest"
)

// Step-test design (issue 21, build item 3, first part): a plan a person
// reviews. It reads the scene and a snapshot and writes nothing.

var opStepTestPlan = Op{Name: "steptest.plan", Act: auth.ActRead, Summary: "Design a plant step test (steps or PRBS per control) within the scene's write policy and ranges; nothing is stored or written"}

func stepTestOps() []*Op {
	return append([]*Op{bind(&opStepTestPlan, (*App).StepTestPlan)}, stepTestCertOps()...)
}

// StepTestPlanRequest designs a step test.
type StepTestPlanRequest struct {
	Scene        string             `json:"scene" jsonschema:"frozen scene id"`
	SceneVersion string             `json:"sceneVersion,omitempty" jsonschema:"scene version (default: the latest)"`
	Signal       string             `json:"signal,omitempty" jsonschema:"steps (default: up, back, down, back) or prbs (generalised binary noise)"`
	Variables    []string           `json:"variables,omitempty" jsonschema:"controls to excite (default: every control the write policy lets move)"`
	Amplitude    map[string]float64 `json:"amplitude,omitempty" jsonschema:"per control, the step size (default: the largest the write policy and the range allow)"`
	Base         map[string]float64 `json:"base,omitempty" jsonschema:"per control, the operating point (default: the snapshot's control values)"`
	Snapshot     string             `json:"snapshot,omitempty" jsonschema:"snapshot whose control values are the operating point (default: the newest of the scene's line)"`
	Hold         Duration           `json:"hold,omitempty" jsonschema:"time between moves (default and minimum: the write policy's interval)"`
	Switches     int                `json:"switches,omitempty" jsonschema:"PRBS moves per control (default 8)"`
	OneAtATime   bool               `json:"oneAtATime,omitempty" jsonschema:"move one control per action"`
	Seed         uint64             `json:"seed,omitempty" jsonschema:"PRBS seed (default 1)"`
}

// Validate requires the scene and a non-negative hold.
func (r *StepTestPlanRequest) Validate() error {
	if r.Hold < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "hold", "hold must not be negative")
	}
	return required("scene", r.Scene)
}

// StepTestPlanResponse is the plan with where its operating point came
// from.
type StepTestPlanResponse struct {
	*steptest.Plan
	BaseFrom   string `json:"baseFrom" jsonschema:"where the operating point came from: request or snapshot"`
	SnapshotID string `json:"snapshotId,omitempty" jsonschema:"the snapshot the operating point came from"`
}

// StepTestPlan designs a step test on a frozen scene.
func (a *App) StepTestPlan(ctx context.Context, p Principal, req StepTestPlanRequest) (StepTestPlanResponse, error) {
	return run(ctx, a, p, &opStepTestPlan, req, func(ctx context.Context, p Principal, req StepTestPlanRequest) (StepTestPlanResponse, error) {
		scene, err := a.scene(ctx, p, auth.ActRead, req.Scene, req.SceneVersion)
		if err != nil {
			return StepTestPlanResponse{}, err
		}
		out := StepTestPlanResponse{BaseFrom: "request"}
		base := map[string]float64{}
		if req.Snapshot != "" || len(req.Base) == 0 {
			id := req.Snapshot
			if id == "" {
				infos, err := a.d.Store.ListSnapshots(ctx, scene.LineID, 1)
				if err != nil {
					return StepTestPlanResponse{}, err
				}
				if len(infos) == 0 {
					return StepTestPlanResponse{}, core.FieldErrorf(core.CodeInvalidArgument, "base", "line %s has no snapshot: take one (snapshot take) or give base", scene.LineID)
				}
				id = infos[0].SnapshotID
			}
			snap, err := a.d.Store.GetSnapshot(ctx, id)
			if err != nil {
				return StepTestPlanResponse{}, err
			}
			if err := p.Allow(auth.ActRead, snap.LineID); err != nil {
				return StepTestPlanResponse{}, err // never names a line outside p's scope
			}
			if snap.LineID != scene.LineID {
				return StepTestPlanResponse{}, core.FieldErrorf(core.CodeConflict, "snapshot", "snapshot %s is of line %s, the scene of line %s", id, snap.LineID, scene.LineID)
			}
			for v, x := range snap.ControlValues {
				base[v] = x
			}
			out.BaseFrom, out.SnapshotID = "snapshot", id
		}
		for v, x := range req.Base {
			base[v] = x
		}
		plan, err := steptest.Design(scene, steptest.Options{Signal: req.Signal, Variables: req.Variables, Base: base, Amplitude: req.Amplitude,
			HoldSec: req.Hold.D().Seconds(), Switches: req.Switches, OneAtATime: req.OneAtATime, Seed: req.Seed})
		if err != nil {
			return StepTestPlanResponse{}, err
		}
		out.Plan = plan
		return out, nil
	})
}

// Step tests as certificates: a plan is issued as a signed step-test
// certificate (steptest.issue, recorded in the audit log), a person
// other than its proposer approves it (steptest.approve: ActCertApprove,
// never an agent), and steptest.execute runs it move by move through
// the write guard on the live line (ActWrite) and fits process_model@1
// from the recorded run.

var (
	opStepTestIssue   = Op{Name: "steptest.issue", Act: auth.ActCertRequest, Summary: "Design a step test and issue it as a signed step-test certificate, queued for a person to approve"}
	opStepTestShow    = Op{Name: "steptest.show", Act: auth.ActRead, Summary: "A step test as its signed audit trail has it (verified): status, approval, moves executed, and its latest execution's progress (status, stage, moves written of planned) then result or error"}
	opStepTestApprove = Op{Name: "steptest.approve", Act: auth.ActCertApprove, Summary: "Approve an ISSUED step test (a person other than its proposer, with the approver role)"}
	opStepTestList    = Op{Name: "steptest.list", Act: auth.ActRead, Summary: "List the step tests of p's lines (optionally one line), newest first, each verified"}
	// steptest.revoke is open to two roles — the test's proposer (an
	// engineer) and a person with the approver role — so its op action is
	// read and the body checks which (steptest.CanRevoke, the line's
	// scope); agents never revoke.
	opStepTestRevoke  = Op{Name: "steptest.revoke", Act: auth.ActRead, Summary: "Revoke a step test (its proposer or an approver, never an agent): it can no longer execute"}
	opStepTestExecute = Op{Name: "steptest.execute", Act: auth.ActWrite, Heavy: true, SlotInBody: true, Summary: "Execute an approved step test move by move through the write guard on the live line and fit process_model@1 and linear_state_space@1 from the run; claimed once, run in the background (steptest.show follows it) unless wait"}
)

func stepTestCertOps() []*Op {
	return []*Op{
		bind(&opStepTestIssue, (*App).StepTestIssue),
		bind(&opStepTestShow, (*App).StepTestShow),
		bind(&opStepTestApprove, (*App).StepTestApprove),
		bind(&opStepTestList, (*App).StepTestList),
		bind(&opStepTestRevoke, (*App).StepTestRevoke),
		bind(&opStepTestExecute, (*App).StepTestExecute),
	}
}

// StepTestIssueRequest designs a step test (as steptest.plan) and issues it.
type StepTestIssueRequest struct {
	StepTestPlanRequest
	TTL Duration `json:"ttl,omitempty" jsonschema:"how long the approved test may run (default 8h, at most 24h)"`
}

// Validate checks the plan request and the TTL.
func (r *StepTestIssueRequest) Validate() error {
	if r.TTL < 0 || r.TTL.D() > contract.StepTestMaxTTL {
		return core.FieldErrorf(core.CodeInvalidArgument, "ttl", "ttl must be 0..%s", contract.StepTestMaxTTL)
	}
	return r.StepTestPlanRequest.Validate()
}

// StepTestResponse is a step test as its verified trail has it.
type StepTestResponse = steptest.Record

// StepTestIssue designs a step test and records it as a signed, ISSUED
// certificate proposed by p.
func (a *App) StepTestIssue(ctx context.Context, p Principal, req StepTestIssueRequest) (*StepTestResponse, error) {
	return run(ctx, a, p, &opStepTestIssue, req, func(ctx context.Context, p Principal, req StepTestIssueRequest) (*StepTestResponse, error) {
		plan, err := a.StepTestPlan(ctx, p, req.StepTestPlanRequest)
		if err != nil {
			return nil, err
		}
		if err := p.Allow(auth.ActCertRequest, plan.LineID); err != nil {
			return nil, err
		}
		scene, err := a.d.Store.GetScene(ctx, plan.SceneID, plan.SceneVersion)
		if err != nil {
			return nil, err
		}
		k, err := a.key()
		if err != nil {
			return nil, err
		}
		c, err := steptest.Issue(plan.Plan, scene, steptest.IssueInput{TestID: a.newID("st"), CreatedBy: p.Name, RecipeID: scene.RecipeID, Now: a.o.Now(), TTL: req.TTL.D()}, k)
		if err != nil {
			return nil, err
		}
		return steptest.RecordIssue(ctx, a.d.Store, k, c)
	})
}

// StepTestRequest names a step test.
type StepTestRequest struct {
	ID string `json:"id" jsonschema:"step test id"`
}

// Validate requires the id.
func (r *StepTestRequest) Validate() error { return required("id", r.ID) }

func (a *App) stepTestFor(ctx context.Context, p Principal, act auth.Action, id string) (*steptest.Record, error) {
	k, err := a.key()
	if err != nil {
		return nil, err
	}
	r, err := steptest.Load(ctx, a.d.Store, k.Public, id, a.o.Now())
	if err != nil {
		return nil, err
	}
	if err := p.Allow(act, r.Test.LineID); err != nil {
		return nil, err
	}
	return r, nil
}

// StepTestShow returns a step test, verified.
func (a *App) StepTestShow(ctx context.Context, p Principal, req StepTestRequest) (*StepTestResponse, error) {
	return run(ctx, a, p, &opStepTestShow, req, func(ctx context.Context, p Principal, req StepTestRequest) (*StepTestResponse, error) {
		return a.stepTestFor(ctx, p, auth.ActRead, req.ID)
	})
}

// StepTestApprove approves an ISSUED step test as p (signed statement
// naming p and p's role; never its proposer, never an agent's name).
func (a *App) StepTestApprove(ctx context.Context, p Principal, req StepTestRequest) (*StepTestResponse, error) {
	return run(ctx, a, p, &opStepTestApprove, req, func(ctx context.Context, p Principal, req StepTestRequest) (*StepTestResponse, error) {
		if _, err := a.stepTestFor(ctx, p, auth.ActCertApprove, req.ID); err != nil {
			return nil, err
		}
		k, err := a.key()
		if err != nil {
			return nil, err
		}
		return steptest.RecordApprove(ctx, a.d.Store, k, req.ID, twinstore.Approver{Name: p.Name, Role: string(p.Role)}, a.o.Now())
	})
}

// StepTestListRequest filters step tests.
type StepTestListRequest struct {
	Line  string `json:"line,omitempty" jsonschema:"only this line"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many (default 100, at most 1000)"`
}

// Validate bounds the limit.
func (r *StepTestListRequest) Validate() error { return limitIn("limit", r.Limit, 1, 1000) }

// StepTestList lists the step tests of p's lines, newest first, each
// replayed from its verified trail (one that does not verify is left
// out: it never authorises a write).
func (a *App) StepTestList(ctx context.Context, p Principal, req StepTestListRequest) (List[*StepTestResponse], error) {
	return run(ctx, a, p, &opStepTestList, req, func(ctx context.Context, p Principal, req StepTestListRequest) (List[*StepTestResponse], error) {
		var zero List[*StepTestResponse]
		if err := scope(p, auth.ActRead, req.Line); err != nil {
			return zero, err
		}
		k, err := a.key()
		if err != nil {
			return zero, err
		}
		limit := req.Limit
		if limit == 0 {
			limit = 100
		}
		items, _, err := steptest.List(ctx, a.d.Store, k.Public, req.Line, limit, a.o.Now())
		if err != nil {
			return zero, err
		}
		return ListOf(filter(p, items, func(r *StepTestResponse) string { return r.Test.LineID })), nil
	})
}

// StepTestRevokeRequest revokes a step test with a reason.
type StepTestRevokeRequest struct {
	ID     string `json:"id" jsonschema:"step test id"`
	Reason string `json:"reason" jsonschema:"why (recorded in the audit log)"`
}

// Validate requires id and reason.
func (r *StepTestRevokeRequest) Validate() error {
	return firstErr(required("id", r.ID), required("reason", r.Reason))
}

// StepTestRevoke revokes a step test as p: its proposer (with the
// cert.request action on its line) or a person who may approve on its
// line; never an agent. A revoked test never executes (the guard refuses
// its moves, CERT_REVOKED).
func (a *App) StepTestRevoke(ctx context.Context, p Principal, req StepTestRevokeRequest) (*StepTestResponse, error) {
	return run(ctx, a, p, &opStepTestRevoke, req, func(ctx context.Context, p Principal, req StepTestRevokeRequest) (*StepTestResponse, error) {
		if p.Role == auth.RoleAgent {
			return nil, core.FieldErrorf(core.CodeForbidden, "id", "an agent does not revoke a step test: a person does")
		}
		r, err := a.stepTestFor(ctx, p, auth.ActRead, req.ID)
		if err != nil {
			return nil, err
		}
		act := auth.ActCertApprove
		if p.Name == r.Test.CreatedBy && p.Allow(auth.ActCertApprove, r.Test.LineID) != nil {
			act = auth.ActCertRequest
		}
		if err := p.Allow(act, r.Test.LineID); err != nil {
			return nil, err
		}
		k, err := a.key()
		if err != nil {
			return nil, err
		}
		return steptest.RecordRevoke(ctx, a.d.Store, k, req.ID, steptest.Revoker{Name: p.Name, Role: string(p.Role)}, req.Reason, a.o.Now())
	})
}

// StepTestExecuteRequest executes an approved step test.
type StepTestExecuteRequest struct {
	ID string `json:"id" jsonschema:"step test id"`
	// Output is the measured variable fitted (default: the scene's first
	// observation).
	Output string `json:"output,omitempty" jsonschema:"measured variable to fit (default: the scene's first observation)"`
	// Previous is a registry model whose step responses and gains the
	// fitted models are compared with.
	Previous string `json:"previous,omitempty" jsonschema:"registry model to compare the fitted models with (its step responses and gains; a model that can simulate runs, of the test's line, whose controls are the test's inputs and whose targets include the output)"`
	// Wait runs the test in the call (the local CLI, whose process ends
	// with the call); by default the test runs in the background of the
	// serving process and the call answers at once.
	Wait bool `json:"wait,omitempty" jsonschema:"run the test in the call and answer when it ends (default: start it in the background, answer at once with status running, and follow it with steptest.show)"`
	// Line is the live line (its writable and measured nodes and clock).
	// Only in-process callers (the tests) set it; otherwise the test runs
	// on the writer the process's operator configured for the test's line
	// (Options.LineWriters), sampled every LineWriters.SampleFor, and
	// without one it is refused.
	Line steptest.Line `json:"-"`
}

// Validate requires the id.
func (r *StepTestExecuteRequest) Validate() error { return required("id", r.ID) }

// StepTestExecuteResponse is the executed test and the models fitted
// from it (none when it stopped early) when the call waited; when it
// started the test in the background, status running and the test as
// its trail has it (steptest.show follows it to the same result).
type StepTestExecuteResponse struct {
	// Status is running (started in the background), done or failed
	// (the call waited; failed comes with the error).
	Status string `json:"status" jsonschema:"running (started in the background: follow it with steptest.show), done or failed (with wait)"`
	steptest.Result
	// Test is the step test as its trail has it when the call answers:
	// its progress (moves written so far, stage).
	Test *StepTestResponse `json:"test,omitempty"`
}

// StepTestExecute runs an approved step test on the live line through
// the write guard (every move checked against the certificate, audited
// with its readback) and fits process_model@1 and linear_state_space@1
// from the recorded run (steptest.Fit).
// The run is recorded under run id "steptest-<id>". A refused move or a
// breached scene limit stops the test: the result comes back with
// AML_WRITE_DENIED, and nothing was written after the stop.
//
// A test that is running or wrote a move already answers AML_CONFLICT at
// once, read from its trail before the call waits for a heavy slot (it
// never queues behind other heavy work to be refused). With a slot, the
// test is claimed (steptest.start, atomic: of two calls, one starts it,
// the other gets AML_CONFLICT). Without Wait it then runs in the
// background on a context that is not the call's — a client that goes
// away does not stop it; the process shutting down (Shutdown) does,
// before the next move — holding the call's heavy slot until it ends,
// and the call answers at once (status running); its progress and,
// when it ends, its result or error are recorded in its audit trail
// (steptest.result), which steptest.show reads, in any process sharing
// the store. A revocation stops it before its next move either way.
func (a *App) StepTestExecute(ctx context.Context, p Principal, req StepTestExecuteRequest) (StepTestExecuteResponse, error) {
	return run(ctx, a, p, &opStepTestExecute, req, func(ctx context.Context, p Principal, req StepTestExecuteRequest) (StepTestExecuteResponse, error) {
		var out StepTestExecuteResponse
		r, err := a.stepTestFor(ctx, p, auth.ActWrite, req.ID)
		if err != nil {
			return out, err
		}
		if r.Moves > 0 {
			return out, core.FieldErrorf(core.CodeConflict, "id", "step test %s was executed already (%d moves written)", req.ID, r.Moves)
		}
		if pr := r.Progress; pr != nil && pr.Status == steptest.StatusRunning {
			return out, core.FieldErrorf(core.CodeConflict, "id", "step test %s is running (started by %s at %s): follow it with steptest.show", req.ID, pr.StartedBy, pr.StartedAt.Format(time.RFC3339))
		}
		c := r.Test
		line, err := a.liveLine(ctx, c.LineID, req.Line)
		if err != nil {
			return out, err
		}
		if line == nil {
			return out, core.FieldErrorf(core.CodeInvalidArgument, "line", "no live line connector is attached to this process for line %s: a step test runs where the line's writer is configured (aml serve --line-writers, or the CLI's --opcua-endpoint and --map)", c.LineID)
		}
		scene, err := a.d.Store.GetScene(ctx, c.SceneID, c.SceneVersion)
		if err != nil {
			return out, err
		}
		k, err := a.key()
		if err != nil {
			return out, err
		}
		if !req.Wait && a.life.Err() != nil {
			return out, core.Errorf(core.CodeWorkerLost, "the process is shutting down: step test %s was not started", c.TestID)
		}
		// Only now, the test found claimable, wait for a heavy slot; the
		// claim below checks the trail again in its serialised write
		// transaction (another call may have claimed it meanwhile).
		if err := a.takeSlot(ctx); err != nil {
			return out, err
		}
		started, err := steptest.RecordStart(ctx, a.d.Store, k, c, p.Name, a.o.Now())
		if err != nil {
			return out, err
		}
		x := &stepTestRun{a: a, p: p, req: req, c: c, scene: scene, line: line, k: k, startSeq: started.StartSeq}
		if req.Wait {
			out.Result, err = x.run(ctx)
			out.Status = steptest.StatusDone
			if err != nil {
				out.Status = steptest.StatusFailed
			}
			if r, lerr := a.stepTestFor(ctx, p, auth.ActRead, c.TestID); lerr == nil {
				out.Test = r
			}
			return out, err
		}
		release := keepSlot(ctx)
		if !a.background(ctx, func(ctx context.Context) {
			defer release()
			if _, err := x.run(ctx); err != nil {
				a.log.Info("step test ended with an error", "id", c.TestID, "err", err)
			}
		}) {
			release()
			err := core.Errorf(core.CodeWorkerLost, "the process is shutting down: step test %s was not started", c.TestID)
			if rerr := steptest.RecordResult(context.WithoutCancel(ctx), a.d.Store, k, c, p.Name, nil, err); rerr != nil {
				a.log.Warn("step test: record result", "id", c.TestID, "err", rerr)
			}
			return out, err
		}
		// The test runs: a failed read of its trail here does not fail
		// the call (steptest.show reads it again).
		out.Status = steptest.StatusRunning
		if out.Test, err = a.stepTestFor(ctx, p, auth.ActRead, c.TestID); err != nil {
			a.log.Warn("step test started; reading its trail failed", "id", c.TestID, "err", err)
		}
		return out, nil
	})
}

// stepTestRun is one claimed execution of a step test.
type stepTestRun struct {
	a     *App
	p     Principal
	req   StepTestExecuteRequest
	c     *contract.StepTestCertificate
	scene *contract.SceneContract
	line  steptest.Line
	k     *cert.KeyPair
	// startSeq is the audit entry of its claim (steptest.start), the
	// holder of the test's lease.
	startSeq int64
}

// run executes the claimed test, stores its run, fits the models and
// records the result (or the error) in the test's trail, whatever ctx
// does meanwhile.
//
// From its claim until its result is recorded it renews the test's
// lease (heartbeat), so that a process killed mid-test reads as
// interrupted LeaseTimeout after its last renewal, not at its Until.
func (x *stepTestRun) run(ctx context.Context) (steptest.Result, error) {
	stop := x.heartbeat(context.WithoutCancel(ctx))
	defer stop()
	res, err := x.execute(ctx)
	if rerr := steptest.RecordResult(context.WithoutCancel(ctx), x.a.d.Store, x.k, x.c, x.p.Name, &res, err); rerr != nil {
		x.a.log.Warn("step test: record result", "id", x.c.TestID, "err", rerr)
		if err == nil {
			err = rerr
		}
	}
	return res, err
}

// heartbeat renews the lease of the execution every
// steptest.HeartbeatEvery (at the App's clock) in its own goroutine
// until stop, which waits for it. A failed renewal is logged; one the
// store refuses because another execution holds the lease means this
// one was taken for dead — the check before every move (Current) then
// stops it.
func (x *stepTestRun) heartbeat(ctx context.Context) (stop func()) {
	var tick <-chan time.Time
	var stopTick func()
	if x.a.heartbeats != nil {
		tick, stopTick = x.a.heartbeats()
	} else {
		t := time.NewTicker(steptest.HeartbeatEvery)
		tick, stopTick = t.C, t.Stop
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		defer stopTick()
		for {
			select {
			case <-done:
				return
			case <-tick:
				if err := steptest.RecordHeartbeat(ctx, x.a.d.Store, x.c.TestID, x.startSeq, x.a.o.Now()); err != nil {
					x.a.log.Warn("step test: renew lease", "id", x.c.TestID, "err", err)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

func (x *stepTestRun) execute(ctx context.Context) (steptest.Result, error) {
	a, p, req, c, scene, k := x.a, x.p, x.req, x.c, x.scene, x.k
	var out steptest.Result
	nodes, varOf := map[string]string{}, map[string]string{}
	for _, group := range [][]contract.SceneVariable{scene.Controls, scene.Observations} {
		for _, v := range group {
			if v.NodeID != "" {
				nodes[v.ID] = v.NodeID
				varOf[v.NodeID] = v.ID
			} else {
				varOf[v.ID] = v.ID
			}
		}
	}
	ex, err := steptest.Execute(ctx, steptest.ExecInput{Cert: c, Scene: scene, PublicKey: k.Public, Channels: a.d.Store,
		History: &storeHistory{a: a, actor: p.Name, varOf: varOf}, Line: x.line, RunID: "steptest-" + c.TestID, Nodes: nodes,
		Audit: &steptest.Auditor{Log: a.d.Store.AuditLog(), Key: k, Actor: p.Name},
		// Before every move, the test as its trail has it now: a
		// revocation while it runs stops it (CERT_REVOKED), and so does
		// this execution no longer being the test's running one (taken
		// for dead: its lease not renewed for steptest.LeaseTimeout, and
		// perhaps claimed again since).
		Current: func(ctx context.Context) (*contract.StepTestCertificate, error) {
			r, err := steptest.Load(ctx, a.d.Store, k.Public, c.TestID, a.o.Now())
			if err != nil {
				return nil, err
			}
			if pr := r.Progress; pr == nil || pr.StartSeq != x.startSeq || pr.Status != steptest.StatusRunning {
				return nil, core.Errorf(core.CodeConflict, "this execution (audit entry %d) is no longer the test's running one: it was taken for dead (no lease renewal for %s) or the test was claimed again", x.startSeq, steptest.LeaseTimeout)
			}
			return r.Test, nil
		}})
	out.Execution = ex
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			err = core.Wrap(core.CodeWorkerLost, err, "step test %s stopped: its execution was cancelled (the process shut down) before move %d of %d; the setpoints are where its last written move left them", c.TestID, len(ex.Moves), len(c.Moves))
		}
		return out, err
	}
	// The samples are stored and the models fitted whatever ctx does
	// now: the moves have ended.
	ctx = context.WithoutCancel(ctx)
	if len(ex.Samples) > 0 && scene.ProductID == "" {
		out.RunNote = "the scene names no product: the run was not stored (give the scene a productId)"
	} else if len(ex.Samples) > 0 {
		if err := a.recordStepTestRun(ctx, scene, ex, nodes); err != nil {
			return out, err
		}
		out.RunID = ex.RunID
	}
	if ex.Stopped != "" {
		return out, core.Errorf(core.CodeWriteDenied, "step test %s stopped after %d moves: %s", c.TestID, len(ex.Moves), ex.Stopped)
	}
	output := req.Output
	if output == "" && len(scene.Observations) > 0 {
		output = scene.Observations[0].ID
	}
	if ex.Completed {
		if out.Fit, err = steptest.Fit(ctx, ex, output, nil); err != nil {
			out.FitError = err.Error()
		} else if req.Previous != "" {
			prev, err := a.previousModel(ctx, p, req.Previous, c, ex, output, nodes)
			if err != nil {
				out.Fit.Previous, out.Fit.PreviousError = req.Previous, err.Error()
			} else {
				out.Fit.Compare(prev)
			}
		}
	}
	return out, nil
}

// recordStepTestRun stores the executed test as an identification run
// (id ex.RunID, the scene's line, product and recipe): its samples of
// every control and measured output, ended at the test's end, so that a
// dataset can be built from it like from any run.
func (a *App) recordStepTestRun(ctx context.Context, scene *contract.SceneContract, ex *steptest.Execution, nodes map[string]string) error {
	recipe := ex.RecipeID
	if recipe == "" {
		recipe = scene.RecipeID
	}
	if err := a.d.Store.CreateRun(ctx, core.Run{ID: ex.RunID, LineID: ex.LineID, ProductID: scene.ProductID, RecipeID: recipe,
		StartedMs: ex.Start.UnixMilli(), Status: core.RunActive}); err != nil {
		return err
	}
	node := func(v string) string {
		if n, ok := nodes[v]; ok {
			return n
		}
		return v
	}
	vars := append(append([]string(nil), ex.Inputs...), ex.Outputs...)
	batch := make([]core.Sample, 0, 4096)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := a.d.Store.WriteSamples(ctx, batch)
		batch = batch[:0]
		return err
	}
	for _, smp := range ex.Samples {
		for _, v := range vars {
			x, ok := smp.Values[v]
			if !ok {
				continue
			}
			batch = append(batch, core.Sample{Node: node(v), TsUs: smp.At.UnixMicro(), Value: x, State: core.StateOK,
				Line: ex.LineID, Product: scene.ProductID, Recipe: recipe, Run: ex.RunID})
			if len(batch) == cap(batch) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return a.d.Store.EndRun(ctx, ex.RunID, ex.End.UnixMilli())
}

// storeHistory is the store's write history, recording as actor.
type storeHistory struct {
	a     *App
	actor string
	varOf map[string]string
}

func (h *storeHistory) Writes(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRecord, error) {
	return h.a.d.Store.Writes(ctx, lineID, since)
}

func (h *storeHistory) Record(ctx context.Context, w contract.WriteRecord) error {
	_, err := h.a.d.Store.RecordWrite(ctx, h.actor, contract.WriteRow{WriteRecord: w, VariableID: h.varOf[w.NodeID], Outcome: contract.WriteAttempted})
	return err
}

// previousModel loads registry model id as a steptest.Previous: a model
// of the test's line that can simulate runs (eval.RunSimulator), whose
// controls are all among the test's inputs and whose targets include
// the output (by node id), simulated around the test's operating point.
func (a *App) previousModel(ctx context.Context, p Principal, id string, c *contract.StepTestCertificate, ex *steptest.Execution, output string, nodes map[string]string) (steptest.Previous, error) {
	m, err := a.d.Store.GetModel(ctx, id)
	if err != nil {
		return nil, err
	}
	_, man, load, err := a.servingModel(ctx, m)
	if err != nil {
		return nil, err
	}
	if err := p.Allow(auth.ActRead, man.LineID); err != nil {
		return nil, err
	}
	if man.LineID != c.LineID {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "previous", "model %s is of line %s, the step test of line %s", id, man.LineID, c.LineID)
	}
	pred, err := load()
	if err != nil {
		return nil, err
	}
	sim, ok := pred.(eval.RunSimulator)
	if !ok || man.Kind != dataset.KindDynamic || !(man.PeriodSeconds() > 0) {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "previous", "model %s (%s) cannot simulate a run: no step responses to compare", id, m.TrainerRef)
	}
	node := func(v string) string {
		if n, ok := nodes[v]; ok {
			return n
		}
		return v
	}
	prev := &registryPrevious{id: id, sim: sim, man: man, period: man.PeriodSeconds(), input: map[string]int{}, target: -1}
	scale := map[string]dataset.ManifestNode{}
	for _, n := range man.Nodes {
		scale[n.NodeID] = n
	}
	byNode := map[string]string{}
	for _, v := range ex.Inputs {
		byNode[node(v)] = v
	}
	prev.u0 = make([]float64, len(man.Controls))
	prev.uScale = make([]float64, len(man.Controls))
	for j, n := range man.Controls {
		v, ok := byNode[n]
		if !ok {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "previous", "model %s has control %s, which step test %s does not move", id, n, c.TestID)
		}
		prev.input[v] = j
		prev.u0[j] = c.Base[v]*scale[n].Scale + scale[n].Offset
		prev.uScale[j] = scale[n].Scale
	}
	for j, n := range man.Targets {
		if n == node(output) {
			prev.target = j
		}
	}
	if prev.target < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "previous", "model %s does not predict %s", id, output)
	}
	yn := scale[man.Targets[prev.target]]
	prev.yScale = yn.Scale
	prev.y0 = make([]float64, len(man.Targets))
	for j := range prev.y0 {
		prev.y0[j] = man.Norm.Y.Mean[j]
	}
	if len(ex.Samples) > 0 {
		prev.y0[prev.target] = ex.Samples[0].Values[output]*yn.Scale + yn.Offset
	}
	return prev, nil
}

// registryPrevious is a registry model simulated from rest at the test's
// operating point (u0, y0, model units): the difference between a run
// with a unit step (in the test's units) on one input and the run
// without is its step response.
type registryPrevious struct {
	id             string
	sim            eval.RunSimulator
	man            *dataset.Manifest
	period         float64
	input          map[string]int
	target         int
	u0, uScale, y0 []float64
	yScale         float64
}

func (r *registryPrevious) Name() string { return r.id }

// StepResponse simulates 3× the last time asked for (the gain is the
// response there) after the model's history of nInit rest rows; row
// nInit is the first that sees the step, at one period after it.
func (r *registryPrevious) StepResponse(input string, at []float64) ([]float64, float64, error) {
	j, ok := r.input[input]
	if !ok {
		return nil, 0, fmt.Errorf("the model has no control %s", input)
	}
	nInit := max(1, r.man.HistorySteps)
	n := nInit + int(math.Ceil(3*at[len(at)-1]/r.period)) + 1
	base, step := make([][]float64, n), make([][]float64, n)
	outs := make([][]float64, nInit)
	for k := range n {
		base[k] = append([]float64(nil), r.u0...)
		step[k] = append([]float64(nil), r.u0...)
		if k >= nInit {
			step[k][j] += r.uScale[j]
		}
	}
	for k := range outs {
		outs[k] = append([]float64(nil), r.y0...)
	}
	y0, err := r.sim.SimulateRun(base, outs, nInit)
	if err != nil {
		return nil, 0, err
	}
	y1, err := r.sim.SimulateRun(step, outs, nInit)
	if err != nil {
		return nil, 0, err
	}
	resp := func(k int) float64 { return (y1[k][r.target] - y0[k][r.target]) / r.yScale }
	out := make([]float64, len(at))
	for i, t := range at {
		if k := nInit + int(math.Round(t/r.period)) - 1; k >= nInit && k < n {
			out[i] = resp(k)
		}
	}
	return out, resp(n - 1), nil
}
