package benefit

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/envelope"
	"github.com/aml-project/aml/internal/twin/guard"
)

// governor is the envelope mode's governed write path: the real
// operating-envelope certificate (cert.IssueEnvelope, issued by the
// engineer, approved by a second person, both recorded in the
// hash-chained audit log of the study's store) and one envelope.Cycle per
// controller cycle, which verifies the envelope and its trail, checks the
// moves with the write guard against the envelope, the scene's write
// policy and the channel's bounds, writes them to the simulated line and
// audits them. A stop (the supervisor revoked the envelope) needs a new
// envelope approved by a person: the study gives it at once and counts
// the approval and the stop's reason.
type governor struct {
	st      store.Store
	key     *cert.KeyPair
	scene   *contract.SceneContract // frozen
	modelID string
	objID   string
	bounds  map[string]contract.ChannelBound
	rate    int
	gate    bool
	gateWhy string

	envID string
	n     int // envelopes issued
	cyc   int // cycles run
	moves []int64
}

// lineWriter writes the simulated line's controls (node id = control id).
type lineWriter struct{ l *loop }

func (w lineWriter) Write(_ context.Context, node string, v float64) error {
	if _, ok := controlsMap(w.l.u)[node]; !ok {
		return fmt.Errorf("the line has no control node %s", node)
	}
	w.l.u = controlsOf(map[string]float64{node: v}, w.l.u)
	return nil
}

func (w lineWriter) Read(_ context.Context, node string) (float64, error) {
	v, ok := controlsMap(w.l.u)[node]
	if !ok {
		return 0, fmt.Errorf("the line has no control node %s", node)
	}
	return v, nil
}

// newGovernor sets the study's store up for governed writes: the
// deployment key, the study scene frozen, a bounded_auto channel bounded
// by the scene's control ranges.
func newGovernor(ctx context.Context, o Options, scene *contract.SceneContract, obj *contract.ObjectiveProfile, modelID string, gatePassed bool, gateWhy string) (*governor, error) {
	st := o.Store
	key, err := cert.LoadOrCreateKey(o.DataDir)
	if err != nil {
		return nil, err
	}
	if err := st.RegisterSigningKey(ctx, key, Engineer); err != nil {
		return nil, err
	}
	sc := *scene
	if err := st.PutScene(ctx, &sc); err != nil {
		return nil, err
	}
	h, err := sc.Hash()
	if err != nil {
		return nil, err
	}
	frozen, err := st.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, Approver, h)
	if err != nil {
		return nil, err
	}
	b := map[string]contract.ChannelBound{}
	for _, c := range frozen.Controls {
		if c.Min != nil && c.Max != nil {
			b[c.ID] = contract.ChannelBound{Min: *c.Min, Max: *c.Max}
		}
	}
	if _, err := st.PutObjective(ctx, obj); err != nil {
		return nil, err
	}
	g := &governor{st: st, key: key, scene: frozen, modelID: modelID, objID: obj.ObjectiveID, bounds: b, rate: o.MaxMovesPerHour, gate: gatePassed, gateWhy: gateWhy}
	return g, g.setPolicy(ctx, contract.PolicyBoundedAuto)
}

// approve issues a new envelope at now (the engineer) and has the
// approver approve it; it counts the approval.
func (g *governor) approve(ctx context.Context, now time.Time, res *ModeResult) error {
	g.n++
	g.envID = fmt.Sprintf("benefit-envelope-%d", g.n)
	e, err := cert.IssueEnvelope(cert.EnvelopeInput{EnvelopeID: g.envID, CreatedBy: Engineer, Scene: g.scene, ModelID: g.modelID, ObjectiveID: g.objID,
		Bounds: g.bounds, MaxMovesPerHour: g.rate}, g.key, now, contract.EnvelopeMaxTTL)
	if err != nil {
		return err
	}
	if _, err := envelope.Issue(ctx, g.st, g.key, e); err != nil {
		return err
	}
	if _, err := envelope.Approve(ctx, g.st, g.key, g.envID, twinstore.Approver{Name: Approver, Role: twinstore.RoleApprover}, now); err != nil {
		return err
	}
	res.Approvals++
	g.moves = g.moves[:0] // the new envelope's rate starts afresh
	return nil
}

