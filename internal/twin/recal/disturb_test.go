package recal

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/shadow"
)

func shadowDry() shadow.Options { return shadow.Options{DryRun: true} }

// On a worn line (the runs after the model carry about 0.5 g more mould
// wear than any run it was trained on), the signals with the scene's
// declared disturbance report the estimated drift (what the windows'
// predictions miss after each window's state fit took up its share: more
// than 0.1 g), the shadow figures are
// the disturbance-corrected ones (coverage back up from the raw model's),
// and the disturbance trigger fires; without the declaration the evidence
// is the raw model's, exactly the figures the corrected evidence keeps as
// raw. The trigger queues a recalibration, and the model retrained with
// the worn runs passes every evaluation check the model it replaces passes
// on the same val and test runs (the model gates of the training jobs;
// the twin gate, with fresh shadow runs and trials, is not run here).
func TestDisturbanceSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a hybrid model")
	}
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = 12, 3
	cfg.RunDuration = 20 * time.Minute
	cfg.StartMs = sim.DefaultStartMs
	first := testfix.Injection(t, cfg)
	ds := testfix.InjectionDataset(t, st, dir, first)
	made := time.UnixMilli(*first.Runs[11].Run.EndedMs + 60_000)
	j, _, runner := testfix.TrainHybrid(t, st, dir, ds.ID, testfix.HybridParams(t, dir, `,"ensemble":2,"epochs":15,"starts":2`), made)
	lcfg := cfg
	lcfg.Runs, lcfg.FirstRun, lcfg.AgeRuns = 3, 12, 60
	lcfg.StartMs = *first.Runs[11].Run.EndedMs + cfg.GapBetweenRuns.Milliseconds()
	later := testfix.Injection(t, lcfg)
	if _, err := later.Write(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(*later.Runs[2].Run.EndedMs + 60_000)
	raw, err := ComputeSignals(ctx, st, dir, j.ModelID, "scene-inj", SignalOptions{Now: func() time.Time { return now }, Shadow: shadowDry()})
	if err != nil {
		t.Fatal(err)
	}
	walk := 0.002
	so := shadowDry()
	so.Disturbances = map[string]contract.UnmeasuredDisturbance{sim.NodePartWeight: {ID: "mould_wear", Target: "weight",
		Model: contract.DisturbanceIntegratedWhiteNoise, PriorSD: 1, ProcessSDPerStep: &walk}}
	cor, err := ComputeSignals(ctx, st, dir, j.ModelID, "scene-inj", SignalOptions{Now: func() time.Time { return now }, Shadow: so})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("raw: %s; corrected: %s; drift %+v", raw.Reason, cor.Reason, cor.Disturbances)
	if raw.Disturbances != nil || raw.DisturbanceScore != nil {
		t.Fatalf("raw signals report a disturbance: %+v", raw)
	}
	d, ok := cor.Disturbances[sim.NodePartWeight]
	if !ok || !(float64(d.Estimate) > 0.1) || cor.DisturbanceScore == nil || !slices.Contains(Triggers(*cor, DefaultPolicy()), "disturbance") {
		t.Fatalf("drift %+v, score %v, triggers %v", cor.Disturbances, cor.DisturbanceScore, Triggers(*cor, DefaultPolicy()))
	}
	// run by run, the corrected evidence keeps the raw model's figures
	evRaw, err := shadow.Collect(ctx, st, dir, j.ModelID, shadowDry())
	if err != nil {
		t.Fatal(err)
	}
	evCor, err := shadow.Collect(ctx, st, dir, j.ModelID, so)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range evRaw.Runs {
		tr, tc := r.Targets[0], evCor.Runs[i].Targets[0]
		if tr.Drift != nil || tc.Drift == nil || tc.Drift.RawWindowRMSE != tr.WindowRMSE || tc.Drift.RawCoverage != tr.Coverage {
			t.Fatalf("run %s: raw %+v, corrected %+v", r.RunID, tr, tc)
		}
		if !(tc.Coverage > tr.Coverage) {
			t.Fatalf("run %s: corrected coverage %.3f, raw %.3f", r.RunID, tc.Coverage, tr.Coverage)
		}
	}
	if !(cor.ShadowRMSE[0] < raw.ShadowRMSE[0]) || !(*cor.ErrorScore <= *raw.ErrorScore) {
		t.Fatalf("corrected RMSE %.4f, raw %.4f", cor.ShadowRMSE[0], raw.ShadowRMSE[0])
	}
	// the trigger queues a recalibration; the worker retrains with the worn
	// runs and the new model's evaluation gates are reported
	d1, err := RequestAt(ctx, st, *cor, DefaultPolicy(), "ann", now)
	if err != nil || !d1.Accepted || !slices.Contains(d1.Triggers, "disturbance") {
		t.Fatalf("request: %+v %v", d1, err)
	}
	step, err := RunNext(ctx, st, runner, RunOptions{DataDir: dir, RunJob: true, Now: func() time.Time { return now.Add(time.Minute) }})
	if err != nil || step.Claimed == nil || step.Claimed.NewModelID == "" {
		t.Fatalf("step %+v %v", step, err)
	}
	nj, err := st.GetJob(ctx, step.Claimed.JobID)
	if err != nil {
		t.Fatal(err)
	}
	// The rebuild keeps the old runs' val and test split (RebuildSpec), so
	// both models' evaluation gates are measured on the same runs. On this
	// split the replaced model already fails G3 (test NRMSE 0.0859 against
	// val 0.0510); the recalibrated model must pass every check the
	// replaced one passes (it improves both: 0.0613 and 0.0432, G3 0.417
	// against 0.683, measured 2026-12-05).
	oj, err := st.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	was, now2 := gateChecks(t, oj.Gates), gateChecks(t, nj.Gates)
	t.Logf("recalibrated model %s: model gates passed %v %v; the replaced model's %v %v", step.Claimed.NewModelID, nj.GatePassed, now2, oj.GatePassed, was)
	if len(was) == 0 || len(now2) != len(was) {
		t.Fatalf("checks: replaced %v, recalibrated %v", was, now2)
	}
	for id, ok := range was {
		if ok && !now2[id] {
			t.Errorf("the recalibrated model fails %s, which the model it replaces passes on the same val and test runs", id)
		}
	}
}

// gateChecks are a job's model gate checks by ID: passed or not.
func gateChecks(t *testing.T, gates json.RawMessage) map[string]bool {
	t.Helper()
	var g struct {
		Checks []struct {
			ID     string `json:"id"`
			Passed bool   `json:"passed"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(gates, &g); err != nil {
		t.Fatalf("gates %s: %v", gates, err)
	}
	out := map[string]bool{}
	for _, c := range g.Checks {
		out[c.ID] = c.Passed
	}
	return out
}
