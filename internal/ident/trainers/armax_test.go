package trainers

import (
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/ident/analysis"
	"github.com/aml-project/aml/internal/ident/polynomial"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// bjSystem is a two-input, two-output Box–Jenkins process: oeSystem's
// dynamics (one pole per output, u1 delayed 1 step and u2 2 steps) with
// coloured noise (1 + 0.3 q⁻¹)/(1 − 0.9 q⁻¹) e, σ_e 0.1, on each output.
func bjSystem(u [][]float64, r *rand.Rand) [][]float64 {
	o := polynomial.OEOrders{NF: 1, NB: 2, NK: []int{1, 2}}
	m1 := &polynomial.OE{Orders: o, F: []float64{-0.8}, B: [][]float64{{0.4, 0.2}, {0.3, 0.1}}, C: 1}
	m2 := &polynomial.OE{Orders: o, F: []float64{-0.6}, B: [][]float64{{-0.2, 0.1}, {0.5, 0}}, C: -1}
	y1, y2 := m1.Simulate(u, []float64{1}), m2.Simulate(u, []float64{-1})
	out := make([][]float64, len(u))
	var v, e [2]float64
	for k := range out {
		for o := range v {
			en := 0.1 * r.NormFloat64()
			v[o] = 0.9*v[o] + en + 0.3*e[o]
			e[o] = en
		}
		out[k] = []float64{y1[k] + v[0], y2[k] + v[1]}
	}
	return out
}

// oneStep are p's one-step-ahead (F = 1) window predictions over the
// windows [lo, hi) of b, per target, and the residuals analysed against
// the controls.
func oneStep(t *testing.T, b *dataset.Bundle, p model.Predictor, lo, hi int) (rmse []float64, rep *analysis.ResidualReport) {
	t.Helper()
	if b.Manifest.HorizonSteps != 1 {
		t.Fatal("one-step windows need F = 1")
	}
	rmse = linWindowRMSE(t, b, p, lo, hi)
	d := b.Dims()
	pred, err := p.PredictBatch(t.Context(), b.X[lo*d.XLen():hi*d.XLen()], b.U[lo*d.ULen():hi*d.ULen()], hi-lo)
	if err != nil {
		t.Fatal(err)
	}
	e, u := make([][]float64, hi-lo), make([][]float64, hi-lo)
	for w := range e {
		e[w] = []float64{float64(b.Y[(lo+w)*2]) - float64(pred[w*2]), float64(b.Y[(lo+w)*2+1]) - float64(pred[w*2+1])}
		u[w] = []float64{float64(b.U[(lo+w)*2]), float64(b.U[(lo+w)*2+1])}
	}
	rep, err = analysis.ResidualAnalysis(e, u, 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rmse, rep
}

// box_jenkins@1 and armax@1 through the trainers on a Box–Jenkins process:
// BJ recovers the poles and noise model with intervals that hold them, its
// one-step residuals on the test run are white where OE's are not, and its
// one-step prediction beats OE's (whose window prediction restarts its
// dynamics from the measured history, already an equation-error predictor:
// the gain is smaller where F's pole is near D's); ARMAX with orders that
// hold the process (A = F·D) does as well.
// Both artifacts load and simulate runs; wrong params are refused.
func TestBoxJenkinsAndARMAXTrain(t *testing.T) {
	runs := linSynRuns(7, bjSystem, []linSynSpec{{dataset.SplitTrain, 1500, nil}, {dataset.SplitTrain, 1500, []int{700}}, {dataset.SplitVal, 300, nil}, {dataset.SplitTest, 1500, nil}})
	b := linSynBundle(t, runs, 40, 1) // 40 history rows: the noise models' predictors estimate the noise over them
	test := b.Manifest.Split.Test
	fit := map[string]model.Predictor{}
	for _, c := range []struct {
		name   string
		tr     trainer.Trainer
		params string
	}{
		{"oe", OutputError{}, `{"nf":1,"nb":2,"nk":[1,2]}`},
		{"bj", BoxJenkins{}, `{"nf":1,"nb":2,"nc":1,"nd":1,"nk":[1,2]}`},
		{"armax", ARMAX{}, `{"na":2,"nb":3,"nc":2,"nk":[1,2]}`}, // A = F·D, B·D, C·F: the BJ process exactly
	} {
		dir, err := linTrainNative(t, c.tr, b, c.params)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fit[c.name] = p
		if c.name == "bj" {
			var a bjArtifact
			raw := linReadArtifact(t, dir, &a)
			if a.Format != FormatBJ || len(a.Models) != 2 {
				t.Fatalf("artifact %s", raw)
			}
			for k, want := range [][]float64{{-0.8, 0.3, -0.9}, {-0.6, 0.3, -0.9}} {
				m := a.Models[k]
				ps := map[string]procParamJSON{}
				for _, q := range m.Params {
					ps[q.Name] = q
				}
				for i, n := range []string{"f1", "c1", "d1"} {
					q := ps[n]
					if !(float64(q.CI95[0]) <= want[i] && want[i] <= float64(q.CI95[1])) || !(float64(q.StdErr) < 0.05) {
						t.Errorf("%s %s = %.4f ± %.4f, 95 %% [%.4f, %.4f], truth %v", m.Output, n, q.Value, float64(q.StdErr), float64(q.CI95[0]), float64(q.CI95[1]), want[i])
					}
				}
			}
		}
	}
	rm := map[string][]float64{}
	for name, p := range fit {
		rmse, rep := oneStep(t, b, p, test.Offset, test.Offset+test.Count)
		rm[name] = rmse
		for k, o := range rep.Outputs {
			white := o.Verdict == analysis.White
			if want := name != "oe"; white != want {
				t.Errorf("%s: one-step residuals of %s %s (%.0f %% of lags outside), want white %v", name, b.Manifest.Targets[k], o.Verdict, 100*o.Auto.Outside, want)
			}
		}
		t.Logf("%s one-step test RMSE %.4f", name, rmse)
	}
	for k := range rm["bj"] {
		if !(rm["bj"][k] < 0.9*rm["oe"][k]) || !(rm["bj"][k] < 0.11) {
			t.Errorf("%s one-step RMSE: BJ %.4f, OE %.4f (innovations σ 0.1)", b.Manifest.Targets[k], rm["bj"][k], rm["oe"][k])
		}
	}
	for name, p := range fit {
		sim := p.(interface {
			SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error)
		})
		in, out := make([][]float64, 50), make([][]float64, 50)
		for k := range in {
			in[k], out[k] = runs[3].rows[k][:2], runs[3].rows[k][3:5]
		}
		if _, err := sim.SimulateRun(in, out, 4); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if len(p.(interface{ Poles() []complex128 }).Poles()) == 0 {
			t.Errorf("%s reports no poles", name)
		}
	}
	for _, c := range []struct {
		tr     trainer.Trainer
		params string
	}{{ARMAX{}, `{"nk":[1]}`}, {BoxJenkins{}, `{"nk":[1,1,1]}`}, {BoxJenkins{}, `{"nb":2,"nk":[1,45]}`}, {ARMAX{}, `{"na":-1}`}} {
		if _, err := linTrainNative(t, c.tr, b, c.params); err == nil {
			t.Errorf("%s %s accepted", c.tr.Ref(), c.params)
		}
	}
}

// The platform evaluates armax@1 and box_jenkins@1 models (and detrended
// ones) as any other: window metrics (eval.Evaluate, whose one-step
// figure is the first window step), the test free run and the stability
// evidence of gates G7a and G7b (eval.MeasureStability) — stable poles,
// no divergence — and BJ's one-step test NRMSE is below OE's.
func TestPolynomialPlatformEvaluation(t *testing.T) {
	runs := linSynRuns(7, bjSystem, []linSynSpec{{dataset.SplitTrain, 1500, nil}, {dataset.SplitTrain, 1500, []int{700}}, {dataset.SplitVal, 300, nil}, {dataset.SplitTest, 1500, nil}})
	b := linSynBundle(t, runs, 40, 5)
	one := map[string]float64{}
	for _, c := range []struct {
		tr     trainer.Trainer
		params string
	}{
		{OutputError{}, `{"nf":1,"nb":2,"nk":[1,2]}`},
		{ARMAX{}, `{"na":2,"nb":3,"nc":2,"nk":[1,2]}`},
		{BoxJenkins{}, `{"nf":1,"nb":2,"nk":[1,2]}`},
		{BoxJenkins{}, `{"nf":1,"nb":2,"nk":[1,2],"detrend":"mean"}`},
	} {
		name := c.tr.Ref() + " " + c.params
		dir, err := linTrainNative(t, c.tr, b, c.params)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m, err := eval.Evaluate(t.Context(), b, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		st, err := eval.MeasureStability(t.Context(), b, p, b.Manifest.HistorySteps)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.FreeRun == nil || st.FreeRun.Diverged || !st.Linear || !(st.MaxPoleModulus < 1) || !(st.FreeRun.MeanNRMSE < 1) {
			t.Errorf("%s: stability %+v (free run error %q)", name, st, st.FreeRunError)
		}
		one[c.tr.Ref()] = m.Test.MeanOneStepNRMSE
		t.Logf("%s: test one-step NRMSE %.4f, window NRMSE %.4f, free-run NRMSE %.4f, max |pole| %.3f", name, m.Test.MeanOneStepNRMSE, m.Test.MeanNRMSE, st.FreeRun.MeanNRMSE, st.MaxPoleModulus)
	}
	if !(one["box_jenkins@1"] < one["output_error@1"]) {
		t.Errorf("test one-step NRMSE: BJ %.4f, OE %.4f", one["box_jenkins@1"], one["output_error@1"])
	}
}
