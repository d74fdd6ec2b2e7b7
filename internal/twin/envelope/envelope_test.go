package envelope_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/postgres"
	"github.com/aml-project/aml/internal/store/postgres/pgtest"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/envelope"
	"github.com/aml-project/aml/internal/twin/guard"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

const line = "line-injection-01"

var bob = twinstore.Approver{Name: "bob", Role: twinstore.RoleApprover}

type fixture struct {
	st    store.Store
	key   *cert.KeyPair
	scene *contract.SceneContract
	w     *guard.RecordingWriter
	bus   *events.Bus
	n     int
}

// newFixture: a frozen default scene, an active run, a
// hybrid_twin/bounded_auto channel (policy) with wide bounds, the
// deployment key registered, a line whose nodes hold baseline.
func newFixture(t *testing.T, policy string) *fixture {
	t.Helper()
	st, dir := testfix.SQLite(t)
	return newFixtureOn(t, st, dir, policy)
}

// backends runs fn on a fresh fixture on SQLite and on PostgreSQL (when
// AML_TEST_PG names a server; pgtest skips otherwise, fails in CI).
func backends(t *testing.T, policy string, fn func(t *testing.T, f *fixture)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, newFixture(t, policy)) })
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), pgtest.Schema(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		fn(t, newFixtureOn(t, st, t.TempDir(), policy))
	})
}

func newFixtureOn(t *testing.T, st store.Store, dir, policy string) *fixture {
	t.Helper()
	ctx := context.Background()
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "ops"); err != nil {
		t.Fatal(err)
	}
	sc := contract.DefaultInjectionScene()
	if err := st.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	h, _ := sc.Hash()
	if sc, err = st.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, "quality-lead", h); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, core.Run{ID: "run-1", LineID: line, ProductID: "P", RecipeID: "R", StartedMs: 1, Status: core.RunActive}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetChannel(ctx, contract.ChannelRecord{LineID: line, Profile: "hybrid_twin", ControlPolicy: policy,
		Bounds: map[string]contract.ChannelBound{"hold_pressure": {Min: 50, Max: 90}, "hold_time": {Min: 4, Max: 14}, "melt_temperature_setpoint": {Min: 235, Max: 260}}}, "ops"); err != nil {
		t.Fatal(err)
	}
	return &fixture{st: st, key: key, scene: sc, bus: events.New(),
		w: guard.NewRecordingWriter(map[string]float64{"hold_pressure": 64, "hold_time": 8, "melt_temperature_setpoint": 246})}
}

