package eval

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
)

// echo predicts y = u exactly (perfect) or the constant c (a mean model).
type echo struct {
	H, F  int
	c     float64
	exact bool
}

func (e echo) Format() string { return "test/echo" }
func (e echo) Horizon() int   { return e.F }
func (e echo) PredictBatch(_ context.Context, x, u []float32, n int) ([]float32, error) {
	out := make([]float32, 0, n*e.F)
	for w := 0; w < n; w++ {
		for f := 0; f < e.F; f++ {
			v := float32(e.c)
			if e.exact {
				v = u[w*e.F+f]
			}
			out = append(out, v)
		}
	}
	return out, nil
}
func (e echo) SimulateRun(in, out [][]float64, nInit int) ([][]float64, error) {
	res := make([][]float64, len(in))
	for k := range in {
		res[k] = []float64{e.c}
		if e.exact {
			res[k] = []float64{in[k][0]}
		}
	}
	return res, nil
}

// FitRun: a perfect model fits 100 %, the run's mean 0 %, over every
// NaN-free segment (a gap splits the run; a segment too short to start
// is skipped and counted), and the view encodes missing values as null.
func TestFitRun(t *testing.T) {
	const H, F, steps = 3, 2, 60
	man := &dataset.Manifest{Kind: dataset.KindDynamic, HistorySteps: H, HorizonSteps: F, BeatMs: 1000,
		AllNodes: []string{"u", "y"}, Controls: []string{"u"}, Targets: []string{"y"}}
	g := &dataset.ServeGrid{RunID: "r1", BeatUs: 1_000_000, Steps: steps, Nodes: []string{"u", "y"}, Vals: make([]float32, 2*steps)}
	for s := 0; s < steps; s++ {
		v := float32(math.Sin(float64(s) / 5))
		g.Vals[2*s], g.Vals[2*s+1] = v, v
	}
	for _, s := range []int{30, 33} { // gaps: segments 0–29, 31–32 (too short), 34–59
		g.Vals[2*s+1] = float32(math.NaN())
	}
	perfect, err := FitRun(context.Background(), echo{H: H, F: F, exact: true}, man, g, 0)
	if err != nil {
		t.Fatal(err)
	}
	if perfect.Segments != 2 || perfect.Skipped != 1 || math.Abs(perfect.FreeRun[0].FitPct-100) > 1e-6 || math.Abs(perfect.KStep[0].FitPct-100) > 1e-6 {
		t.Fatalf("perfect: %+v", perfect)
	}
	if n := perfect.FreeRun[0].Samples; n != (30-H)+(26-H) {
		t.Fatalf("free-run samples %d", n)
	}
	mean := 0.0
	cnt := 0
	for s := 0; s < steps; s++ {
		if v := perfect.Simulated[0][s]; !math.IsNaN(v) {
			mean += perfect.Measured[0][s]
			cnt++
		}
	}
	flat, err := FitRun(context.Background(), echo{H: H, F: F, c: mean / float64(cnt)}, man, g, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f := flat.FreeRun[0].FitPct; math.Abs(f) > 1e-6 {
		t.Fatalf("the run's mean fits %v %%", f)
	}
	b, err := json.Marshal(perfect)
	if err != nil || !strings.Contains(string(b), "null") || !strings.Contains(string(b), `"fitPct":100`) {
		t.Fatalf("json: %v %.300s", err, b)
	}
}
