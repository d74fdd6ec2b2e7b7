package govern_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

// t0 is the fixture's "now": the snapshot is captured 5 s before.
var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

const line = "line-injection-01"

// baseline are the snapshot's control values; step0 the certified first
// step (each move within the scene's maxDeltaPerAction).
var (
	baseline = map[string]float64{"hold_pressure": 64, "hold_time": 8, "melt_temperature_setpoint": 246}
	step0    = map[string]float64{"hold_pressure": 65, "hold_time": 8.5, "melt_temperature_setpoint": 247}
)

type fixture struct {
	st    *sqlite.Store
	key   *cert.KeyPair
	dir   string
	scene *contract.SceneContract
}

// newFixture stores a frozen default scene, a dataset and model, the
// default objective, and a hybrid_twin/hitl_governed channel (unless
// noChannel).
func newFixture(t *testing.T, noChannel bool) *fixture {
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
	if err := st.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: line, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/ds", SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind, artifact_path, artifact_hash, created_at, stage_changed_at)
		VALUES ('hybrid-1','job-1','ds',?, 'P','R','mpc_surrogate','hybrid_residual@1','candidate','aml.hybrid/1','models/hybrid-1',?,1,1)`, line, strings.Repeat("c", 64)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObjective(ctx, contract.DefaultInjectionObjective()); err != nil {
		t.Fatal(err)
	}
	// The line's active run: the run its actions count against (the
	// fixture's snapshots name none).
	if err := st.CreateRun(ctx, core.Run{ID: "run-1", LineID: line, ProductID: "P", RecipeID: "R", StartedMs: 1, Status: core.RunActive}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, key: key, dir: dir, scene: sc}
	if !noChannel {
		f.channel(t, contract.ChannelRecord{LineID: line, Profile: "hybrid_twin", ControlPolicy: contract.PolicyHITLGoverned})
	}
	return f
}

func (f *fixture) channel(t *testing.T, c contract.ChannelRecord) {
	t.Helper()
	if _, err := f.st.SetChannel(context.Background(), c, "ops"); err != nil {
		t.Fatal(err)
	}
}

// snapshot stores a sealed snapshot captured at capturedAt with controls.
func (f *fixture) snapshot(t *testing.T, id string, capturedAt time.Time, controls map[string]float64) {
	t.Helper()
	s := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: capturedAt, CreatedBy: "twin-runtime", SnapshotID: id,
		SceneID: f.scene.SceneID, SceneVersion: f.scene.SceneVersion, LineID: line, Phase: "holding", CapturedAt: capturedAt,
		DAQWatermark: capturedAt.UnixMilli(), ControlValues: controls, DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, EstimatorVersion: "last-valid@1"}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutSnapshot(context.Background(), s, false); err != nil {
		t.Fatal(err)
	}
}

func trial(id, snap string, first map[string]float64) *contract.VirtualTrial {
	second := map[string]float64{}
	for k, v := range first {
		second[k] = v
	}
	second["hold_pressure"]++
	return &contract.VirtualTrial{
		SchemaVersion: contract.TrialSchemaVersion, CreatedAt: t0.Add(-3 * time.Second), CreatedBy: "twin-runtime",
		TrialID: id, SnapshotID: snap, ModelID: "hybrid-1", ObjectiveID: "weight-quality",
		CandidateControlTrajectory: []map[string]float64{first, second},
		Uncertainty:                contract.Uncertainty{MaxStd: 0.1, Coverage: 0.92, EnsembleSize: 5},
		OutOfDistribution:          contract.OutOfDistribution{Distance: 0.4, Disagreement: 0.05, Accepted: true},
		ConstraintResults: []contract.ConstraintResult{
			{ID: "weight", Passed: true, Detail: "ok"}, {ID: "flash_rate", Passed: true, Detail: "ok"},
			{ID: "sink_rate", Passed: true, Detail: "ok"}, {ID: "pressure", Passed: true, Detail: "ok"},
			{ID: "temperature", Passed: true, Detail: "ok"},
		},
		BaselineComparison: contract.BaselineComparison{BaselineCost: 1, CandidateCost: 0.6, Improvement: 0.4},
	}
}

// certify stores a snapshot (captured 5 s before t0 with controls) and a
// passing trial moving to first, issues its certificate by alice at t0 −
// 2 s (TTL 15 min) and, when approve, approves it by bob. It returns the
// certificate id.
func (f *fixture) certify(t *testing.T, name string, controls, first map[string]float64, approve bool) string {
	t.Helper()
	ctx := context.Background()
	f.snapshot(t, "snap-"+name, t0.Add(-5*time.Second), controls)
	if _, err := f.st.PutTrial(ctx, trial("trial-"+name, "snap-"+name, first), contract.TrialManual, ""); err != nil {
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

func entries(t *testing.T, st *sqlite.Store, subject string) []audit.Entry {
	t.Helper()
	es, err := st.AuditLog().List(context.Background(), 0, audit.MaxListLimit, subject)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func actions(es []audit.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Action
	}
	return out
}
