package trainers

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// driftRuns are runs of oeSystem at one operating point (random inputs
// about fixed levels) whose input and output measurements carry offsets
// and linear drifts per step of the run: the process is driven by the
// undrifted inputs, the measurements drift.
func driftRuns() []linSynRun {
	r := rand.New(rand.NewPCG(11, 1))
	off := []float64{5, -2, 0, 3, 1}
	slope := []float64{0.01, 0.005, 0, -0.02, 0.015}
	var runs []linSynRun
	for i, s := range []struct {
		split string
		T     int
	}{{dataset.SplitTrain, 800}, {dataset.SplitTrain, 800}, {dataset.SplitVal, 400}, {dataset.SplitTest, 800}} {
		u := make([][]float64, s.T)
		for k := range u {
			u[k] = []float64{r.NormFloat64(), 2*r.NormFloat64() - 1}
		}
		y := oeSystem(u, r)
		rows := make([][]float64, s.T)
		for k := range rows {
			rows[k] = []float64{u[k][0], u[k][1], r.NormFloat64(), y[k][0], y[k][1]}
			for c := range rows[k] {
				rows[k][c] += off[c] + slope[c]*float64(k)
			}
		}
		runs = append(runs, linSynRun{id: "run-" + string(rune('a'+i)), split: s.split, rows: rows})
	}
	return runs
}

// freeRunRMSE is p's free run over the test run (started from its first
// H rows) against the measured targets, per target, in engineering units.
func freeRunRMSE(t *testing.T, p model.Predictor, r linSynRun, H int) []float64 {
	t.Helper()
	sim, ok := p.(interface {
		SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error)
	})
	if !ok {
		t.Fatalf("%s: no run simulator", p.Format())
	}
	in, out := make([][]float64, len(r.rows)), make([][]float64, len(r.rows))
	for k, row := range r.rows {
		in[k], out[k] = row[:2], row[3:5]
	}
	res, err := sim.SimulateRun(in, out[:H], H)
	if err != nil {
		t.Fatal(err)
	}
	rmse := make([]float64, 2)
	for k := H; k < len(res); k++ {
		for o := range rmse {
			e := res[k][o] - out[k][o]
			rmse[o] += e * e
		}
	}
	for o := range rmse {
		rmse[o] = math.Sqrt(rmse[o] / float64(len(res)-H))
	}
	return rmse
}

// On a process whose input and output measurements carry offsets and
// linear drifts, every linear trainer fits better with detrend linear than
// without, in free run over the test run and over its windows, and its
// predictions are in the original units (the RMSE against the measured,
// drifting values is near the noise σ 0.2); the trend is in the artifact
// (detrend mean: the train runs' means, no slope).
func TestDetrendLinearTrainers(t *testing.T) {
	runs := driftRuns()
	const H, F = 10, 5
	b := linSynBundle(t, runs, H, F)
	test := b.Manifest.Split.Test
	for _, c := range []struct {
		tr     trainer.Trainer
		params string
		bound  float64 // free-run RMSE bound with detrend linear
	}{
		{OneStep{}, `"select":false,"na":1,"nb":3,"nk":1`, 0.4},
		{LinearStateSpace{}, `"order":3`, 0.8},
		{OutputError{}, `"nf":1,"nb":2,"nk":[1,2]`, 0.4},
		{ARMAX{}, `"na":1,"nb":2,"nc":1,"nk":[1,2]`, 0.4},
		{BoxJenkins{}, `"nf":1,"nb":2,"nc":1,"nd":1,"nk":[1,2]`, 0.4},
	} {
		t.Run(c.tr.Ref(), func(t *testing.T) {
			free, win := map[string][]float64{}, map[string][]float64{}
			for _, d := range []string{"none", "mean", "linear"} {
				dir, err := linTrainNative(t, c.tr, b, fmt.Sprintf(`{%s,"detrend":%q}`, c.params, d))
				if err != nil {
					t.Fatalf("detrend %s: %v", d, err)
				}
				var a struct {
					Detrend *linTrend `json:"detrend"`
				}
				raw := linReadArtifact(t, dir, &a)
				if (a.Detrend != nil) != (d != "none") || (a.Detrend != nil && a.Detrend.Method != d) {
					t.Fatalf("detrend %s: artifact trend %s", d, raw[:min(len(raw), 300)])
				}
				switch d {
				case "linear":
					if s := a.Detrend.YSlope[0]; math.Abs(s+0.02) > 0.003 {
						t.Errorf("y1 slope %.4f, measured drift −0.02", s)
					}
				case "mean":
					if a.Detrend.USlope[0] != 0 || math.Abs(a.Detrend.ULevel[0]-(5+0.01*399.5)) > 0.2 {
						t.Errorf("mean trend of u1: level %.4f, slope %v; the train mean is about 9", a.Detrend.ULevel[0], a.Detrend.USlope[0])
					}
				}
				p, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
				if err != nil {
					t.Fatal(err)
				}
				free[d] = freeRunRMSE(t, p, runs[3], H)
				win[d] = linWindowRMSE(t, b, p, test.Offset, test.Offset+test.Count)
			}
			for o := range free["none"] {
				if !(free["linear"][o] < free["none"][o]) || !(free["linear"][o] < c.bound) {
					t.Errorf("target %d free-run RMSE: linear %.4f, none %.4f (bound %v)", o, free["linear"][o], free["none"][o], c.bound)
				}
				if !(win["linear"][o] <= 1.02*win["none"][o]) {
					t.Errorf("target %d window RMSE: linear %.4f, none %.4f", o, win["linear"][o], win["none"][o])
				}
			}
			js, _ := json.Marshal(map[string]any{"free": free, "windows": win})
			t.Logf("%s", js)
		})
	}
}

