package steptest_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ident/process"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
	"github.com/aml-project/aml/internal/twin/steptest"
)

var start = time.Date(2026, 11, 9, 6, 0, 0, 0, time.UTC)

const tankLine = "tank-line"

// tankScene is the frozen scene of the plant's tank line: two setpoints,
// the level as the target with a hard range (levelMax its upper limit).
func tankScene(t testing.TB, levelMax float64) *contract.SceneContract {
	t.Helper()
	f := func(x float64) *float64 { return &x }
	s := &contract.SceneContract{
		SchemaVersion: contract.SceneSchemaVersion, CreatedAt: start.Add(-48 * time.Hour), CreatedBy: "process-engineer",
		SceneID: "tank-level", SceneVersion: "1.0.0", LineID: tankLine, Phases: []string{"running"},
		Controls: []contract.SceneVariable{
			{ID: sim.TankHeater, Role: contract.RoleControl, PhysicalMeaning: "heater setpoint", Unit: "degC", Min: f(40), Max: f(60), MaxStep: f(4)},
			{ID: sim.TankFeed, Role: contract.RoleControl, PhysicalMeaning: "feed setpoint", Unit: "l/min", Min: f(10), Max: f(20), MaxStep: f(4)},
		},
		Observations: []contract.SceneVariable{{ID: sim.TankLevel, Role: contract.RoleTarget, PhysicalMeaning: "tank level", Unit: "cm", Min: f(30), Max: f(70)}},
		Constraints:  []contract.Constraint{{ID: "level", Kind: contract.KindHardRange, Variable: sim.TankLevel, Min: f(30), Max: f(levelMax)}},
		WritePolicy: contract.WritePolicy{MinNodeIntervalSec: 60, MinLineActionIntervalSec: 60, MaxActionsPerRun: 20,
			MaxDeltaPerAction: map[string]float64{sim.TankHeater: 4, sim.TankFeed: 4}},
		Status: contract.SceneDraft,
	}
	h, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Freeze("quality-lead", h, start.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	return s
}

type channels struct{ p contract.ChannelProfile }

func (c channels) Channel(context.Context, string) (*contract.ChannelProfile, error) {
	return &c.p, nil
}

var hitl = channels{contract.ChannelProfile{ChannelID: "tank-opc", LineID: tankLine, Profile: contract.ProfileHybridTwin, ControlPolicy: contract.PolicyHITLGoverned}}

type rig struct {
	scene *contract.SceneContract
	key   *cert.KeyPair
	line  *sim.TankLine
	hist  *guard.MemoryHistory
	cert  *contract.StepTestCertificate
}

// newRig designs a steps test, one variable at a time, holding hold s,
// on a settled tank, and issues it as alice.
func newRig(t *testing.T, levelMax, hold float64) *rig {
	t.Helper()
	s := tankScene(t, levelMax)
	key, err := cert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	p, err := steptest.Design(s, steptest.Options{Base: map[string]float64{sim.TankHeater: 50, sim.TankFeed: 15}, HoldSec: hold, OneAtATime: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := steptest.Issue(p, s, steptest.IssueInput{TestID: "st-1", CreatedBy: "alice", RecipeID: "tank-level", Now: start}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{scene: s, key: key, line: sim.NewTankLine(11, 1, start), hist: &guard.MemoryHistory{}, cert: c}
}

func (r *rig) exec(t *testing.T) *steptest.Execution {
	t.Helper()
	_, pub := r.key.SigningKey()
	ex, err := steptest.Execute(context.Background(), steptest.ExecInput{Cert: r.cert, Scene: r.scene, PublicKey: pub, Channels: hitl,
		History: r.hist, Line: r.line, RunID: "steptest-st-1"})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func TestStepTestRefusedWithoutApproval(t *testing.T) {
	r := newRig(t, 70, 300)
	ex := r.exec(t)
	if ex.Completed || len(ex.Moves) != 1 || ex.Moves[0].Reason != guard.ReasonCertNotApproved || len(r.hist.Records) != 0 {
		t.Fatalf("unapproved test: completed %v moves %+v writes %d", ex.Completed, ex.Moves, len(r.hist.Records))
	}
	if v, _ := r.line.Read(context.Background(), sim.TankHeater); v != 50 {
		t.Fatalf("heater %v was written", v)
	}
	// The proposer, an agent's token name, or a non-approver cannot approve.
	for _, tc := range []struct {
		by    twinstore.Approver
		roles []string
	}{
		{twinstore.Approver{Name: "alice", Role: twinstore.RoleApprover}, nil},
		{twinstore.Approver{Name: "bot", Role: twinstore.RoleApprover}, []string{"agent"}},
		{twinstore.Approver{Name: "carol", Role: "operator"}, nil},
	} {
		err := steptest.Approve(r.cert, tc.by, tc.roles, start.Add(time.Minute))
		if core.CodeOf(err) != core.CodeForbidden {
			t.Errorf("%s approved: %v", tc.by.Name, err)
		}
	}
	if r.cert.Status != contract.CertIssued {
		t.Fatalf("status %s", r.cert.Status)
	}
	// A tampered approval (status set by hand on a copy with a changed move) fails the signature.
	c := *r.cert
	c.Moves = append([]contract.StepTestMove(nil), c.Moves...)
	c.Moves[0] = contract.StepTestMove{AtSec: 0, Set: map[string]float64{sim.TankHeater: 54}}
	c.Status, c.ApprovedBy, c.ApprovedAt = contract.CertApproved, "bob", start
	r.cert = &c
	ex = r.exec(t)
	if ex.Moves[0].Reason != guard.ReasonCertInvalid || len(r.hist.Records) != 0 {
		t.Fatalf("tampered test: %+v", ex.Moves)
	}
}

// TestStepTestStoppedBySceneLimit: the level's hard upper limit (52 cm)
// lies below where the feed's down-step (move 2: −4 l/min, +2.4 cm from
// 50) takes the level: the test stops when the level crosses it, and
// nothing is written after.
func TestStepTestStoppedBySceneLimit(t *testing.T) {
	r := newRig(t, 52, 300)
	if err := steptest.Approve(r.cert, twinstore.Approver{Name: "bob", Role: twinstore.RoleApprover}, nil, start); err != nil {
		t.Fatal(err)
	}
	ex := r.exec(t)
	if ex.Completed || !strings.Contains(ex.Stopped, "scene limit") || len(ex.Moves) != 3 || len(r.hist.Records) != 3 {
		t.Fatalf("completed %v stopped %q moves %d writes %d", ex.Completed, ex.Stopped, len(ex.Moves), len(r.hist.Records))
	}
	last := ex.Samples[len(ex.Samples)-1]
	if last.Values[sim.TankLevel] <= 52 || last.At.Sub(start) >= 900*time.Second {
		t.Fatalf("stopped at %v with level %v", last.At.Sub(start), last.Values[sim.TankLevel])
	}
	for i, m := range ex.Moves {
		if m.Status != guard.OutcomeVerified || r.hist.Records[i].At.After(last.At) {
			t.Fatalf("move %d %+v written at %v", i, m, r.hist.Records[i].At)
		}
	}
	if v, _ := r.line.Read(context.Background(), sim.TankFeed); v != 11 {
		t.Fatalf("feed %v: the test went on after the limit", v)
	}
	r.line.Step()
	if len(r.hist.Records) != 3 {
		t.Fatal("written after the stop")
	}
}

// TestStepTestFitsTheTank is the must-show: an approved step test
// executed move by move through the guard on the live tank, and the
// FOPDT model fitted from it within 10 % of the tank's true gains and
// dead times.
func TestStepTestFitsTheTank(t *testing.T) {
	r := newRig(t, 70, 300)
	if err := steptest.Approve(r.cert, twinstore.Approver{Name: "bob", Role: twinstore.RoleApprover}, nil, start); err != nil {
		t.Fatal(err)
	}
	ex := r.exec(t)
	if !ex.Completed || len(ex.Moves) != 8 || len(r.hist.Records) != 8 {
		t.Fatalf("completed %v stopped %q moves %d writes %d", ex.Completed, ex.Stopped, len(ex.Moves), len(r.hist.Records))
	}
	for i, m := range ex.Moves {
		if m.Status != guard.OutcomeVerified {
			t.Fatalf("move %d: %+v", i, m)
		}
		if want := contract.StepTestActionID("st-1", i); r.hist.Records[i].CertificateID != want {
			t.Fatalf("write %d recorded as %s", i, r.hist.Records[i].CertificateID)
		}
	}
	// A move replayed is refused: its slot has passed and it was written.
	rep := r.exec(t)
	if len(rep.Moves) != 1 || rep.Moves[0].Allowed {
		t.Fatalf("replay: %+v", rep.Moves)
	}
	rep0 := rep.Moves[0].Reason
	if rep0 != guard.ReasonCertAlreadyUsed && rep0 != guard.ReasonNodeInterval && rep0 != guard.ReasonLineInterval {
		t.Fatalf("replay refused for %s", rep0)
	}
	rep1, err := steptest.Fit(context.Background(), ex, sim.TankLevel, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Against a previous model (the fitted one with gains 20 % low): the
	// report holds both curves; each unit step response ends near its K.
	prev := *rep1.Model
	prev.Pairs = append([]process.Pair(nil), prev.Pairs...)
	for i := range prev.Pairs {
		prev.Pairs[i].K *= 0.8
	}
	cmp, err := steptest.Fit(context.Background(), ex, sim.TankLevel, &prev)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cmp.Pairs {
		last := len(cmp.StepAtSec) - 1
		if math.Abs(p.PrevK-0.8*p.K) > 1e-9 || len(p.PrevStep) != len(p.Step) || math.Abs(p.Step[last]-p.K) > 0.01*math.Abs(p.K) || p.Step[0] != 0 {
			t.Fatalf("%s: comparison %+v", p.Input, p)
		}
	}
	// Against a previous model given by its step responses (a registry
	// model in the app): its curves and gains replace the process
	// model's; one that cannot answer for an input leaves no comparison.
	cmp.Compare(prevCurves{name: "m-prev", k: map[string]float64{sim.TankHeater: 1.2, sim.TankFeed: -0.5}})
	for _, p := range cmp.Pairs {
		if cmp.Previous != "m-prev" || cmp.PreviousError != "" || p.PrevTau != 0 || p.PrevK != map[string]float64{sim.TankHeater: 1.2, sim.TankFeed: -0.5}[p.Input] ||
			p.PrevStep[len(p.PrevStep)-1] != p.PrevK {
			t.Fatalf("%s: compared %+v (%s)", p.Input, p, cmp.PreviousError)
		}
	}
	rep1.Compare(prevCurves{name: "m-heater-only", k: map[string]float64{sim.TankHeater: 1}})
	if !strings.Contains(rep1.PreviousError, "feed_sp") || rep1.Pairs[0].PrevStep != nil || rep1.Pairs[1].PrevStep != nil {
		t.Fatalf("partial previous model: %q %+v", rep1.PreviousError, rep1.Pairs)
	}
	truth := sim.PlantTruth()
	want := map[string][2]float64{sim.TankFeed: {truth.KFeed, truth.ThetaFeed}, sim.TankHeater: {truth.KHeater, truth.ThetaHeater}}
	for _, p := range rep1.Pairs {
		w := want[p.Input]
		t.Logf("%s: K %.4f (true %.2f) τ %.1f s (true %.0f) θ %.2f s (true %.0f)", p.Input, p.K, w[0], p.TauSec, truth.TauSec, p.ThetaSec, w[1])
		if math.Abs(p.K-w[0]) > 0.1*math.Abs(w[0]) || math.Abs(p.ThetaSec-w[1]) > 0.1*w[1] || math.Abs(p.TauSec-truth.TauSec) > 0.1*truth.TauSec {
			t.Errorf("%s: fitted K %.4f τ %.1f θ %.2f, true K %.2f τ %.0f θ %.0f", p.Input, p.K, p.TauSec, p.ThetaSec, w[0], truth.TauSec, w[1])
		}
	}
	// linear_state_space@1 from the same run: its gains and dead times
	// within 10 % of the truth too, its step response next to the FOPDT's.
	ss := rep1.StateSpace
	if ss == nil {
		t.Fatalf("no state-space fit: %s", rep1.StateSpaceError)
	}
	t.Logf("linear_state_space@1: order %d, delays %v, free-run RMSE %.4f cm (process_model@1 %.4f)", ss.Order, ss.Delays, ss.RMSE, rep1.RMSE)
	for _, p := range rep1.Pairs {
		w := want[p.Input]
		t.Logf("%s: state-space K %.4f (true %.2f) θ %.0f s (true %.0f)", p.Input, p.SSK, w[0], p.SSDeadTimeSec, w[1])
		if math.Abs(p.SSK-w[0]) > 0.1*math.Abs(w[0]) || math.Abs(p.SSDeadTimeSec-w[1]) > 0.1*w[1] {
			t.Errorf("%s: state-space K %.4f θ %.0f, true K %.2f θ %.0f", p.Input, p.SSK, p.SSDeadTimeSec, w[0], w[1])
		}
		last := len(p.SSStep) - 1
		if len(p.SSStep) != len(p.Step) || p.SSStep[0] != 0 || math.Abs(p.SSStep[last]-p.Step[last]) > 0.05*math.Abs(p.K) {
			t.Errorf("%s: state-space step %v, process %v", p.Input, p.SSStep, p.Step)
		}
		for i, at := range rep1.StepAtSec {
			if d := math.Abs(p.SSStep[i] - p.Step[i]); d > 0.05*math.Abs(p.K) {
				t.Errorf("%s at %gs: state-space step %.4f, process %.4f", p.Input, at, p.SSStep[i], p.Step[i])
			}
		}
	}
}

// TestStepTestAuditTrail: issued, approved and executed through the
// store: the signed audit trail holds the issue, the person's signed
// approval, every move with its readback and the end, and replays to an
// APPROVED test; the proposer cannot approve through the store either.
func TestStepTestAuditTrail(t *testing.T) {
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "ops"); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 70, 300)
	r.key = key
	p, err := steptest.Design(r.scene, steptest.Options{Base: map[string]float64{sim.TankHeater: 50, sim.TankFeed: 15}, HoldSec: 300, OneAtATime: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.cert, err = steptest.Issue(p, r.scene, steptest.IssueInput{TestID: "st-1", CreatedBy: "alice", Now: start}, key); err != nil {
		t.Fatal(err)
	}
	if _, err := steptest.RecordIssue(ctx, st, key, r.cert); err != nil {
		t.Fatal(err)
	}
	if _, err := steptest.RecordIssue(ctx, st, key, r.cert); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("issued twice: %v", err)
	}
	if _, err := steptest.RecordApprove(ctx, st, key, "st-1", twinstore.Approver{Name: "alice", Role: twinstore.RoleApprover}, start); core.CodeOf(err) != core.CodeForbidden {
		t.Fatalf("proposer approved: %v", err)
	}
	rec, err := steptest.RecordApprove(ctx, st, key, "st-1", twinstore.Approver{Name: "bob", Role: twinstore.RoleApprover}, start)
	if err != nil || rec.Test.Status != contract.CertApproved || rec.Test.ApprovedBy != "bob" {
		t.Fatalf("approve: %+v %v", rec, err)
	}
	r.cert = rec.Test
	ex, err := steptest.Execute(ctx, steptest.ExecInput{Cert: r.cert, Scene: r.scene, PublicKey: key.Public, Channels: hitl,
		History: r.hist, Line: r.line, RunID: "steptest-st-1", Audit: &steptest.Auditor{Log: st.AuditLog(), Key: key, Actor: "bob"}})
	if err != nil || !ex.Completed {
		t.Fatalf("execute: %v %q", err, ex.Stopped)
	}
	rec, err = steptest.Load(ctx, st, key.Public, "st-1", start.Add(time.Hour))
	if err != nil || rec.Moves != 8 || rec.Executed == 0 || rec.Test.Status != contract.CertApproved || rec.ApproveSeq == 0 {
		t.Fatalf("replayed %+v %v", rec, err)
	}
	if v, err := st.AuditLog().Verify(ctx); err != nil || !v.OK {
		t.Fatalf("audit chain: %+v %v", v, err)
	}
}

// TestStepTestRevoked: an approved step test revoked by its proposer
// (an approver may too; another engineer or an agent may not) is refused
// by the guard at its first move (CERT_REVOKED) with nothing written; a
// second revocation is a conflict; List shows it REVOKED.
func TestStepTestRevoked(t *testing.T) {
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "ops"); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 70, 300)
	r.key = key
	p, err := steptest.Design(r.scene, steptest.Options{Base: map[string]float64{sim.TankHeater: 50, sim.TankFeed: 15}, HoldSec: 300, OneAtATime: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.cert, err = steptest.Issue(p, r.scene, steptest.IssueInput{TestID: "st-1", CreatedBy: "alice", Now: start}, key); err != nil {
		t.Fatal(err)
	}
	if _, err := steptest.RecordIssue(ctx, st, key, r.cert); err != nil {
		t.Fatal(err)
	}
	if _, err := steptest.RecordApprove(ctx, st, key, "st-1", twinstore.Approver{Name: "bob", Role: twinstore.RoleApprover}, start); err != nil {
		t.Fatal(err)
	}
	for _, by := range []steptest.Revoker{{Name: "carol", Role: "engineer"}, {Name: "bot", Role: "agent"}, {Name: "alice", Role: "engineer", Roles: []string{"agent"}}} {
		if _, err := steptest.RecordRevoke(ctx, st, key, "st-1", by, "wrong shift", start.Add(time.Minute)); core.CodeOf(err) != core.CodeForbidden {
			t.Fatalf("%+v revoked: %v", by, err)
		}
	}
	if _, err := steptest.RecordRevoke(ctx, st, key, "st-1", steptest.Revoker{Name: "alice", Role: "engineer"}, " ", start); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("revoked without a reason: %v", err)
	}
	rec, err := steptest.RecordRevoke(ctx, st, key, "st-1", steptest.Revoker{Name: "alice", Role: "engineer"}, "the tank is being cleaned", start.Add(time.Minute))
	if err != nil || rec.Test.Status != contract.CertRevoked || rec.Test.RevokedBy != "alice" || rec.Test.RevokeReason != "the tank is being cleaned" {
		t.Fatalf("revoke: %+v %v", rec, err)
	}
	if _, err := steptest.RecordRevoke(ctx, st, key, "st-1", steptest.Revoker{Name: "bob", Role: twinstore.RoleApprover}, "again", start.Add(time.Minute)); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("revoked twice: %v", err)
	}
	// The revoked test, as the trail has it, through the guard.
	r.cert = rec.Test
	ex := r.exec(t)
	if ex.Completed || len(ex.Moves) != 1 || ex.Moves[0].Reason != guard.ReasonCertRevoked || len(r.hist.Records) != 0 {
		t.Fatalf("revoked test: %+v", ex.Moves)
	}
	if v, _ := r.line.Read(ctx, sim.TankHeater); v != 50 {
		t.Fatalf("heater %v was written", v)
	}
	// Replayed from the trail later, it stays REVOKED.
	back, err := steptest.Load(ctx, st, key.Public, "st-1", start.Add(time.Hour))
	if err != nil || back.Test.Status != contract.CertRevoked {
		t.Fatalf("replayed %+v %v", back, err)
	}
	list, bad, err := steptest.List(ctx, st, key.Public, tankLine, 10, start)
	if err != nil || len(bad) != 0 || len(list) != 1 || list[0].Test.TestID != "st-1" || list[0].Test.Status != contract.CertRevoked {
		t.Fatalf("list %+v %v %v", list, bad, err)
	}
	if list, _, _ := steptest.List(ctx, st, key.Public, "other-line", 10, start); len(list) != 0 {
		t.Fatalf("other line lists %+v", list)
	}
}

// prevCurves is a previous model answering with a first-order step of
// gain k[input] (τ 60 s) and nothing for the other inputs.
type prevCurves struct {
	name string
	k    map[string]float64
}

func (p prevCurves) Name() string { return p.name }
func (p prevCurves) StepResponse(input string, at []float64) ([]float64, float64, error) {
	k, ok := p.k[input]
	if !ok {
		return nil, 0, fmt.Errorf("no input %s", input)
	}
	out := make([]float64, len(at))
	for i, t := range at {
		out[i] = k * (1 - math.Exp(-t/60))
	}
	out[len(out)-1] = k
	return out, k, nil
}

// cancellingLine cancels the test's context at its first sampling
// period: the caller went away (or the process shuts down) with the
// first move written.
type cancellingLine struct {
	*sim.TankLine
	cancel context.CancelFunc
}

func (l cancellingLine) Step() (time.Time, float64) {
	l.cancel()
	return l.TankLine.Step()
}

// TestStepTestCancelled: a step test whose context ends after its first
// move writes no further move and still records its end in the audit
// log (steptest.executed, stopped "cancelled before move 1"), the
// move's own entry included; Execute returns the context's error with
// the execution.
func TestStepTestCancelled(t *testing.T) {
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(context.Background(), key, "ops"); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, 70, 300)
	c := *r.cert
	if err := c.Approve("bob", start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ex, err := steptest.Execute(ctx, steptest.ExecInput{Cert: &c, Scene: r.scene, PublicKey: r.key.Public, Channels: hitl,
		History: r.hist, Line: cancellingLine{TankLine: r.line, cancel: cancel}, RunID: "steptest-st-1", Audit: &steptest.Auditor{Log: st.AuditLog(), Key: key, Actor: "bob"}})
	if !errors.Is(err, context.Canceled) || ex == nil || ex.Completed || len(ex.Moves) != 1 || len(r.hist.Records) != 1 || !strings.Contains(ex.Stopped, "cancelled before move 1 of 8") {
		t.Fatalf("cancelled: %v, %+v, %d writes", err, ex, len(r.hist.Records))
	}
	trail, err := st.AuditLog().Trail(context.Background(), c.TestID)
	if err != nil || len(trail) != 2 || trail[0].Action != steptest.AuditMove || trail[1].Action != steptest.AuditExecuted || !strings.Contains(string(trail[1].Payload), "cancelled before move 1") {
		t.Fatalf("trail %v %+v", err, trail)
	}
}
