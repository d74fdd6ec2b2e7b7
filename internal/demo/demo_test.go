package demo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/demo"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

// The simulated injection line's twin end to end with a narx_mlp@1 model
// (no physics file): a small NARX network trained by the job runner, the
// column scene frozen, shadow evidence, the twin gate passed and the model
// promoted, a snapshot whose state is the window's history, the optimiser
// (precise_search after the gate), a certificate issued by the engineer,
// approved by another person and executed through the guard (recording
// writer, read back), and the certificate verifies. The training is small
// (a few seconds): the test runs with -short too.
func TestDemoNARXTwin(t *testing.T) {
	demoColumnTwin(t, "narx_mlp@1", trainers.FormatNARX, "narx-history/1:") // DefaultNARXParams
}

// The same with a neural_state_space@1 model (DefaultNSSParams: order 2,
// one hidden layer of 8, a few epochs): the snapshot's state is the
// encoder's over the window's rows (nss-encoder/1), the rest as above.
func TestDemoNSSTwin(t *testing.T) {
	demoColumnTwin(t, "neural_state_space@1", trainers.FormatNSS, "nss-encoder/1:")
}

func demoColumnTwin(t *testing.T, trainer, format, estimator string) {
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "test"); err != nil {
		t.Fatal(err)
	}
	// the injected wall clock, months before the machine's (a governed
	// write may not be dated after the real wall clock)
	wall := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	res, err := demo.Run(ctx, demo.Options{Store: st, DataDir: dir, Key: key, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()),
		Seed: 7, Runs: 16, Now: func() time.Time { return wall }, Logf: t.Logf,
		Trainer: trainer})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetModel(ctx, res.ModelID)
	if err != nil {
		t.Fatal(err)
	}
	if m.ArtifactKind != format || !registry.IsTwin(m) {
		t.Fatalf("the demo's model is %s (a twin model: %v)", m.ArtifactKind, registry.IsTwin(m))
	}
	if !res.GatePassed || res.Stage != core.StageProduction || res.ShadowRuns != 3 || res.TuningMode != "precise_search" {
		t.Fatalf("twin gate %v %v, stage %s, shadow runs %d, mode %s", res.GatePassed, res.GateRejects, res.Stage, res.ShadowRuns, res.TuningMode)
	}
	if !(res.Improvement > 0) || res.Written < 1 || res.WriteOutcome != "readback-verified" || res.CertStatus != string(contract.CertExecuted) || !res.CertVerified {
		t.Fatalf("recommendation: %+v", res)
	}
	ap := amlapp.New(&service.Deps{Store: st, DataDir: dir, Key: key}, amlapp.Options{Now: func() time.Time { return res.DemoClock }, WallNow: func() time.Time { return wall }})
	snap, err := ap.SnapshotShow(ctx, demo.Engineer, amlapp.SnapshotShowRequest{ID: res.SnapshotID})
	if err != nil {
		t.Fatal(err)
	}
	if v := snap.Snapshot.EstimatorVersion; !strings.Contains(v, estimator+res.ModelID) {
		t.Fatalf("the snapshot's estimator is %q", v)
	}
	// a scene drafted from the model names its columns: the controls,
	// part_weight; no physics states or guards
	dr, err := ap.SceneDraft(ctx, demo.Engineer, amlapp.SceneDraftRequest{Model: res.ModelID})
	if err != nil {
		t.Fatal(err)
	}
	if sc := dr.File.Scene; len(sc.Controls) != 3 || len(sc.Observations) != 1 || sc.Observations[0].ID != "part_weight" || len(sc.States) != 0 || len(sc.Guards) != 0 || sc.PhysicsProfileID != "" {
		t.Fatalf("drafted scene: controls %v, observations %v, states %v, guards %v, physics %q", sc.Controls, sc.Observations, sc.States, sc.Guards, sc.PhysicsProfileID)
	}
	c, err := ap.CertShow(ctx, demo.Approver, amlapp.CertRequest{ID: res.CertificateID})
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
