package app

import (
	"context"
	"math"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/envelope"
	"github.com/aml-project/aml/internal/twin/guard"
)

// The operating-envelope use cases (package twin/envelope): under the
// bounded_auto policy a person approves an envelope instead of each move
// and the supervisor writes one re-optimised step per cycle within it.
// Approval and revocation are a person's (ActCertApprove, never an
// agent); a cycle writes to the machine (ActWrite).

var (
	opEnvelopeIssue   = Op{Name: "envelope.issue", Act: auth.ActCertRequest, Summary: "Propose a signed operating envelope (per-control bounds, moves per hour, expiry) for a bounded_auto line, queued for a person to approve"}
	opEnvelopeList    = Op{Name: "envelope.list", Act: auth.ActRead, Summary: "List operating envelopes, newest first, each verified"}
	opEnvelopeShow    = Op{Name: "envelope.show", Act: auth.ActRead, Summary: "An operating envelope as its signed audit trail has it (verified)"}
	opEnvelopeApprove = Op{Name: "envelope.approve", Act: auth.ActCertApprove, Summary: "Approve an ISSUED operating envelope (never by its proposer; bounded_auto lines only)"}
	opEnvelopeRevoke  = Op{Name: "envelope.revoke", Act: auth.ActCertApprove, Summary: "Revoke an operating envelope: the supervisor stops writing"}
	opEnvelopeCycle   = Op{Name: "envelope.cycle", Act: auth.ActWrite, Heavy: true, Summary: "Run one supervised cycle under an approved envelope: fresh snapshot, re-optimise, write the first step through the guard (stops and asks for a person when the cycle leaves the envelope)"}
)

func envelopeOps() []*Op {
	return []*Op{
		bind(&opEnvelopeIssue, (*App).EnvelopeIssue),
		bind(&opEnvelopeList, (*App).EnvelopeList),
		bind(&opEnvelopeShow, (*App).EnvelopeShow),
		bind(&opEnvelopeApprove, (*App).EnvelopeApprove),
		bind(&opEnvelopeRevoke, (*App).EnvelopeRevoke),
		bind(&opEnvelopeCycle, (*App).EnvelopeCycle),
	}
}

// EnvelopeBound is one control's range in an envelope request.
type EnvelopeBound struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// EnvelopeIssueRequest proposes an operating envelope.
type EnvelopeIssueRequest struct {
	Scene        string `json:"scene" jsonschema:"frozen scene id"`
	SceneVersion string `json:"sceneVersion,omitempty" jsonschema:"scene version (default: the latest)"`
	Model        string `json:"model" jsonschema:"model the supervisor re-optimises with"`
	Objective    string `json:"objective,omitempty" jsonschema:"objective id (default: the scene's first)"`
	// Bounds per manipulated variable (scene control id).
	Bounds          map[string]EnvelopeBound `json:"bounds" jsonschema:"per control (scene control id): the range every target must lie in"`
	MaxMovesPerHour int                      `json:"maxMovesPerHour" jsonschema:"node writes allowed in any rolling hour (1…3600)"`
	TTL             Duration                 `json:"ttl,omitempty" jsonschema:"lifetime (default 4h, at most 12h)"`
}

// Validate requires scene, model, bounds and a rate, and a TTL in range.
func (r *EnvelopeIssueRequest) Validate() error {
	if r.TTL < 0 || r.TTL.D() > contract.EnvelopeMaxTTL {
		return core.FieldErrorf(core.CodeInvalidArgument, "ttl", "ttl must be 0..%s", contract.EnvelopeMaxTTL)
	}
	if len(r.Bounds) == 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "bounds", "at least one control's bounds are required")
	}
	for v, b := range r.Bounds {
		if math.IsNaN(b.Min) || math.IsNaN(b.Max) || math.IsInf(b.Min, 0) || math.IsInf(b.Max, 0) || b.Min > b.Max {
			return core.FieldErrorf(core.CodeInvalidArgument, "bounds."+v, "bounds must be finite with min ≤ max")
		}
	}
	if r.MaxMovesPerHour < 1 || r.MaxMovesPerHour > contract.EnvelopeMaxMovesPerHour {
		return core.FieldErrorf(core.CodeInvalidArgument, "maxMovesPerHour", "maxMovesPerHour must be 1..%d", contract.EnvelopeMaxMovesPerHour)
	}
	return firstErr(required("scene", r.Scene), required("model", r.Model))
}

