package demo

import (
	"context"
	"encoding/json"
	"io/fs"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/examples"
	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/guard"
)

// The simulated injection line's twin end to end with a static quality
// model (static_response@1: part weight against the settings, one row
// every 5 s, examples/specs/injection_quality.json), through the
// application layer as the demo does it: the job runner trains and
// evaluates it (conformal width, OOD envelope), the column scene is
// frozen, shadow evidence is measured on three later runs (rows predicted
// from their settings), the twin gate replays snapshots of its test rows'
// runs and stores its trials, then a snapshot (static-row/1: the last row)
// and the optimiser, a certificate issued by the engineer, approved by
// another person and executed through the guard (recording writer, read
// back), and the certificate verifies. The fit takes about a second: the
// test runs with -short too.
func TestStaticTwinEndToEnd(t *testing.T) {
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "test"); err != nil {
		t.Fatal(err)
	}
	wall := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const seed = 7
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = 12, seed
	cfg.StartMs = Anchor(wall, time.Duration(cfg.Runs)*(cfg.RunDuration+cfg.GapBetweenRuns)).UnixMilli()
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	line := &lineClock{t: time.UnixMilli(*out.Runs[len(out.Runs)-1].Run.EndedMs).UTC().Add(time.Minute)}
	bus := events.New()
	runner := jobs.NewRunner(st, jobs.Options{DataDir: dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: bus, Now: line.now})
	ap := amlapp.New(&service.Deps{Store: st, DataDir: dir, Runner: runner, Bus: bus, Key: key}, amlapp.Options{Now: line.now, WallNow: func() time.Time { return wall }})
	eng, appr := Engineer, Approver

	raw, err := fs.ReadFile(examples.FS, "specs/injection_quality.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := dataset.ParseSpec(raw)
	if err != nil {
		t.Fatal(err)
	}
	built, err := ap.DatasetBuild(ctx, eng, amlapp.DatasetBuildRequest{Spec: *spec})
	if err != nil {
		t.Fatal(err)
	}
	job, err := ap.JobSubmit(ctx, eng, amlapp.JobSubmitRequest{DatasetID: built.Dataset.ID, Trainer: "static_response@1", Seed: 1, Params: json.RawMessage(`{"degrees":[1,2],"gp":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Run(ctx, job.ID, 0); err != nil {
		t.Fatal(err)
	}
	if job, err = ap.JobShow(ctx, eng, amlapp.JobRequest{ID: job.ID}); err != nil || job.Status != core.JobDone {
		t.Fatalf("job %v: %v", job, err)
	}
	m, err := st.GetModel(ctx, job.ModelID)
	if err != nil {
		t.Fatal(err)
	}
	if m.ArtifactKind != trainers.FormatStatic || !engine.IsTwinFormat(m.ArtifactKind) {
		t.Fatalf("the model is %s", m.ArtifactKind)
	}

	// the column scene with the model's held inputs declared as
	// disturbances (as a scene drafted from the model has them), frozen,
	// and its objective
	sc := ColumnScene()
	sc.SceneID, sc.Disturbances = "injection-quality", contract.DefaultInjectionScene().Disturbances
	sc.CreatedAt = line.now().Truncate(time.Millisecond)
	put, err := ap.ScenePut(ctx, eng, amlapp.ScenePutRequest{Scene: sc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ap.SceneFreeze(ctx, appr, amlapp.SceneFreezeRequest{ID: put.SceneID, Version: put.SceneVersion, ExpectHash: put.Hash}); err != nil {
		t.Fatal(err)
	}
	shown, err := ap.SceneShow(ctx, eng, amlapp.SceneShowRequest{ID: put.SceneID, Version: put.SceneVersion})
	if err != nil {
		t.Fatal(err)
	}
	scene := shown.Scene
	if _, err := ap.ObjectivePut(ctx, eng, amlapp.ObjectivePutRequest{Objective: ColumnObjective()}); err != nil {
		t.Fatal(err)
	}

	// a scene drafted from the model: its controls, its held inputs as
	// disturbances, the part weight; a horizon of two minutes at 5 s
	dr, err := ap.SceneDraft(ctx, eng, amlapp.SceneDraftRequest{Model: m.ID})
	if err != nil {
		t.Fatal(err)
	}
	if d := dr.File.Scene; len(d.Controls) != 3 || len(d.Disturbances) != 2 || len(d.Observations) != 1 || d.Observations[0].ID != "part_weight" || len(d.States) != 0 || dr.File.Objective.HorizonSteps != 25 {
		t.Fatalf("drafted scene: controls %v, disturbances %v, observations %v, horizon %d", d.Controls, d.Disturbances, d.Observations, dr.File.Objective.HorizonSteps)
	}

	// shadow evidence on three runs after the model: every complete row
	// predicted from its settings
	later := sim.DefaultInjectionConfig()
	later.Runs, later.Seed, later.FirstRun = 3, seed, cfg.Runs
	later.RunDuration, later.GapBetweenRuns = 10*time.Minute, time.Minute
	later.StartMs = m.CreatedAt.Add(time.Minute).Truncate(time.Second).UnixMilli()
	more, err := sim.GenerateInjection(later)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := more.Write(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	last := more.Runs[len(more.Runs)-1].Run
	line.set(time.UnixMilli(*last.EndedMs).Add(time.Minute))
	ev, err := ap.ShadowCollect(ctx, eng, amlapp.ShadowCollectRequest{Model: m.ID})
	if err != nil {
		t.Fatal(err)
	}
	s := ev.Summary
	if s.Scored != 3 || s.Windows < 3*100 || len(s.WindowRMSE) != 1 || !(s.Coverage > 0.5) || !(float64(s.OODRejected) < 0.5) {
		t.Fatalf("shadow evidence: %+v", s)
	}
	t.Logf("shadow: %d rows of 3 runs, %.1f%% inside the band, RMSE %.3f g, %.1f%% OOD", s.Windows, 100*float64(s.Coverage), float64(s.WindowRMSE[0]), 100*float64(s.OODRejected))

	// the twin gate: snapshots replayed on the test rows' runs, trials
	// stored, its inputs measured (the accuracy checks are the twin
	// profile's: a static model of a line with dynamics need not pass them)
	g, err := ap.GateEvaluate(ctx, eng, amlapp.GateEvaluateRequest{Model: m.ID, Scene: scene.SceneID, SceneVersion: scene.SceneVersion, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Trials) < 5 || g.Input.ShadowRuns != 3 || math.IsNaN(g.Input.ShadowCoverage) {
		t.Fatalf("gate: %d trials, failures %v, no recommendation %v, shadow %d", len(g.Trials), g.Failures, g.NoRecommendation, g.Input.ShadowRuns)
	}
	for _, tr := range g.Trials {
		if !tr.OODAccepted || tr.HardViolations != 0 {
			t.Fatalf("gate trial %+v", tr)
		}
	}
	t.Logf("gate %s: passed %v %v, %d trials", g.GateEvalID, g.Report.Passed, g.Report.RejectCodes, len(g.Trials))

	// snapshot, optimiser, certificate, approval, governed write
	res := &Result{ModelID: m.ID, TuningMode: g.TuningMode}
	line.t = time.UnixMilli(*last.EndedMs + 1000).UTC()
	ok, err := recommend(ctx, ap, res, recommendInput{scene: scene, runID: last.ID, seed: seed, tick: func() { line.t = line.t.Add(time.Second) },
		writer: func(snap *contract.TwinSnapshot) (guard.Writer, func(), error) {
			return guard.NewRecordingWriter(snap.ControlValues), func() {}, nil
		}}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || !(res.Improvement > 0) || res.Written < 1 || res.WriteOutcome != "readback-verified" || res.CertStatus != string(contract.CertExecuted) || !res.CertVerified {
		t.Fatalf("recommendation: %+v", res)
	}
	snap, err := ap.SnapshotShow(ctx, eng, amlapp.SnapshotShowRequest{ID: res.SnapshotID})
	if err != nil {
		t.Fatal(err)
	}
	if v := snap.Snapshot.EstimatorVersion; !strings.Contains(v, engine.StaticEstimator+":"+m.ID) || len(snap.Snapshot.StateEstimate) != 0 {
		t.Fatalf("the snapshot's estimator is %q, state %v", v, snap.Snapshot.StateEstimate)
	}
	c, err := ap.CertShow(ctx, appr, amlapp.CertRequest{ID: res.CertificateID})
	if err != nil {
		t.Fatal(err)
	}
	if c.Cert.ModelHash != m.ArtifactHash || len(c.Targets) != 1 || c.Targets[0].NodeID != "part_weight" || len(c.Targets[0].Mean) == 0 {
		t.Fatalf("the certificate: model hash %s (the model's %s), targets %+v", c.Cert.ModelHash, m.ArtifactHash, c.Targets)
	}
	for k, mean := range c.Targets[0].Mean {
		if !(c.Targets[0].Lower[k] < mean && mean < c.Targets[0].Upper[k]) {
			t.Fatalf("step %d: the certified tube %v %v %v", k, c.Targets[0].Lower[k], mean, c.Targets[0].Upper[k])
		}
	}
}
