package shadow

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/testfix"
	"gonum.org/v1/gonum/stat"
)

// fixture: a simulated injection line whose first `train` runs build the
// dataset of a hybrid model (the real hybrid_residual@1 trainer); then
// `later` runs of the same process are written after the model exists
// (they end after its creation time, which the runner's injected clock puts
// one minute after the last training run). The later runs are a batch at an
// age inside the training range (AgeRuns = train/2: the unmeasured mould
// wear and the ambient drift of a mid-training run; fresh run ids and random
// streams), so they are exchangeable with the runs the model was calibrated
// on — what split conformal's coverage guarantee is about. (The line's next
// runs would carry more wear than any training run: that is drift, which
// shadow evidence exists to reveal, and no coverage is guaranteed there.)
//
// Every time is fixed (sim.DefaultStartMs, the injected model clock), so the
// data, the model and every figure are the same on every run of the test.
// laterRuns is the number of same-process runs scored: enough runs to
// bound the mean coverage (see TestCollectOnLaterRuns).
const laterRuns = 6

type fixture struct {
	st      *sqlite.Store
	dir     string
	model   core.Model
	later   []sim.RunData
	trained []string
}

func newFixture(t *testing.T, train, later int, params string) *fixture {
	t.Helper()
	st, dir := testfix.SQLite(t)
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed, cfg.StartMs = train, 7, sim.DefaultStartMs
	first := testfix.Injection(t, cfg)
	ds := testfix.InjectionDataset(t, st, dir, first)
	lcfg := cfg
	lcfg.Runs, lcfg.FirstRun, lcfg.AgeRuns = later, train, train/2
	lcfg.StartMs = *first.Runs[train-1].Run.EndedMs + cfg.GapBetweenRuns.Milliseconds()
	next := testfix.Injection(t, lcfg)
	made := time.UnixMilli(*first.Runs[train-1].Run.EndedMs + 60_000)
	_, m, _ := testfix.TrainHybrid(t, st, dir, ds.ID, testfix.HybridParams(t, dir, params), made)
	if _, err := next.Write(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, dir: dir, model: m, later: next.Runs}
	for _, rd := range first.Runs {
		f.trained = append(f.trained, rd.Run.ID)
	}
	return f
}

