package steptest

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
)

// Line is the live line a step test runs on: its writable and measured
// nodes (guard.Writer) and its clock, advanced one sampling period at a
// time by Step (a connector's poll in production, the simulator in tests).
type Line interface {
	guard.Writer
	Now() time.Time
	Step() (time.Time, float64)
}

// HistoryRecorder is the write history the guard checks and records in.
type HistoryRecorder interface {
	guard.History
	guard.Recorder
}

// ExecInput is what Execute needs.
type ExecInput struct {
	Cert      *contract.StepTestCertificate
	Scene     *contract.SceneContract
	PublicKey ed25519.PublicKey
	Channels  guard.Channels
	History   HistoryRecorder
	Line      Line
	RunID     string
	// Nodes maps each scene variable (controls and measured outputs) to
	// its node id (default: the variable id).
	Nodes map[string]string
	// Outputs are the measured variables recorded (default: the scene's
	// observations).
	Outputs []string
	// Audit, when set, appends every move (decision, outcome, readback)
	// and the end of the test to the audit log; an audit failure stops
	// the test.
	Audit *Auditor
	// Current, when set, returns the certificate as its signed trail has
	// it now; Execute asks it before every move and the guard checks the
	// move against that, so a test revoked while it runs writes nothing
	// more (CERT_REVOKED). An error stops the test.
	Current func(ctx context.Context) (*contract.StepTestCertificate, error)
}

// Sample is one sampling period of the executed test.
type Sample struct {
	At     time.Time          `json:"at"`
	Values map[string]float64 `json:"values"`
}

// MoveLog is one executed (or refused) move with its guard decision and
// readback.
type MoveLog struct {
	Index    int                `json:"index"`
	AtSec    float64            `json:"atSec"`
	Allowed  bool               `json:"allowed"`
	Reason   string             `json:"reason,omitempty"`
	Detail   string             `json:"detail"`
	Status   string             `json:"status,omitempty"`
	Readback map[string]float64 `json:"readback,omitempty"`
	Results  []guard.MoveResult `json:"-"`
	Set      map[string]float64 `json:"set"`
}