// cycle writes the trial's first step through envelope.Cycle at now (the
// action counts against the snapshot's run).
// written says whether the line was written.
func (g *governor) cycle(ctx context.Context, l *loop, now time.Time, snap *contract.TwinSnapshot, trial *contract.VirtualTrial) (bool, error) {
	if g.envID == "" {
		if err := g.approve(ctx, now, l.res); err != nil {
			return false, err
		}
	}
	// the supervisor does not ask for what the envelope's rate cannot
	// give: it holds (a RATE_EXCEEDED denial would stop the envelope)
	n := 0
	for _, t := range g.moves {
		if now.UnixMilli()-t < guard.EnvelopeRateWindow.Milliseconds() {
			n++
		}
	}
	if n+len(trial.CandidateControlTrajectory[0]) > g.rate {
		l.res.Held++
		return false, nil
	}
	g.cyc++
	in := envelope.CycleInput{EnvelopeID: g.envID, Actor: Engineer, ActionID: fmt.Sprintf("c%d", g.cyc), Snapshot: snap, Trial: trial,
		GatePassed: g.gate, GateDetail: g.gateWhy, Now: now, WallNow: now}
	r, err := envelope.Cycle(ctx, g.st, g.key.Public, lineWriter{l}, in, nil)
	switch r.Status {
	case envelope.StatusWritten:
		rec, lerr := envelope.Load(ctx, g.st, g.key.Public, g.envID, now)
		if lerr != nil {
			return false, lerr
		}
		for _, w := range r.Writes {
			b, ok := rec.Envelope.Bounds[w.VariableID]
			if !ok || w.To < b.Min || w.To > b.Max || math.Abs(w.Readback-w.To) > guard.Tolerance*math.Max(1, math.Abs(w.To)) {
				l.res.OutsideEnvelope++
			}
			g.moves = append(g.moves, now.UnixMilli())
			l.res.Moves++
		}
		return true, nil
	case envelope.StatusHeld:
		l.res.Held++
		return false, nil
	case envelope.StatusStopped:
		if r.Reason == guard.ReasonOutsideEnvelope {
			l.res.Refused++
		}
		if l.res.Stops == nil {
			l.res.Stops = map[string]int{}
		}
		l.res.Stops[r.Reason]++
		g.envID = "" // a person approves a new envelope before the next write
		return false, nil
	}
	if err == nil {
		err = core.Errorf(core.CodeInternal, "envelope cycle %s: %s %s", in.ActionID, r.Status, r.Detail)
	}
	return false, err
}

// auditedWrites counts the node writes ("write.attempt"; the line's
// claims, which name no node, are not counted) the audit log holds for
// the line from from on, before to (a mode's span of the study's clock).
func (g *governor) auditedWrites(ctx context.Context, from, to int64) (int, error) {
	rows, err := g.st.AuditWrites(ctx, g.scene.LineID, time.UnixMilli(from))
	n := 0
	for _, r := range rows {
		if r.NodeID != "" && r.At.UnixMilli() < to {
			n++
		}
	}
	return n, err
}

// setPolicy sets the line's channel to the control policy a mode runs
// under (hitl_governed for per_move, bounded_auto for envelope), bounded
// by the scene's control ranges; the channel change is audited.
func (g *governor) setPolicy(ctx context.Context, policy string) error {
	_, err := g.st.SetChannel(ctx, contract.ChannelRecord{LineID: g.scene.LineID, Profile: "hybrid_twin", ControlPolicy: policy, Bounds: g.bounds}, Approver)
	return err
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }
