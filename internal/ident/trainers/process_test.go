package trainers

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/ident/analysis"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/sim"
)

// procPlantBundle writes the own-line plant's exports (sim.WritePlantExports:
// level = FOPDT of heater_sp and feed_sp, K 0.9 and −0.6, τ 90 s, θ 15 s
// and 5 s, 5 s sampling, noise 0.05 cm, a per-run offset) and reads them
// into a dynamic bundle: runs 1–3 train, 4 val, 5 test.
func procPlantBundle(t *testing.T, H, F int) *dataset.Bundle {
	t.Helper()
	ex, err := sim.WritePlantExports(t.TempDir(), sim.PlantConfig{Runs: 5, RunMinutes: 120, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"heater_sp", "feed_sp", "level"}
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindDynamic, Purpose: dataset.PurposeMPCSurrogate,
		AllNodes: nodes, Controls: nodes[:2], Targets: nodes[2:], HistorySteps: H, HorizonSteps: F, Stride: 1, BeatMs: 5000}
	b := &dataset.Bundle{Manifest: m}
	splits := []string{dataset.SplitTrain, dataset.SplitTrain, dataset.SplitTrain, dataset.SplitVal, dataset.SplitTest}
	type run struct {
		id, split string
		rows      [][]float32
	}
	var runs []run
	for r, f := range ex.Runs {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")[1:]
		rn := run{id: strings.TrimSuffix(f[strings.LastIndex(f, "/")+1:], ".csv"), split: splits[r]}
		for _, l := range lines {
			fs := strings.Split(l, ";")
			row := make([]float32, 3)
			for j := range row {
				v, err := strconv.ParseFloat(strings.Replace(fs[j+1], ",", ".", 1), 64)
				if err != nil {
					t.Fatal(err)
				}
				row[j] = float32(v)
			}
			rn.rows = append(rn.rows, row)
		}
		runs = append(runs, rn)
	}
	for _, r := range runs {
		m.Runs = append(m.Runs, dataset.ManifestRun{RunID: r.id, Split: r.split, GridOffset: len(b.GridTS), GridSteps: len(r.rows)})
		for _, row := range r.rows {
			b.Grid = append(b.Grid, row...)
			b.GridTS = append(b.GridTS, float64(len(b.GridTS))*5000)
		}
	}
	parts := map[string]*dataset.SplitPart{dataset.SplitTrain: &m.Split.Train, dataset.SplitVal: &m.Split.Val, dataset.SplitTest: &m.Split.Test}
	n := 0
	for _, s := range []string{dataset.SplitTrain, dataset.SplitVal, dataset.SplitTest} {
		p := parts[s]
		p.Offset = n
		for _, r := range runs {
			if r.split != s {
				continue
			}
			p.RunIDs = append(p.RunIDs, r.id)
			ts, vals, _ := b.RunGrid(r.id)
			for w := H; w+F <= len(ts); w += 4 {
				b.X = append(b.X, vals[(w-H)*3:w*3]...)
				for k := w; k < w+F; k++ {
					b.U = append(b.U, vals[k*3], vals[k*3+1])
					b.Y = append(b.Y, vals[k*3+2])
				}
				for k := w - H; k < w+F; k++ {
					b.TS = append(b.TS, ts[k])
					b.Mask = append(b.Mask, 1)
				}
				p.Count++
				n++
			}
		}
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	return b
}

// process_model@1 on the own-line tank (two inputs, one output) recovers
// the gains and dead times of the plant with intervals that hold them, and
// predicts windows and free runs at about the noise level.
func TestProcessModelTank(t *testing.T) {
	b := procPlantBundle(t, 24, 36)
	for _, params := range []string{`{"structure":"fopdt"}`, `{}`} {
		dir, err := linTrainNative(t, ProcessModel{}, b, params)
		if err != nil {
			t.Fatal(err)
		}
		var a procArtifact
		linReadArtifact(t, dir, &a)
		if a.Format != FormatProcess || len(a.Models) != 1 || a.DtSec != 5 {
			t.Fatalf("%s: artifact %+v", params, a)
		}
		mo := a.Models[0]
		for _, c := range mo.Diagnostic.Candidates {
			t.Logf("%s: candidate %v: validation RMSE %.4f", params, c.Structures, float64(c.ValRMSE))
		}
		want := []struct{ K, tau, theta float64 }{{0.9, 90, 15}, {-0.6, 90, 5}}
		for i, pj := range mo.Pairs {
			for _, p := range pj.Params {
				t.Logf("%s: %s.%s = %.4f ± %.4f [%.4f, %.4f]", params, pj.Input, p.Name, p.Value, float64(p.StdErr), float64(p.CI95[0]), float64(p.CI95[1]))
			}
			if pj.Structure != "fopdt" {
				t.Errorf("%s: %s is %s, want fopdt", params, pj.Input, pj.Structure)
				continue
			}
			w := want[i]
			if math.Abs(pj.K-w.K) > 0.02 || math.Abs(*pj.Tau-w.tau) > 4 || math.Abs(pj.Theta-w.theta) > 1.5 {
				t.Errorf("%s: %s: K %.3f τ %.1f θ %.1f, want %v", params, pj.Input, pj.K, *pj.Tau, pj.Theta, w)
			}
			if len(pj.Params) != 3 || pj.Params[0].Name != "K" || !(float64(pj.Params[0].CI95[0]) < pj.K && pj.K < float64(pj.Params[0].CI95[1])) {
				t.Errorf("%s: %s: params %+v", params, pj.Input, pj.Params)
			}
		}
		if len(mo.Covariance) != 6 || len(mo.ParamNames) != 6 || mo.ParamNames[0] != "heater_sp.K" {
			t.Errorf("%s: covariance %dx?, names %v", params, len(mo.Covariance), mo.ParamNames)
		}
		p, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := b.Split("test")
		rm := linWindowRMSE(t, b, p, lo, hi)
		fr, err := eval.FreeRun(context.Background(), b, p.(eval.RunSimulator), "test", 24)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: test window RMSE %.4f, free-run RMSE %.4f (noise 0.05)", params, rm[0], fr.Targets[0].RMSE)
		if rm[0] > 0.08 || fr.Targets[0].RMSE > 0.08 {
			t.Errorf("%s: window RMSE %v, free run %v", params, rm, fr.Targets[0].RMSE)
		}
		// the platform's window metrics and conformal calibration take it
		// unchanged
		if _, err := eval.Evaluate(context.Background(), b, p); err != nil {
			t.Errorf("%s: Evaluate: %v", params, err)
		}
		if _, err := eval.Calibrate(context.Background(), b, p, 0.9); err != nil {
			t.Errorf("%s: Calibrate: %v", params, err)
		}
		// step responses of the model (analysis.StepResponses) read back
		// the gains and dead times
		rs := p.(eval.RunSimulator)
		st, err := analysis.StepResponses(func(u [][]float64) [][]float64 {
			y, err := rs.SimulateRun(u, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			return y
		}, analysis.StepOptions{U0: []float64{50, 15}, N: 200, Dt: 5})
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			s := st.Pairs[0][i]
			t.Logf("%s: step response of level to %s: gain %.3f, dead time %.0f s, τ %.1f s, settling %.0f s", params, mo.Pairs[i].Input, s.Gain, s.DeadTime, s.TimeConstant, s.SettlingTime)
			if math.Abs(s.Gain-w.K) > 0.02 || math.Abs(s.DeadTime-w.theta) > 5 {
				t.Errorf("%s: %s: step gain %v, dead time %v; want %v", params, mo.Pairs[i].Input, s.Gain, s.DeadTime, w)
			}
		}
	}
}

// process_model@1 refuses bad params before fitting, and the loader
// refuses a malformed artifact.
func TestProcessModelRefuses(t *testing.T) {
	b := procPlantBundle(t, 24, 36)
	for params, want := range map[string]string{
		`{"structure":"pid"}`:                           `structure "pid"`,
		`{"structures":{"flow":{"heater_sp":"fopdt"}}}`: "flow is not a target",
		`{"structures":{"level":{"dist":"fopdt"}}}`:     "dist is not a control",
		`{"structures":{"level":{"feed_sp":"x"}}}`:      `structures.level.feed_sp`,
		`{"maxTau":-1}`:                                 "must be finite and not negative",
		`{"structur":"fopdt"}`:                          "unknown field",
	} {
		if _, err := linTrainNative(t, ProcessModel{}, b, params); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", params, err, want)
		}
	}
	dir, err := linTrainNative(t, ProcessModel{}, b, `{"structure":"fopdt","maxIterations":3}`)
	if err != nil {
		t.Fatal(err)
	}
	path := dir + "/" + model.FileName
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`"structure": "pid"`, `"tau": -90`} {
		old := `"structure": "fopdt"`
		if strings.HasPrefix(bad, `"tau"`) {
			old = `"tau": `
			i := strings.Index(string(raw), old)
			j := i + strings.IndexAny(string(raw[i:]), ",\n")
			old = string(raw[i:j])
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(raw), old, bad, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()}); err == nil {
			t.Errorf("%s: loaded", bad)
		}
	}
}