// EnvelopeResponse is an envelope as its verified trail has it.
type EnvelopeResponse = envelope.Record

func (a *App) envelopeEvent(r *envelope.Record) {
	if r == nil || r.Envelope == nil {
		return
	}
	e := r.Envelope
	a.publish(events.Event{Kind: envelope.EventStatus, Line: e.LineID, ID: e.EnvelopeID, Data: map[string]any{
		"status": e.Status, "proposedBy": e.CreatedBy, "approvedBy": e.ApprovedBy, "revokedBy": e.RevokedBy}})
}

// boundedAuto refuses a line whose channel is not bounded_auto: an
// envelope is never issued or approved where every move needs its own
// approval.
func (a *App) boundedAuto(ctx context.Context, lineID string) error {
	ch, err := a.d.Store.Channel(ctx, lineID)
	if err != nil {
		return err
	}
	if ch == nil || ch.ControlPolicy != contract.PolicyBoundedAuto {
		pol := "none"
		if ch != nil {
			pol = ch.ControlPolicy
		}
		return core.FieldErrorf(cert.CodeCertRefused, "controlPolicy", "line %s has control policy %s: an operating envelope is only for %s lines (%s stays one approval per move)", lineID, pol, contract.PolicyBoundedAuto, contract.PolicyHITLGoverned)
	}
	return nil
}

// EnvelopeIssue proposes a signed operating envelope, queued for a person.
func (a *App) EnvelopeIssue(ctx context.Context, p Principal, req EnvelopeIssueRequest) (*EnvelopeResponse, error) {
	return run(ctx, a, p, &opEnvelopeIssue, req, func(ctx context.Context, p Principal, req EnvelopeIssueRequest) (*EnvelopeResponse, error) {
		scene, err := a.scene(ctx, p, auth.ActCertRequest, req.Scene, req.SceneVersion)
		if err != nil {
			return nil, err
		}
		m, err := a.model(ctx, p, auth.ActCertRequest, req.Model)
		if err != nil {
			return nil, err
		}
		if m.LineID != scene.LineID {
			return nil, core.FieldErrorf(core.CodeConflict, "model", "model %s is of line %s, the scene of line %s", m.ID, m.LineID, scene.LineID)
		}
		if err := registry.CheckLineage(m, "drive an operating envelope"); err != nil {
			return nil, err
		}
		if err := a.boundedAuto(ctx, scene.LineID); err != nil {
			return nil, err
		}
		k, err := a.key()
		if err != nil {
			return nil, err
		}
		bounds := map[string]contract.ChannelBound{}
		for v, b := range req.Bounds {
			bounds[v] = contract.ChannelBound{Min: b.Min, Max: b.Max}
		}
		e, err := cert.IssueEnvelope(cert.EnvelopeInput{EnvelopeID: a.newID("env"), CreatedBy: p.Name, Scene: scene, ModelID: m.ID, ObjectiveID: req.Objective,
			Bounds: bounds, MaxMovesPerHour: req.MaxMovesPerHour}, k, a.o.Now(), req.TTL.D())
		if err != nil {
			return nil, err
		}
		r, err := envelope.Issue(ctx, a.d.Store, k, e)
		if err != nil {
			return nil, err
		}
		a.envelopeEvent(r)
		return r, nil
	})
}

// EnvelopeRequest names an envelope.
type EnvelopeRequest struct {
	ID string `json:"id" jsonschema:"envelope id"`
}

// Validate requires the id.
func (r *EnvelopeRequest) Validate() error { return required("id", r.ID) }

// envelopeFor loads envelope id, verified, after checking p's scope for
// act on its line.
func (a *App) envelopeFor(ctx context.Context, p Principal, act auth.Action, id string) (*envelope.Record, *cert.KeyPair, error) {
	k, err := a.key()
	if err != nil {
		return nil, nil, err
	}
	r, err := envelope.Load(ctx, a.d.Store, k.Public, id, a.o.Now())
	if err != nil {
		return nil, nil, err
	}
	if err := p.Allow(act, r.Envelope.LineID); err != nil {
		return nil, nil, err
	}
	return r, k, nil
}

// EnvelopeShow returns an envelope, verified.
func (a *App) EnvelopeShow(ctx context.Context, p Principal, req EnvelopeRequest) (*EnvelopeResponse, error) {
	return run(ctx, a, p, &opEnvelopeShow, req, func(ctx context.Context, p Principal, req EnvelopeRequest) (*EnvelopeResponse, error) {
		r, _, err := a.envelopeFor(ctx, p, auth.ActRead, req.ID)
		return r, err
	})
}