// Execution is an executed step test: the identification run's record.
type Execution struct {
	TestID   string    `json:"testId"`
	LineID   string    `json:"lineId"`
	RunID    string    `json:"runId"`
	RecipeID string    `json:"recipeId,omitempty"`
	PlanHash string    `json:"planHash"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	StepSec  float64   `json:"stepSec"`
	Inputs   []string  `json:"inputs"`
	Outputs  []string  `json:"outputs"`
	Moves    []MoveLog `json:"moves"`
	Samples  []Sample  `json:"samples"`
	// Completed: every move was written and verified and the last hold
	// observed; otherwise Stopped says why the test stopped (nothing was
	// written after it).
	Completed bool   `json:"completed"`
	Stopped   string `json:"stopped,omitempty"`
}

// Execute runs an approved step test on the live line: it advances the
// line sample by sample; when a move's time comes it asks the write
// guard (each move checked against the certificate: value, slot, scene
// write policy and bounds) and executes it with readback; after every
// sample it checks the scene's hard-range constraints on the measured
// outputs. A refused or failed move, or a measured output outside a
// hard range, stops the test: nothing is written after it (the setpoints
// stay where the last verified move left them, for the operator). So
// does the end of ctx (the process shutting down): no further move is
// written, the end is audited all the same (steptest.executed, stopped
// "cancelled before move i …") and ctx's error is returned with the
// execution. Execute never writes a value the certificate does not hold,
// so it does not move the line back to the operating point itself.
func Execute(ctx context.Context, in ExecInput) (*Execution, error) {
	c, s := in.Cert, in.Scene
	if c == nil || s == nil || in.Line == nil || in.History == nil || in.Channels == nil {
		return nil, core.Errorf(core.CodeInvalidArgument, "a step test, its scene, a line, channels and a write history are required")
	}
	node := func(v string) string {
		if n, ok := in.Nodes[v]; ok {
			return n
		}
		return v
	}
	outs := in.Outputs
	if len(outs) == 0 {
		for _, o := range s.Observations {
			outs = append(outs, o.ID)
		}
	}
	inputs := make([]string, 0, len(c.Base))
	for v := range c.Base {
		inputs = append(inputs, v)
	}
	sort.Strings(inputs)
	ex := &Execution{TestID: c.TestID, LineID: c.LineID, RunID: in.RunID, RecipeID: c.RecipeID, PlanHash: c.PlanHash,
		Inputs: inputs, Outputs: outs, Start: in.Line.Now()}
	limits := hardRanges(s)
	next := 0
	end := c.Moves[len(c.Moves)-1].AtSec + c.HoldSec
	var prev time.Time
	// A move written is audited even when ctx ends meanwhile, and so is
	// the end of the test: the audit entries are appended on actx.
	actx := context.WithoutCancel(ctx)
	var cancelled error
	for {
		if err := ctx.Err(); err != nil {
			// Cancelled (the caller went away, the process shuts down):
			// no further move; the end is recorded below, the setpoints
			// left where the last verified move put them.
			cancelled = err
			ex.Stopped = fmt.Sprintf("cancelled before move %d of %d: %v", next, len(c.Moves), err)
			break
		}
		now := in.Line.Now()
		el := now.Sub(ex.Start).Seconds()
		if next < len(c.Moves) && el >= c.Moves[next].AtSec-1e-9 {
			// A move once begun is carried through (checked, written, read
			// back, recorded) whatever ctx does: the test stops between
			// moves, never half way through one.
			var ml MoveLog
			if cur, why := current(actx, in); why != "" {
				ml = MoveLog{Index: next, AtSec: c.Moves[next].AtSec, Set: c.Moves[next].Set, Reason: guard.ReasonCertInvalid, Detail: why}
			} else {
				ml = executeMove(actx, in, cur, node, ex.Start, next, now)
			}
			ex.Moves = append(ex.Moves, ml)
			if err := in.Audit.entry(actx, AuditMove, c, map[string]any{"index": ml.Index, "atSec": ml.AtSec, "set": ml.Set, "allowed": ml.Allowed,
				"reason": ml.Reason, "detail": ml.Detail, "status": ml.Status, "readback": ml.Readback, "runId": in.RunID, "at": now.UnixMilli()}); err != nil {
				ex.Stopped = fmt.Sprintf("audit of move %d: %v", next, err)
				break
			}
			if !ml.Allowed || ml.Status != guard.OutcomeVerified {
				ex.Stopped = fmt.Sprintf("move %d: %s %s", next, ml.Reason, ml.Detail)
				break
			}
			next++
		}
		if el >= end-1e-9 {
			ex.Completed = true
			break
		}
		at, _ := in.Line.Step()
		if !prev.IsZero() && ex.StepSec == 0 {
			ex.StepSec = at.Sub(prev).Seconds()
		}
		prev = at
		smp := Sample{At: at, Values: map[string]float64{}}
		for _, v := range append(append([]string(nil), inputs...), outs...) {
			x, err := in.Line.Read(ctx, node(v))
			if err != nil {
				ex.Stopped = fmt.Sprintf("read %s: %v", v, err)
				break
			}
			smp.Values[v] = x
		}
		if ex.Stopped != "" {
			break
		}
		ex.Samples = append(ex.Samples, smp)
		if why := breach(limits, smp.Values); why != "" {
			ex.Stopped = "scene limit: " + why
			break
		}
	}
	ex.End = in.Line.Now()
	if len(ex.Samples) > 1 {
		ex.StepSec = ex.Samples[1].At.Sub(ex.Samples[0].At).Seconds()
	}
	if err := in.Audit.entry(actx, AuditExecuted, c, map[string]any{"completed": ex.Completed, "stopped": ex.Stopped, "runId": ex.RunID,
		"planHash": ex.PlanHash, "recipeId": ex.RecipeID, "moves": len(ex.Moves), "samples": len(ex.Samples),
		"start": ex.Start.UnixMilli(), "end": ex.End.UnixMilli()}); err != nil {
		return ex, errors.Join(cancelled, err)
	}
	return ex, cancelled
}

// current is the certificate a move is checked against: in.Current's
// (the trail's, now) when set, which must be the same signed test; why
// says why there is none.
func current(ctx context.Context, in ExecInput) (*contract.StepTestCertificate, string) {
	c := in.Cert
	if in.Current == nil {
		return c, ""
	}
	cur, err := in.Current(ctx)
	switch {
	case err != nil:
		return nil, "reload of step test " + c.TestID + ": " + err.Error()
	case cur == nil || cur.TestID != c.TestID || cur.CertificateHash != c.CertificateHash:
		return nil, "the trail of step test " + c.TestID + " now holds another certificate"
	}
	return cur, ""
}

func executeMove(ctx context.Context, in ExecInput, c *contract.StepTestCertificate, node func(string) string, start time.Time, i int, now time.Time) MoveLog {
	m := c.Moves[i]
	ml := MoveLog{Index: i, AtSec: m.AtSec, Set: m.Set}
	vars := make([]string, 0, len(m.Set))
	for v := range m.Set {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	var moves []guard.Move
	for _, v := range vars {
		from, err := in.Line.Read(ctx, node(v))
		if err != nil {
			ml.Reason, ml.Detail = "READ_FAILED", err.Error()
			return ml
		}
		moves = append(moves, guard.Move{NodeID: node(v), VariableID: v, From: from, To: m.Set[v]})
	}
	req := guard.Request{LineID: c.LineID, RunID: in.RunID, Scene: in.Scene, PublicKey: in.PublicKey, Moves: moves,
		SnapshotAt: now, Now: now, WallNow: now, StepTest: c, StepIndex: i, StepStart: start}
	d := guard.Check(ctx, in.Channels, in.History, req)
	ml.Allowed, ml.Reason, ml.Detail = d.Allowed, d.Reason, d.Detail
	if !d.Allowed {
		return ml
	}
	out, err := guard.Execute(ctx, in.Line, in.History, d, req)
	ml.Status, ml.Results = out.Status, out.Results
	if err != nil {
		ml.Detail = out.Detail
	}
	ml.Readback = map[string]float64{}
	for _, r := range out.Results {
		ml.Readback[r.Move.VariableID] = r.Readback
	}
	return ml
}

type hardRange struct {
	id, variable string
	min, max     *float64
}

func hardRanges(s *contract.SceneContract) []hardRange {
	var out []hardRange
	for _, k := range s.Constraints {
		if k.Kind == contract.KindHardRange && k.Variable != "" {
			out = append(out, hardRange{k.ID, k.Variable, k.Min, k.Max})
		}
	}
	return out
}

func breach(limits []hardRange, vals map[string]float64) string {
	for _, l := range limits {
		x, ok := vals[l.variable]
		if !ok {
			continue
		}
		if (l.min != nil && x < *l.min) || (l.max != nil && x > *l.max) {
			lo, hi := "-∞", "+∞"
			if l.min != nil {
				lo = fmt.Sprint(*l.min)
			}
			if l.max != nil {
				hi = fmt.Sprint(*l.max)
			}
			return fmt.Sprintf("%s = %g outside constraint %s [%s, %s]", l.variable, x, l.id, lo, hi)
		}
	}
	return ""
}