// envelope issues (alice) and, when approve, approves (bob) envelope id.
func (f *fixture) envelope(t *testing.T, id string, maxMoves int, approve bool) {
	t.Helper()
	ctx := context.Background()
	e, err := cert.IssueEnvelope(cert.EnvelopeInput{EnvelopeID: id, CreatedBy: "alice", Scene: f.scene, ModelID: "hybrid-1",
		Bounds:          map[string]contract.ChannelBound{"hold_pressure": {Min: 60, Max: 70}, "hold_time": {Min: 6, Max: 10}, "melt_temperature_setpoint": {Min: 240, Max: 250}},
		MaxMovesPerHour: maxMoves}, f.key, t0.Add(-10*time.Minute), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envelope.Issue(ctx, f.st, f.key, e); err != nil {
		t.Fatal(err)
	}
	if approve {
		if _, err := envelope.Approve(ctx, f.st, f.key, id, bob, t0.Add(-5*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
}

// input is a cycle at now: a fresh snapshot of the writer's values and a
// passing trial moving by delta from them.
func (f *fixture) input(id string, now time.Time, delta map[string]float64) envelope.CycleInput {
	f.n++
	cur := map[string]float64{}
	first := map[string]float64{}
	for k, v := range f.w.Values {
		cur[k], first[k] = v, v+delta[k]
	}
	snapID := "snap-" + string(rune('a'+f.n))
	snap := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: now.Add(-5 * time.Second), CreatedBy: "twin-runtime",
		SnapshotID: snapID, SceneID: f.scene.SceneID, SceneVersion: f.scene.SceneVersion, LineID: line, Phase: "holding",
		CapturedAt: now.Add(-5 * time.Second), ControlValues: cur, DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, EstimatorVersion: "last-valid@1"}
	tr := &contract.VirtualTrial{SchemaVersion: contract.TrialSchemaVersion, CreatedAt: now.Add(-3 * time.Second), CreatedBy: "twin-runtime",
		TrialID: "trial-" + snapID, SnapshotID: snapID, ModelID: "hybrid-1", ObjectiveID: "weight-quality",
		CandidateControlTrajectory: []map[string]float64{first},
		Uncertainty:                contract.Uncertainty{MaxStd: 0.1, Coverage: 0.92, EnsembleSize: 5},
		OutOfDistribution:          contract.OutOfDistribution{Distance: 0.4, Disagreement: 0.05, Accepted: true},
		ConstraintResults:          []contract.ConstraintResult{{ID: "weight", Passed: true, Detail: "ok"}},
		BaselineComparison:         contract.BaselineComparison{BaselineCost: 1, CandidateCost: 0.6, Improvement: 0.4},
	}
	return envelope.CycleInput{EnvelopeID: id, Actor: "supervisor", ActionID: "c" + string(rune('0'+f.n)), Snapshot: snap, Trial: tr, GatePassed: true, Now: now}
}

var small = map[string]float64{"hold_pressure": 1, "hold_time": 0.25, "melt_temperature_setpoint": 1}

func (f *fixture) cycle(in envelope.CycleInput) (envelope.CycleResult, error) {
	return envelope.Cycle(context.Background(), f.st, f.key.Public, f.w, in, f.bus)
}

func TestCycleWritesWithinEnvelope(t *testing.T) {
	backends(t, contract.PolicyBoundedAuto, cycleWritesWithinEnvelope)
}

func cycleWritesWithinEnvelope(t *testing.T, f *fixture) {
	f.envelope(t, "env-1", 12, true)
	for i := range 2 {
		res, err := f.cycle(f.input("env-1", t0.Add(time.Duration(i)*2*time.Minute), small))
		if err != nil || res.Status != envelope.StatusWritten || len(res.Writes) != 3 {
			t.Fatalf("cycle %d: %v %+v", i, err, res)
		}
	}
	if got := f.w.Values["hold_pressure"]; got != 66 {
		t.Fatalf("hold_pressure %v after two cycles, want 66", got)
	}
	// Every write is audited under its cycle's action id.
	es, err := f.st.AuditLog().List(context.Background(), 0, 1000, contract.EnvelopeActionPrefix("env-1")+"c1")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, e := range es {
		if e.Action == twinstore.AuditWriteAttempt {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d audited writes of cycle c1, want 3", n)
	}
	// Holding: a trial that changes nothing writes nothing and keeps the
	// envelope in force.
	in := f.input("env-1", t0.Add(4*time.Minute), nil)
	if res, err := f.cycle(in); err != nil || res.Status != envelope.StatusHeld {
		t.Fatalf("no change: %v %+v", err, res)
	}
}

// TestCycleRefusals: every path that refuses (the envelope does not
// authorise writing) or stops (it did, and the cycle left it): nothing is
// written, and a stop revokes the envelope and raises EventStopped.
type refusalCase struct {
	name   string
	policy string
	setup  func(t *testing.T, f *fixture) // default: env-1, 12 moves/h, approved
	mutate func(f *fixture, in *envelope.CycleInput)
	status string
	reason string
}

func TestCycleRefusals(t *testing.T) {
	approved := func(t *testing.T, f *fixture) { f.envelope(t, "env-1", 12, true) }
	cases := []refusalCase{
		{"never issued", "", func(*testing.T, *fixture) {}, nil, envelope.StatusRefused, guard.ReasonNoCertificate},
		{"not approved", "", func(t *testing.T, f *fixture) { f.envelope(t, "env-1", 12, false) }, nil, envelope.StatusRefused, guard.ReasonCertNotApproved},
		{"revoked", "", func(t *testing.T, f *fixture) {
			approved(t, f)
			if _, err := envelope.Revoke(context.Background(), f.st, f.key, "env-1", "carol", "mould change", t0.Add(-time.Minute)); err != nil {
				t.Fatal(err)
			}
		}, nil, envelope.StatusRefused, guard.ReasonCertRevoked},
		{"hitl_governed stays one approval per move", contract.PolicyHITLGoverned, nil, nil, envelope.StatusRefused, guard.ReasonEnvelopeNotAllowed},
		{"expired", "", nil, func(f *fixture, in *envelope.CycleInput) { *in = f.input("env-1", t0.Add(2*time.Hour), small) }, envelope.StatusStopped, guard.ReasonCertExpired},
		{"outside bounds", "", nil, func(_ *fixture, in *envelope.CycleInput) {
			in.Trial.CandidateControlTrajectory[0]["hold_time"] = 10.2
			in.Snapshot.ControlValues["hold_time"] = 10
		}, envelope.StatusStopped, guard.ReasonOutsideEnvelope},
		{"rate exceeded", "", func(t *testing.T, f *fixture) {
			f.envelope(t, "env-1", 4, true)
			if res, err := f.cycle(f.input("env-1", t0.Add(-2*time.Minute), small)); err != nil {
				t.Fatalf("first cycle: %v %+v", err, res)
			}
		}, nil, envelope.StatusStopped, guard.ReasonRateExceeded},
		{"gate failure", "", nil, func(_ *fixture, in *envelope.CycleInput) {
			in.GatePassed, in.GateDetail = false, "G8 shadow coverage 78 %"
		}, envelope.StatusStopped, envelope.ReasonGateFailed},
		{"OOD trial", "", nil, func(_ *fixture, in *envelope.CycleInput) { in.Trial.OutOfDistribution.Accepted = false }, envelope.StatusStopped, envelope.ReasonOOD},
		{"OOD snapshot", "", nil, func(_ *fixture, in *envelope.CycleInput) {
			in.Trial, in.SnapshotOOD = nil, &contract.OutOfDistribution{Distance: 9, Accepted: false}
		}, envelope.StatusStopped, envelope.ReasonOOD},
		{"stale connector (stale nodes)", "", nil, func(_ *fixture, in *envelope.CycleInput) {
			in.Snapshot.DataQuality = contract.DataQuality{Fresh: false, Completeness: 0.6, StaleNodeIDs: []string{"n-weight"}}
		}, envelope.StatusStopped, envelope.ReasonStaleConnector},
		{"stale connector (old snapshot)", "", nil, func(_ *fixture, in *envelope.CycleInput) { in.Snapshot.CapturedAt = in.Now.Add(-5 * time.Minute) }, envelope.StatusStopped, envelope.ReasonStaleConnector},
		{"no snapshot", "", nil, func(_ *fixture, in *envelope.CycleInput) { in.Snapshot = nil }, envelope.StatusStopped, envelope.ReasonStaleConnector},
		{"trial breaks a constraint", "", nil, func(_ *fixture, in *envelope.CycleInput) {
			in.Trial.ConstraintResults[0] = contract.ConstraintResult{ID: "weight", Passed: false, Detail: "34.2 g > 34 g"}
		}, envelope.StatusStopped, envelope.ReasonTrialFailed},
		{"delta too large", "", nil, func(_ *fixture, in *envelope.CycleInput) {
			in.Trial.CandidateControlTrajectory[0]["hold_pressure"] = 67
		}, envelope.StatusStopped, guard.ReasonDeltaTooLarge},
		{"readback differs", "", nil, func(f *fixture, _ *envelope.CycleInput) {
			f.w.Distort = func(node string, v float64) float64 { return v + 0.5 }
		}, envelope.StatusStopped, envelope.ReasonWriteFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := c.policy
			if pol == "" {
				pol = contract.PolicyBoundedAuto
			}
			backends(t, pol, func(t *testing.T, f *fixture) { refusal(t, f, c) })
		})
	}
}

func refusal(t *testing.T, f *fixture, c refusalCase) {
	t.Helper()
	approved := func(t *testing.T, f *fixture) { f.envelope(t, "env-1", 12, true) }
	sub := f.bus.Subscribe(8, nil)
	if c.setup == nil {
		approved(t, f)
	} else {
		c.setup(t, f)
	}
	before := len(f.w.Writes)
	in := f.input("env-1", t0, small)
	if c.mutate != nil {
		c.mutate(f, &in)
	}
	res, err := f.cycle(in)
	if err == nil || res.Status != c.status || res.Reason != c.reason {
		t.Fatalf("want %s %s, got err=%v %s %s: %s", c.status, c.reason, err, res.Status, res.Reason, res.Detail)
	}
	if core.CodeOf(err) != core.CodeWriteDenied {
		t.Fatalf("error code %s", core.CodeOf(err))
	}
	if c.reason != envelope.ReasonWriteFailed && len(f.w.Writes) != before {
		t.Fatalf("%d writes reached the line", len(f.w.Writes)-before)
	}
	if c.status != envelope.StatusStopped {
		return
	}
	// A stop revokes the envelope and asks for a person.
	select {
	case ev := <-sub.C:
		if ev.Kind != envelope.EventStopped || ev.ID != "env-1" || ev.Data["askPerson"] != true {
			t.Fatalf("event %+v", ev)
		}
	default:
		t.Fatal("no stop event")
	}
	r, err := envelope.Load(context.Background(), f.st, f.key.Public, "env-1", t0)
	if err != nil || r.Envelope.Status != contract.CertRevoked || r.Stop == "" || r.Envelope.RevokedBy != envelope.SupervisorActor {
		t.Fatalf("after the stop: %v %+v", err, r)
	}
	next := f.input("env-1", t0.Add(3*time.Minute), small)
	if res, err := f.cycle(next); err == nil || res.Reason != guard.ReasonCertRevoked {
		t.Fatalf("a stopped envelope wrote again: %v %+v", err, res)
	}
}

func TestApproveRules(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, contract.PolicyBoundedAuto)
	f.envelope(t, "env-1", 12, false)
	for _, who := range []twinstore.Approver{{Name: "Alice", Role: twinstore.RoleApprover}, {Name: "dave", Role: "operator"}} {
		if _, err := envelope.Approve(ctx, f.st, f.key, "env-1", who, t0); core.CodeOf(err) != core.CodeForbidden {
			t.Fatalf("%+v approved: %v", who, err)
		}
	}
	if _, err := envelope.Approve(ctx, f.st, f.key, "env-1", bob, t0.Add(3*time.Hour)); core.CodeOf(err) != core.CodeCertExpired {
		t.Fatalf("approved after expiry: %v", err)
	}
	if _, err := envelope.Approve(ctx, f.st, f.key, "env-1", bob, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := envelope.Approve(ctx, f.st, f.key, "env-1", bob, t0); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("approved twice: %v", err)
	}
	e, err := cert.IssueEnvelope(cert.EnvelopeInput{EnvelopeID: "env-1", CreatedBy: "alice", Scene: f.scene, ModelID: "m", Bounds: map[string]contract.ChannelBound{"hold_time": {Min: 6, Max: 7}}, MaxMovesPerHour: 1}, f.key, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envelope.Issue(ctx, f.st, f.key, e); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("issued an id twice: %v", err)
	}
}

// TestTamperedTrail: an attacker with write access to the database but not
// the deployment key cannot widen an envelope, forge its approval or
// have an unsigned one accepted.
func TestTamperedTrail(t *testing.T) {
	ctx := context.Background()
	t.Run("widened bounds in the issue entry", func(t *testing.T) {
		f := newFixture(t, contract.PolicyBoundedAuto)
		f.envelope(t, "env-1", 12, true)
		db := f.st.(*sqlite.Store).DB()
		if _, err := db.Exec(`DROP TRIGGER audit_log_no_update`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE audit_log SET payload = replace(payload, '"max":70', '"max":900') WHERE action='envelope.issue'`); err != nil {
			t.Fatal(err)
		}
		res, err := f.cycle(f.input("env-1", t0, small))
		if err == nil || res.Reason != guard.ReasonCertInvalid {
			t.Fatalf("tampered envelope: %v %+v", err, res)
		}
	})
	t.Run("approval signed by another key", func(t *testing.T) {
		f := newFixture(t, contract.PolicyBoundedAuto)
		f.envelope(t, "env-1", 12, false)
		other, err := cert.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		// The forger runs Approve with their own key: the statement is
		// signed, but not by a key of the deployment's keyring.
		if _, err := envelope.Approve(ctx, f.st, other, "env-1", bob, t0.Add(-time.Minute)); err == nil {
			t.Fatal("approved with a foreign key")
		}
		if _, err := f.st.AppendAudit(ctx, "bob", envelope.AuditApprove, "env-1", line, map[string]any{"statementHash": strings.Repeat("a", 64)}); err != nil {
			t.Fatal(err)
		}
		res, err := f.cycle(f.input("env-1", t0, small))
		if err == nil || res.Reason != guard.ReasonCertInvalid {
			t.Fatalf("unsigned approval: %v %+v", err, res)
		}
	})
}