// EnvelopeListRequest filters envelopes.
type EnvelopeListRequest struct {
	Line  string `json:"line,omitempty" jsonschema:"only this line"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many (default 100, at most 1000)"`
}

// Validate bounds the limit.
func (r *EnvelopeListRequest) Validate() error { return limitIn("limit", r.Limit, 1, 1000) }

// EnvelopeList lists the envelopes of p's lines, newest first.
// Envelopes whose trail does not verify are left out (they never
// authorise a write).
func (a *App) EnvelopeList(ctx context.Context, p Principal, req EnvelopeListRequest) (List[*envelope.Record], error) {
	return run(ctx, a, p, &opEnvelopeList, req, func(ctx context.Context, p Principal, req EnvelopeListRequest) (List[*envelope.Record], error) {
		var zero List[*envelope.Record]
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
		items, _, err := envelope.List(ctx, a.d.Store, k.Public, req.Line, limit, a.o.Now())
		if err != nil {
			return zero, err
		}
		return ListOf(filter(p, items, func(r *envelope.Record) string { return r.Envelope.LineID })), nil
	})
}

// EnvelopeApprove approves an ISSUED envelope, signed with the deployment
// key naming the approver and their role; its proposer never can.
func (a *App) EnvelopeApprove(ctx context.Context, p Principal, req EnvelopeRequest) (*EnvelopeResponse, error) {
	return run(ctx, a, p, &opEnvelopeApprove, req, func(ctx context.Context, p Principal, req EnvelopeRequest) (*EnvelopeResponse, error) {
		r, k, err := a.envelopeFor(ctx, p, auth.ActCertApprove, req.ID)
		if err != nil {
			return nil, err
		}
		if err := a.boundedAuto(ctx, r.Envelope.LineID); err != nil {
			return nil, err
		}
		r, err = envelope.Approve(ctx, a.d.Store, k, req.ID, twinstore.Approver{Name: p.Name, Role: string(p.Role)}, a.o.Now())
		if err != nil {
			return nil, err
		}
		a.envelopeEvent(r)
		return r, nil
	})
}

// EnvelopeRevokeRequest revokes an envelope with a reason.
type EnvelopeRevokeRequest struct {
	ID     string `json:"id" jsonschema:"envelope id"`
	Reason string `json:"reason" jsonschema:"why (recorded in the audit log)"`
}

// Validate requires id and reason.
func (r *EnvelopeRevokeRequest) Validate() error {
	return firstErr(required("id", r.ID), required("reason", r.Reason))
}

// EnvelopeRevoke revokes an envelope.
func (a *App) EnvelopeRevoke(ctx context.Context, p Principal, req EnvelopeRevokeRequest) (*EnvelopeResponse, error) {
	return run(ctx, a, p, &opEnvelopeRevoke, req, func(ctx context.Context, p Principal, req EnvelopeRevokeRequest) (*EnvelopeResponse, error) {
		_, k, err := a.envelopeFor(ctx, p, auth.ActCertApprove, req.ID)
		if err != nil {
			return nil, err
		}
		r, err := envelope.Revoke(ctx, a.d.Store, k, req.ID, p.Name, req.Reason, a.o.Now())
		if err != nil {
			return nil, err
		}
		a.envelopeEvent(r)
		return r, nil
	})
}

// EnvelopeCycleRequest runs one supervised cycle.
type EnvelopeCycleRequest struct {
	ID   string `json:"id" jsonschema:"envelope id"`
	Seed uint64 `json:"seed,omitempty" jsonschema:"optimiser seed (default 1)"`
	// Writer writes to the machine. Only in-process callers (the demo,
	// the tests) set it; otherwise the writer the process's operator
	// configured for the envelope's line (Options.LineWriters), else a
	// recording writer seeded with the fresh snapshot's control values.
	Writer guard.Writer `json:"-"`
}

// Validate requires the id.
func (r *EnvelopeCycleRequest) Validate() error { return required("id", r.ID) }

