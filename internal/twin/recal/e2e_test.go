package recal

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/postgres"
	"github.com/aml-project/aml/internal/store/postgres/pgtest"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/contract"
)

// End to end on a real store: a cheap hybrid model trained on 12
// simulated runs, 3 more runs written afterwards (the runner's injected
// clock registers the model between the two batches, so they end after
// it). Every time is fixed: the simulated start, the model clock, the
// signal and request clocks. The scheduler measures the signals
// itself, queues one request (a second is refused), and the worker step
// rebuilds the dataset with the new runs, retrains with the same trainer
// and params, registers the result as a candidate and starts the cooldown
// at completion.
//
// It runs on both back-ends: on PostgreSQL the rebuilt dataset and the
// retrained model go through the shared artifact store, and the requests
// through the shared twin record store.
func TestSignalsRequestAndRunNext(t *testing.T) {
	if testing.Short() {
		t.Skip("trains two hybrid models")
	}
	t.Run("sqlite", func(t *testing.T) {
		st, dir := testfix.SQLite(t)
		signalsRequestAndRunNext(t, st, dir)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), pgtest.Schema(t))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		}()
		signalsRequestAndRunNext(t, st, t.TempDir())
	})
}

func signalsRequestAndRunNext(t *testing.T, st store.Store, dir string) {
	ctx := context.Background()
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = 15, 3
	cfg.RunDuration = 20 * time.Minute
	cfg.StartMs = sim.DefaultStartMs
	out := testfix.Injection(t, cfg)
	first, later := *out, *out
	first.Runs, later.Runs = out.Runs[:12], out.Runs[12:]
	ds := testfix.InjectionDataset(t, st, dir, &first)
	made := time.UnixMilli(*first.Runs[11].Run.EndedMs + 60_000)
	now := time.UnixMilli(*out.Runs[14].Run.EndedMs + 60_000) // after every run
	sigOpts := SignalOptions{Now: func() time.Time { return now }}
	j, _, runner := testfix.TrainHybrid(t, st, dir, ds.ID, testfix.HybridParams(t, dir, `,"ensemble":2,"epochs":15,"starts":2`), made)
	modelID := j.ModelID

	// Before the new runs: nothing to recalibrate.
	s0, err := ComputeSignals(ctx, st, dir, modelID, "scene-inj", sigOpts)
	if err != nil {
		t.Fatal(err)
	}
	if s0.NewRuns != 0 || s0.NewRows != 0 || s0.DriftScore != nil || s0.ErrorScore != nil {
		t.Fatalf("signals before new runs: %+v", s0)
	}
	if d, _ := RequestAt(ctx, st, *s0, DefaultPolicy(), "ann", now); d.Accepted || d.Reason != ReasonThresholdNotMet {
		t.Fatalf("decision before new runs: %+v", d)
	}

	if _, err := later.Write(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	s1, err := ComputeSignals(ctx, st, dir, modelID, "scene-inj", sigOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("signals: %s; shadow RMSE %v vs test %v", s1.Reason, s1.ShadowRMSE, s1.TestRMSE)
	var want []string
	for _, rd := range later.Runs {
		want = append(want, rd.Run.ID)
	}
	if s1.NewRuns != 3 || !slices.Equal(s1.NewRunIDs, want) || s1.NewRows != 3*1200 {
		t.Fatalf("new runs %d %v rows %d; want 3 %v, 3600 rows", s1.NewRuns, s1.NewRunIDs, s1.NewRows, want)
	}
	if s1.DriftScore == nil || *s1.DriftScore > 0.1 || s1.DriftWindows < 250 || s1.ErrorScore == nil || s1.ShadowRuns != 3 {
		t.Fatalf("drift/error: %+v", s1)
	}
	if rows, _ := st.ListShadow(ctx, modelID); len(rows) != 3 {
		t.Fatalf("signals stored %d shadow rows, want 3", len(rows))
	}

	d1, err := RequestAt(ctx, st, *s1, DefaultPolicy(), "ann", now)
	if err != nil || !d1.Accepted || !slices.Contains(d1.Triggers, "newRuns") {
		t.Fatalf("request: %+v %v", d1, err)
	}
	if d2, _ := RequestAt(ctx, st, *s1, DefaultPolicy(), "bob", now); d2.Accepted || d2.Reason != ReasonActiveOrCooldown || d2.RequestID != d1.RequestID {
		t.Fatalf("second request: %+v", d2)
	}

	clock := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	step, err := RunNext(ctx, st, runner, RunOptions{DataDir: dir, RunJob: true, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	c := step.Claimed
	if c == nil || c.RequestID != d1.RequestID || c.State != contract.CalibrationCooldown || c.Error != "" {
		t.Fatalf("step: %+v", step)
	}
	if c.CompletedAt == nil || !c.CompletedAt.Equal(clock) || c.CooldownUntil == nil || !c.CooldownUntil.Equal(clock.Add(time.Hour)) {
		t.Fatalf("completed %v cooldown until %v; want %v and +1 h", c.CompletedAt, c.CooldownUntil, clock)
	}
	nd, err := st.GetDataset(ctx, c.DatasetID)
	if err != nil || nd.Runs != 15 {
		t.Fatalf("rebuilt dataset: %+v %v", nd, err)
	}
	// the rebuild keeps every old run in its split and trains on the new
	// runs (RebuildSpec)
	om, err := dataset.FetchManifest(ctx, st, dir, ds)
	if err != nil {
		t.Fatal(err)
	}
	nman, err := dataset.FetchManifest(ctx, st, dir, nd)
	if err != nil {
		t.Fatal(err)
	}
	was := map[string]string{}
	for _, r := range om.Runs {
		was[r.RunID] = r.Split
	}
	for _, r := range nman.Runs {
		if w, ok := was[r.RunID]; (ok && r.Split != w) || (!ok && r.Split != dataset.SplitTrain) {
			t.Errorf("rebuilt dataset: run %s in %s, was %q", r.RunID, r.Split, w)
		}
	}
	if !slices.Equal(nman.Split.Test.RunIDs, om.Split.Test.RunIDs) || !slices.Equal(nman.Split.Val.RunIDs, om.Split.Val.RunIDs) || len(nman.Runs) != 15 {
		t.Errorf("rebuilt split val %v test %v (%d runs), was val %v test %v", nman.Split.Val.RunIDs, nman.Split.Test.RunIDs, len(nman.Runs), om.Split.Val.RunIDs, om.Split.Test.RunIDs)
	}
	nj, _ := st.GetJob(ctx, c.JobID)
	if nj.TrainerRef != "hybrid_residual@1" || nj.ParentID != j.ID || nj.Seed != j.Seed || string(nj.Params) != string(j.Params) {
		t.Fatalf("new job %+v, old %+v", nj, j)
	}
	nm, err := st.GetModel(ctx, c.NewModelID)
	if err != nil || nm.Stage != core.StageCandidate || nm.DatasetID != c.DatasetID {
		t.Fatalf("new model %+v %v", nm, err)
	}
	// Cooling down: a new request for the key is refused until
	// completion + 1 h, then accepted.
	if d, _ := RequestAt(ctx, st, *s1, DefaultPolicy(), "ann", clock.Add(59*time.Minute)); d.Accepted || d.State != contract.CalibrationCooldown {
		t.Fatalf("during cooldown: %+v", d)
	}
	if d, _ := RequestAt(ctx, st, *s1, DefaultPolicy(), "ann", clock.Add(time.Hour)); !d.Accepted {
		t.Fatalf("after cooldown: %+v", d)
	}
	// The queue now holds that request; with one running elsewhere and
	// max 1 it is not claimed.
	if _, err := st.SQL().ExecContext(ctx, `INSERT INTO twin_calibrations(request_id, dedup_key, scene_id, line_id, state, created_at) VALUES ('busy','other:L:R:v','other','L','running',1)`); err != nil {
		t.Fatal(err)
	}
	step, err = RunNext(ctx, st, runner, RunOptions{DataDir: dir, Now: func() time.Time { return clock.Add(time.Hour) }})
	if err != nil || step.Claimed != nil || step.Running != 1 {
		t.Fatalf("claim at max concurrency: %+v %v", step, err)
	}
}