// Shadow evidence of the hybrid injection model on six runs of the same
// process made after it: one row per run, the window coverage of the
// conformal band at its 90 % level within what the method guarantees,
// accuracy near the test figures, the training runs never used; promotion
// refused until evidence exists.
func TestCollectOnLaterRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a hybrid model")
	}
	f := newFixture(t, 24, laterRuns, "")
	ctx := context.Background()
	reg := registry.New(f.st, f.dir, nil)
	if _, err := reg.Move(ctx, f.model.ID, core.StageShadow, "ann", "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Move(ctx, f.model.ID, core.StageProduction, "ann", "", ""); core.CodeOf(err) != registry.CodeShadowMissing {
		t.Fatalf("promotion without shadow evidence: %v", err)
	}
	clock := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ev, err := Collect(ctx, f.st, f.dir, f.model.ID, Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Eligible != laterRuns || len(ev.Runs) != laterRuns {
		t.Fatalf("eligible %d, runs %d; want the %d later runs", ev.Eligible, len(ev.Runs), laterRuns)
	}
	later := map[string]bool{}
	for _, rd := range f.later {
		later[rd.Run.ID] = true
	}
	var test struct {
		Test struct {
			MeanNRMSE float64 `json:"meanNrmse"`
		} `json:"test"`
		Coverage struct {
			Measured float64 `json:"measured"`
		} `json:"coverage"`
	}
	if err := json.Unmarshal(f.model.Metrics, &test); err != nil {
		t.Fatal(err)
	}
	var covs []float64
	for _, r := range ev.Runs {
		covs = append(covs, float64(r.Coverage))
		t.Logf("run %s: %d windows, window NRMSE %.4f (test %.4f), coverage %.4f of %.2f (test %.4f), OOD rejected %.3f, free-run NRMSE %.4f over %d steps, spread ratio %.3f",
			r.RunID, r.Windows, r.NRMSE, test.Test.MeanNRMSE, r.Coverage, r.CoverageTarget, test.Coverage.Measured, r.OODRejected, r.FreeRunNRMSE, r.FreeRunSteps, r.SpreadRatio)
		if !later[r.RunID] || r.Skipped != "" {
			t.Fatalf("run %s (later %v) skipped %q", r.RunID, later[r.RunID], r.Skipped)
		}
		// A silent gap can cut the free run's NaN-free segment to a
		// quarter of the 1800-step run.
		if r.Windows < 100 || r.Steps != r.Windows*10 || r.FreeRunSteps < 450 {
			t.Fatalf("run %s: %d windows, %d steps, %d free-run steps", r.RunID, r.Windows, r.Steps, r.FreeRunSteps)
		}
		if !(float64(r.SpreadRatio) >= 0) || !(float64(r.FreeRunNRMSE) > 0) {
			t.Errorf("run %s: spread ratio %v, free-run NRMSE %v", r.RunID, r.SpreadRatio, r.FreeRunNRMSE)
		}
	}
	s := ev.Summary
	t.Logf("summary: %d runs, %d windows, NRMSE %.4f, coverage %.4f (target %.2f), OOD rejected %.4f, free-run NRMSE %.4f, spread ratio %.3f",
		s.Scored, s.Windows, s.NRMSE, s.Coverage, s.CoverageTarget, s.OODRejected, s.FreeRunNRMSE, s.SpreadRatio)
	// Errors of the same size as measured on the test split.
	l, err := Load(ctx, f.st, f.dir, f.model.ID)
	if err != nil {
		t.Fatal(err)
	}
	ratio := float64(s.WindowRMSE[0]) / l.TestRMSE[0]
	t.Logf("pooled window RMSE %.4f g, test RMSE %.4f g, ratio %.3f", s.WindowRMSE[0], l.TestRMSE[0], ratio)
	if !(ratio > 0.5 && ratio < 1.5) {
		t.Errorf("pooled shadow RMSE / test RMSE = %.3f", ratio)
	}
	// Split conformal guarantees coverage >= 0.90 in expectation for runs
	// exchangeable with the calibration runs. A run, not a window, is the
	// unit: a run's wear, material batch and ambient walk move all its
	// windows together (per-run coverage spreads by about ±0.1 here), so
	// the realised mean over n runs has the standard error sd/√n of the
	// per-run figures. Three of those below 0.90 is the one-sided bound; a
	// wrong band (half the width: ~0.6 on every run) falls far outside it.
	// The guarantee is one-sided, and with six runs an upper bound would
	// assert luck.
	mean, sd := stat.MeanStdDev(covs, nil)
	tol := 3 * sd / math.Sqrt(float64(len(covs)))
	t.Logf("per-run coverage mean %.4f, sd %.4f: bound 0.90 - %.4f", mean, sd, tol)
	if s.CoverageTarget != 0.9 || !(mean >= 0.9-tol) || !(float64(s.Coverage) >= 0.9-tol) {
		t.Errorf("coverage: per-run mean %.4f, pooled %.4f; want >= 0.90 - %.4f (3 standard errors of %d runs)", mean, s.Coverage, tol, len(covs))
	}
	if !(float64(s.OODRejected) < 0.1) {
		t.Errorf("runs of the same process: %.3f of windows outside the envelope", s.OODRejected)
	}
	rows, err := f.st.ListShadow(ctx, f.model.ID)
	if err != nil || len(rows) != laterRuns {
		t.Fatalf("stored rows %d, %v", len(rows), err)
	}
	for _, row := range rows {
		var re RunEvidence
		if err := json.Unmarshal(row.Evidence, &re); err != nil {
			t.Fatal(err)
		}
		if !row.CreatedAt.Equal(clock) || re.RunID != row.RunID || row.NRMSE != float64(re.NRMSE) || row.Coverage != float64(re.Coverage) || row.Steps != re.Steps {
			t.Fatalf("row %+v vs evidence %+v", row, re)
		}
	}
	// Recomputing replaces, never duplicates.
	if _, err := Collect(ctx, f.st, f.dir, f.model.ID, Options{}); err != nil {
		t.Fatal(err)
	}
	if rows, _ := f.st.ListShadow(ctx, f.model.ID); len(rows) != laterRuns {
		t.Fatalf("%d rows after recomputing", len(rows))
	}
	// With evidence, promotion now waits for the twin gate.
	if _, err := reg.Move(ctx, f.model.ID, core.StageProduction, "ann", "", ""); core.CodeOf(err) != registry.CodeTwinGateFailed {
		t.Fatalf("promotion with evidence, without a twin gate: %v", err)
	}
	// A dry run stores nothing; a model without later runs has no evidence.
	ev, err = Collect(ctx, f.st, f.dir, f.model.ID, Options{DryRun: true, MaxRuns: 1})
	if err != nil || len(ev.Runs) != 1 || ev.Eligible != laterRuns || ev.Stored {
		t.Fatalf("dry run: %+v %v", ev, err)
	}
	if _, err := Collect(ctx, f.st, f.dir, "no-such-model", Options{}); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("unknown model: %v", err)
	}
}