// detrend none (or absent) writes no trend: the artifact and the
// predictions are today's.
func TestDetrendNoneIsToday(t *testing.T) {
	runs := linSynRuns(5, oeSystem, []linSynSpec{{dataset.SplitTrain, 400, nil}, {dataset.SplitVal, 200, nil}, {dataset.SplitTest, 200, nil}})
	b := linSynBundle(t, runs, 6, 3)
	for _, c := range []struct {
		tr     trainer.Trainer
		params string
	}{{OneStep{}, `"select":false,"na":1,"nb":2,"nk":1`}, {OutputError{}, `"nf":1`}, {LinearStateSpace{}, `"order":2,"windowX0":"prior"`}} {
		d1, err := linTrainNative(t, c.tr, b, "{"+c.params+"}")
		if err != nil {
			t.Fatal(err)
		}
		d2, err := linTrainNative(t, c.tr, b, "{"+c.params+`,"detrend":"none"}`)
		if err != nil {
			t.Fatal(err)
		}
		var a1, a2 map[string]any
		linReadArtifact(t, d1, &a1)
		linReadArtifact(t, d2, &a2)
		delete(a1, "training")
		delete(a2, "training")
		j1, _ := json.Marshal(a1)
		j2, _ := json.Marshal(a2)
		if string(j1) != string(j2) || a1["detrend"] != nil {
			t.Errorf("%s: detrend none changed the model", c.tr.Ref())
		}
	}
	if _, err := linTrainNative(t, OneStep{}, b, `{"detrend":"quadratic"}`); err == nil {
		t.Error("detrend quadratic accepted")
	}
}

// linTrend.place finds where a drifting sequence lies on the stored lines
// (a window from step 500 of a run, 20 rows), and misplaces one whose
// input level is off its line — the stated limit of detrend linear.
func TestDetrendPlacement(t *testing.T) {
	runs := driftRuns()
	var train []linRun
	for _, r := range runs[:2] {
		var lr linRun
		for _, row := range r.rows {
			lr.u, lr.y = append(lr.u, []float64{row[0], row[1]}), append(lr.y, []float64{row[3], row[4]})
		}
		train = append(train, lr)
	}
	tr, err := linDetrendRuns(detrendLinear, train)
	if err != nil {
		t.Fatal(err)
	}
	test := runs[3].rows
	window := func(from, n int, du float64) (u, y [][]float64) {
		for k := from; k < from+n; k++ {
			u = append(u, []float64{test[k][0] + du, test[k][1]})
			if k < from+n/2 {
				y = append(y, []float64{test[k][3], test[k][4]})
			}
		}
		return u, y
	}
	for _, c := range []struct {
		from, n  int
		du       float64
		lo, high float64
	}{
		{0, 800, 0, -10, 10},   // a whole run: its start
		{500, 20, 0, 400, 600}, // a window: within about σ/(slope·√rows)
		{0, 800, 1, 20, 150},   // u1 one unit above its line (1/slope = 100 steps; the other channels pull back): misplaced
	} {
		u, y := window(c.from, c.n, c.du)
		if tau := tr.place(u, y); !(tau > c.lo && tau < c.high) {
			t.Errorf("rows %d…%d, u1 %+v: placed at step %.1f, want %v…%v", c.from, c.from+c.n, c.du, tau, c.lo, c.high)
		}
	}
}