// EnvelopeCycle runs one supervised cycle under an approved envelope: a
// fresh snapshot of its scene (with its model's state estimate), the
// model's latest twin gate, a re-optimisation from the snapshot (stored
// as a trial), then envelope.Cycle — the first step written through the
// write guard and checked against the envelope, or the envelope stopped
// with the reason and a person asked for (event envelope.stopped). A
// refusal or stop returns the result with AML_WRITE_DENIED.
func (a *App) EnvelopeCycle(ctx context.Context, p Principal, req EnvelopeCycleRequest) (envelope.CycleResult, error) {
	return run(ctx, a, p, &opEnvelopeCycle, req, func(ctx context.Context, p Principal, req EnvelopeCycleRequest) (envelope.CycleResult, error) {
		r, k, err := a.envelopeFor(ctx, p, auth.ActWrite, req.ID)
		if err != nil {
			return envelope.CycleResult{}, err
		}
		e := r.Envelope
		in := envelope.CycleInput{EnvelopeID: e.EnvelopeID, Actor: p.Name, ActionID: a.newID("cyc"), Now: a.o.Now(), WallNow: a.o.WallNow(), SnapshotMaxAge: certMaxAge}
		// Only an envelope in force is worth a snapshot and a search; the
		// others are refused by Cycle as they are.
		if e.Status == contract.CertApproved && !r.Expired {
			if g, err := a.d.Store.LatestGateEval(ctx, e.ModelID); err == nil {
				in.GatePassed = g.Passed
				if !g.Passed {
					in.GateDetail = "latest twin gate evaluation " + g.GateEvalID + " failed"
				}
			} else {
				in.GateDetail = "no twin gate evaluation: " + err.Error()
			}
			scene, err := a.d.Store.GetScene(ctx, e.SceneID, e.SceneVersion)
			if err != nil {
				return envelope.CycleResult{}, err
			}
			if in.GatePassed {
				snap, err := a.takeSnapshot(ctx, p, scene, SnapshotTakeRequest{Scene: e.SceneID, SceneVersion: e.SceneVersion, Model: e.ModelID})
				if err != nil {
					in.SnapshotProblem = err.Error()
				} else {
					in.Snapshot = snap.Snapshot
				}
			}
			if in.Snapshot != nil && in.Snapshot.DataQuality.Fresh {
				if err := a.envelopeOptimize(ctx, p, e, req.Seed, &in); err != nil {
					return envelope.CycleResult{}, err
				}
			}
		}
		w, err := a.writerFor(ctx, e.LineID, req.Writer)
		if err != nil {
			return envelope.CycleResult{}, err
		}
		if w == nil {
			var vals map[string]float64
			if in.Snapshot != nil {
				vals = in.Snapshot.ControlValues
			}
			scene, _ := a.d.Store.GetScene(ctx, e.SceneID, e.SceneVersion)
			w = guard.NewRecordingWriter(recordingSeed(scene, vals))
		}
		return envelope.Cycle(ctx, a.d.Store, k.Public, w, in, a.d.Bus)
	})
}

// envelopeOptimize re-optimises from in.Snapshot with the envelope's
// model and objective and sets in.Trial (the stored best trial) or, when
// no candidate passed because the snapshot is out of distribution,
// in.SnapshotOOD.
func (a *App) envelopeOptimize(ctx context.Context, p Principal, e *contract.EnvelopeCertificate, seed uint64, in *envelope.CycleInput) error {
	snap, scene, obj, err := a.twinInputs(ctx, p, e.ModelID, in.Snapshot.SnapshotID, e.ObjectiveID)
	if err != nil {
		return err
	}
	if seed == 0 {
		seed = 1
	}
	res, err := engine.RunOptimize(ctx, a.d.Store, a.d.DataDir, e.ModelID, engine.OptimizeInput{Scene: scene, Snapshot: snap, Objective: obj,
		Mode: a.ResolveMode(ctx, ModeAuto, e.ModelID), Seed: seed, TrialID: a.newID("trial"), CreatedBy: p.Name, Now: a.o.Now().UTC()})
	if err != nil {
		return err
	}
	if res.Best == nil {
		for _, c := range res.Ranked {
			if c.Source == "baseline" && c.RejectCode == contract.RejectOOD {
				in.SnapshotOOD = &contract.OutOfDistribution{Distance: c.OODDistance, Accepted: false, RejectCode: contract.RejectOOD}
			}
		}
		return nil
	}
	rec, err := a.d.Store.PutTrial(ctx, res.Best, contract.TrialOptimize, "")
	if err != nil {
		return err
	}
	a.trialDone(rec, "envelope")
	in.Trial = res.Best
	return nil
}
