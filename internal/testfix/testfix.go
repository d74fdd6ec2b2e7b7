// Package testfix holds the fixtures that tests in many packages build the
// same way: an embedded SQLite store in a test's temp dir, the simulated
// injection line written into a store with its part-weight dataset built,
// and the hybrid twin model trained on it by the real job runner. It is a
// package of its own (imported by tests only, like store/postgres/pgtest)
// so that each fixture is written once.
//
// Every fixture is deterministic: the simulated line starts where its
// config says (sim.DefaultStartMs unless set), and the runner's clock —
// the model's creation time — is the caller's.
package testfix

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aml-project/aml/examples"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// SQLite opens an embedded store in a new temp dir of t and closes it (the
// close checked) when t ends. It returns the store and its data dir.
func SQLite(t testing.TB) (*sqlite.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st, dir
}

// Injection simulates the injection line of cfg (sim.GenerateInjection).
func Injection(t testing.TB, cfg sim.InjectionConfig) *sim.Output {
	t.Helper()
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// InjectionDataset writes the simulated runs out into st and builds the
// part-weight dataset of examples/specs/injection_weight.json over the
// store's runs, with its files under dir.
func InjectionDataset(t testing.TB, st store.Store, dir string, out *sim.Output) core.Dataset {
	t.Helper()
	ctx := context.Background()
	if _, err := out.Write(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(examples.FS, "specs/injection_weight.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := dataset.ParseSpec(raw)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dataset.Build(ctx, st, spec, dataset.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return ds.Dataset
}

// HybridParams are the params of hybrid_residual@1 for the injection
// dataset (examples/physics/injection.aml, written into dir, part weight as
// the target) with extra appended to the JSON object (e.g.
// `,"ensemble":2`; "" for the defaults).
func HybridParams(t testing.TB, dir, extra string) json.RawMessage {
	t.Helper()
	phys, err := fs.ReadFile(examples.FS, "physics/injection.aml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "physics", "injection.aml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, phys, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(path)
	if err != nil {
		t.Fatal(err)
	}
	return json.RawMessage(`{"physics":` + string(b) + `,"mapping":{"outputs":{"weight":"part_weight"}}` + extra + `}`)
}

// TrainHybrid trains hybrid_residual@1 (seed 1) on dataset dsID with the
// real job runner, whose clock made stamps the model's creation time, and
// returns the finished job, the registered model and the runner (for
// retraining with the same clock).
func TrainHybrid(t testing.TB, st store.Store, dir, dsID string, params json.RawMessage, made time.Time) (core.Job, core.Model, *jobs.Runner) {
	t.Helper()
	ctx := context.Background()
	r := jobs.NewRunner(st, jobs.Options{DataDir: dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: events.New(),
		Now: func() time.Time { return made }})
	j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: dsID, TrainerRef: "hybrid_residual@1", Seed: 1, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
	if j, err = st.GetJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if j.Status != core.JobDone {
		t.Fatalf("training job %s: %s", j.Status, j.Error)
	}
	m, err := st.GetModel(ctx, j.ModelID)
	if err != nil {
		t.Fatal(err)
	}
	if !m.CreatedAt.Equal(made) {
		t.Fatalf("model created at %v, want the runner's clock %v", m.CreatedAt, made)
	}
	return j, m, r
}
