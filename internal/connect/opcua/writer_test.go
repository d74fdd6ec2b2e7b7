package opcua

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// The line's nominal setpoints (what the simulated server starts with)
// and a certified first step within the default scene's step limits.
var (
	nominal = map[string]float64{sim.NodeHoldPressure: 65, sim.NodeHoldTime: 8, sim.NodeMeltTemperatureSetpoint: 245}
	step0   = map[string]float64{sim.NodeHoldPressure: 66, sim.NodeHoldTime: 8.5, sim.NodeMeltTemperatureSetpoint: 246}
)

type certFixture struct {
	st    *sqlite.Store
	key   *cert.KeyPair
	scene *contract.SceneContract
}

// newCertFixture stores a frozen default scene, a model row, the default
// objective and a hybrid_twin / hitl_governed channel for the line.
func newCertFixture(t *testing.T) *certFixture {
	t.Helper()
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
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
	if err := st.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: sim.DefaultLineID, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/ds", SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind, artifact_path, artifact_hash, created_at, stage_changed_at)
		VALUES ('hybrid-1','job-1','ds',?, 'P','R','mpc_surrogate','hybrid_residual@1','candidate','aml.hybrid/1','models/hybrid-1',?,1,1)`, sim.DefaultLineID, strings.Repeat("c", 64)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObjective(ctx, contract.DefaultInjectionObjective()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetChannel(ctx, contract.ChannelRecord{LineID: sim.DefaultLineID, Profile: contract.ProfileHybridTwin, ControlPolicy: contract.PolicyHITLGoverned}, "ops"); err != nil {
		t.Fatal(err)
	}
	// The line's active run, which a governed write counts against.
	if err := st.CreateRun(ctx, core.Run{ID: "run-1", LineID: sim.DefaultLineID, ProductID: "P", RecipeID: "R", StartedMs: 1, Status: core.RunActive}); err != nil {
		t.Fatal(err)
	}
	return &certFixture{st: st, key: key, scene: sc}
}

// certify stores a snapshot (captured 5 s before t0 at the nominal
// setpoints), a passing trial to step0, issues its certificate at t0−2 s
// (TTL 15 min) and approves it by another person when approve.
func (f *certFixture) certify(t *testing.T, name string, approve bool) string {
	t.Helper()
	ctx := context.Background()
	at := t0.Add(-5 * time.Second)
	s := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: at, CreatedBy: "twin-runtime", SnapshotID: "snap-" + name,
		SceneID: f.scene.SceneID, SceneVersion: f.scene.SceneVersion, LineID: sim.DefaultLineID, Phase: "holding", CapturedAt: at,
		DAQWatermark: at.UnixMilli(), ControlValues: nominal, DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, EstimatorVersion: "last-valid@1"}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutSnapshot(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	second := map[string]float64{}
	for k, v := range step0 {
		second[k] = v
	}
	tr := &contract.VirtualTrial{
		SchemaVersion: contract.TrialSchemaVersion, CreatedAt: t0.Add(-3 * time.Second), CreatedBy: "twin-runtime",
		TrialID: "trial-" + name, SnapshotID: "snap-" + name, ModelID: "hybrid-1", ObjectiveID: "weight-quality",
		CandidateControlTrajectory: []map[string]float64{step0, second},
		Uncertainty:                contract.Uncertainty{MaxStd: 0.1, Coverage: 0.92, EnsembleSize: 5},
		OutOfDistribution:          contract.OutOfDistribution{Distance: 0.4, Disagreement: 0.05, Accepted: true},
		ConstraintResults: []contract.ConstraintResult{
			{ID: "weight", Passed: true, Detail: "ok"}, {ID: "flash_rate", Passed: true, Detail: "ok"},
			{ID: "sink_rate", Passed: true, Detail: "ok"}, {ID: "pressure", Passed: true, Detail: "ok"},
			{ID: "temperature", Passed: true, Detail: "ok"},
		},
		BaselineComparison: contract.BaselineComparison{BaselineCost: 1, CandidateCost: 0.6, Improvement: 0.4},
	}
	if _, err := f.st.PutTrial(ctx, tr, contract.TrialManual, ""); err != nil {
		t.Fatal(err)
	}
	r, err := f.st.IssueCertificate(ctx, "trial-"+name, "alice", f.key, 15*time.Minute, t0.Add(-2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if approve {
		if _, err := f.st.ApproveCertificate(ctx, r.Cert.RecommendationID, "bob", f.key.Public, t0.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	return r.Cert.RecommendationID
}

func dialWriter(t *testing.T, srv *opcuasrv.Server) *Writer {
	t.Helper()
	w, err := DialWriter(context.Background(), srv.Endpoint(), lineMap(t, srv), Security{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() }) // teardown: the test checked what was written
	return w
}

// Only an approved, unexpired, unrevoked certificate reaches the line;
// its setpoints are written over OPC UA and read back.
func TestGovernedWriterOverOPCUA(t *testing.T) {
	srv := startLine(t, opcuasrv.Options{Manual: true, Seed: 5})
	w := dialWriter(t, srv)
	f := newCertFixture(t)
	ctx := context.Background()
	bus := events.New()
	op := func(now time.Time) govern.Options { return govern.Options{Now: now, Actor: "carol", RunID: "run-1"} }

	deny := []struct {
		name, reason string
		cert         func() string
		now          time.Time
	}{
		{"no certificate", guard.ReasonNoCertificate, func() string { return "" }, t0},
		{"unknown certificate", guard.ReasonNoCertificate, func() string { return "rec-nope" }, t0},
		{"not approved", guard.ReasonCertNotApproved, func() string { return f.certify(t, "issued", false) }, t0},
		{"expired", guard.ReasonCertExpired, func() string { return f.certify(t, "old", true) }, t0.Add(20 * time.Minute)},
		{"revoked", guard.ReasonCertRevoked, func() string {
			id := f.certify(t, "revoked", true)
			if _, err := f.st.RevokeCertificate(ctx, id, "dave", "line changed", f.key.Public, t0.Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			return id
		}, t0},
	}
	for _, tc := range deny {
		t.Run(tc.name, func(t *testing.T) {
			res, err := govern.ExecuteGoverned(ctx, f.st, f.key.Public, tc.cert(), w, op(tc.now), bus)
			if core.CodeOf(err) != govern.CodeWriteDenied || res.Reason != tc.reason {
				t.Fatalf("want %s, got %v %+v", tc.reason, err, res)
			}
		})
	}
	if s := srv.Stats(); s.Writes != 0 {
		t.Fatalf("%d writes reached the line without a valid certificate", s.Writes)
	}

	id := f.certify(t, "good", true)
	res, err := govern.ExecuteGoverned(ctx, f.st, f.key.Public, id, w, op(t0), bus)
	if err != nil {
		t.Fatalf("%v %+v", err, res)
	}
	if res.Status != guard.OutcomeVerified || res.Written() != 3 || !res.Executed {
		t.Fatalf("%+v", res)
	}
	vals := srv.Values()
	for k, v := range step0 {
		if vals[k] != v {
			t.Fatalf("line holds %s=%v, certified %v", k, vals[k], v)
		}
	}
	for _, m := range res.Writes {
		if !m.Verified || m.Readback != step0[m.NodeID] {
			t.Fatalf("move %+v", m)
		}
	}
	// The plant follows: cavity pressure moves toward the new hold pressure.
	before := srv.Truth()[sim.NodeCavityPressure]
	srv.Step(30)
	if after := srv.Truth()[sim.NodeCavityPressure]; !(after > before+0.5) {
		t.Fatalf("cavity pressure %v → %v after hold pressure 65 → 66", before, after)
	}
}

// distortWriter writes what the controller would clamp to (+0.5): a real
// OPC UA write whose real readback differs.
type distortWriter struct{ *Writer }

func (d distortWriter) Write(ctx context.Context, node string, v float64) error {
	return d.Writer.Write(ctx, node, v+0.5)
}

// A readback that differs raises an alarm (audit + event) and stops the
// certificate's remaining moves.
func TestGovernedWriterReadbackMismatchAlarm(t *testing.T) {
	srv := startLine(t, opcuasrv.Options{Manual: true, Seed: 6})
	w := dialWriter(t, srv)
	f := newCertFixture(t)
	bus := events.New()
	sub := bus.Subscribe(16, func(e events.Event) bool { return e.Kind == connect.EventAlarm })
	defer sub.Close()
	id := f.certify(t, "mismatch", true)
	res, err := govern.ExecuteGoverned(context.Background(), f.st, f.key.Public, id, distortWriter{w}, govern.Options{Now: t0, Actor: "carol", RunID: "run-1"}, bus)
	if core.CodeOf(err) != govern.CodeWriteFailed || res.Status != guard.OutcomeFailed {
		t.Fatalf("%v %+v", err, res)
	}
	if len(res.Writes) != 1 || res.Writes[0].Verified {
		t.Fatalf("remaining moves not stopped: %+v", res.Writes)
	}
	select {
	case e := <-sub.C:
		if e.ID != id || e.Data["readback"] != res.Writes[0].To+0.5 {
			t.Fatalf("alarm %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no alarm event")
	}
	es, err := f.st.AuditLog().List(context.Background(), 0, 1000, id)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range es {
		found = found || e.Action == connect.AuditAlarm
	}
	if !found {
		t.Fatal("no write.alarm in the audit log")
	}
	if s := srv.Stats(); s.Writes != 1 {
		t.Fatalf("%d writes reached the line, want 1", s.Writes)
	}
}

// A server that does not let setpoints be read back: the write is
// acknowledged by the transport, not verified, and reported so.
func TestGovernedWriterTransportAck(t *testing.T) {
	srv := startLine(t, opcuasrv.Options{Manual: true, Seed: 7, WriteOnlySetpoints: true})
	w := dialWriter(t, srv)
	f := newCertFixture(t)
	id := f.certify(t, "ack", true)
	res, err := govern.ExecuteGoverned(context.Background(), f.st, f.key.Public, id, w, govern.Options{Now: t0, Actor: "carol", RunID: "run-1"}, nil)
	if err != nil || res.Status != guard.OutcomeTransportAck || res.Written() != 3 {
		t.Fatalf("%v %+v", err, res)
	}
	for _, m := range res.Writes {
		if m.Verified || !m.Acked {
			t.Fatalf("move %+v", m)
		}
	}
	vals := srv.Values()
	for k, v := range step0 {
		if vals[k] != v {
			t.Fatalf("line holds %s=%v, want %v", k, vals[k], v)
		}
	}
}

// The simulated server refuses what a real controller would: values out
// of the recipe range, and writes to measurements.
func TestSimulatedLineRefusesBadWrites(t *testing.T) {
	srv := startLine(t, opcuasrv.Options{Manual: true, Seed: 8})
	w := dialWriter(t, srv)
	ctx := context.Background()
	for _, tc := range []struct {
		node string
		v    float64
		code string
	}{
		{sim.NodeHoldPressure, 200, "BadOutOfRange"},
		{sim.NodePartWeight, 31, "BadNotWritable"},
	} {
		if err := w.Write(ctx, tc.node, tc.v); err == nil || !strings.Contains(err.Error(), tc.code) {
			t.Fatalf("write %s=%v: %v, want %s", tc.node, tc.v, err, tc.code)
		}
	}
	if s := srv.Stats(); s.Writes != 0 || s.Refusals != 2 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := opcuasrv.Start(ctx, opcuasrv.Options{Addr: "127.0.0.1:0", Speed: -1}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("speed -1: %v", err)
	}
}
