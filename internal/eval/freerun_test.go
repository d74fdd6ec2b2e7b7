package eval

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
)

// freeRunBundle is a dynamic bundle without windows whose grid holds four
// runs of columns [u, d, y] with y = 2u: r0 (train, 3 steps), r1 (test, 6
// steps, u = 1..6), r2 (test, 8 steps, u = 1..8, y missing at step 2 and d
// missing at step 6), r3 (test, 2 steps).
func freeRunBundle(t *testing.T) *dataset.Bundle {
	t.Helper()
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindDynamic, Purpose: dataset.PurposeMPCSurrogate,
		AllNodes: []string{"u", "d", "y"}, Controls: []string{"u"}, Targets: []string{"y"}, HistorySteps: 1, HorizonSteps: 1, Stride: 1, BeatMs: 1000,
		Split: dataset.ManifestSplit{
			Train: dataset.SplitPart{RunIDs: []string{"r0"}},
			Test:  dataset.SplitPart{RunIDs: []string{"r1", "r2", "r3"}}},
		Runs: []dataset.ManifestRun{{RunID: "r0", GridOffset: 0, GridSteps: 3}, {RunID: "r1", GridOffset: 3, GridSteps: 6},
			{RunID: "r2", GridOffset: 9, GridSteps: 8}, {RunID: "r3", GridOffset: 17, GridSteps: 2}}}
	b := &dataset.Bundle{Manifest: m, X: []float32{}, U: []float32{}, Y: []float32{}, TS: []float64{}, Mask: []float32{}}
	nan := float32(math.NaN())
	add := func(u, d, y float32) {
		b.Grid = append(b.Grid, u, d, y)
		b.GridTS = append(b.GridTS, float64(len(b.GridTS))*1000)
	}
	for k := 1; k <= 3; k++ {
		add(float32(k), 0, float32(2*k))
	}
	for k := 1; k <= 6; k++ {
		add(float32(k), 5, float32(2*k))
	}
	for k := 1; k <= 8; k++ {
		y, d := float32(2*k), float32(1)
		if k == 3 {
			y = nan
		}
		if k == 7 {
			d = nan
		}
		add(float32(k), d, y)
	}
	add(1, 0, 2)
	add(2, 0, 4)
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	return b
}

// funcSim simulates y = f(u) row by row and records what it was given.
type funcSim struct {
	f     func(u float64) float64
	calls [][2]int // len(inputs), len(outputs)
	t     *testing.T
}

func (s *funcSim) SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error) {
	if len(outputs) != nInit {
		s.t.Errorf("simulator got %d output rows, nInit %d", len(outputs), nInit)
	}
	for k, row := range outputs {
		if row[0] != 2*inputs[k][0] {
			s.t.Errorf("initial output %d is %v, input %v", k, row[0], inputs[k][0])
		}
	}
	s.calls = append(s.calls, [2]int{len(inputs), len(outputs)})
	out := make([][]float64, len(inputs))
	for k, in := range inputs {
		out[k] = []float64{s.f(in[0])}
	}
	return out, nil
}

func TestFreeRunHandComputed(t *testing.T) {
	b := freeRunBundle(t)
	ctx := context.Background()
	perfect := &funcSim{f: func(u float64) float64 { return 2 * u }, t: t}
	m, err := FreeRun(ctx, b, perfect, dataset.SplitTest, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Runs) != 3 || m.InitSteps != 2 || m.Split != "test" {
		t.Fatalf("%+v", m)
	}
	// r1 whole; r2: the longest NaN-free segment is steps 3..7 (the NaN of
	// d at step 6 does not matter); r3 has only the 2 initial steps.
	r1, r2, r3 := m.Runs[0], m.Runs[1], m.Runs[2]
	if r1.Offset != 0 || r1.Steps != 6 || r1.N != 4 || r2.Offset != 3 || r2.Steps != 5 || r2.N != 3 || r2.GridSteps != 8 || r3.N != 0 || r3.Skipped == "" {
		t.Fatalf("runs %+v", m.Runs)
	}
	if len(perfect.calls) != 2 || perfect.calls[1] != [2]int{5, 2} {
		t.Fatalf("calls %v", perfect.calls)
	}
	tm := m.Targets[0]
	if tm.N != 7 || tm.RMSE != 0 || tm.NRMSE != 0 || tm.R2 != 1 || m.MeanNRMSE != 0 || !math.IsNaN(tm.OneStepRMSE) {
		t.Fatalf("perfect simulator: %+v", tm)
	}

	// Constant 10. Scored y: r1 6 8 10 12, r2 12 14 16 → errors 4 2 0 −2,
	// −2 −4 −6: SSE 80, N 7; Σy = 78, Σy² = 940 → SST 496/7.
	m, err = FreeRun(ctx, b, &funcSim{f: func(float64) float64 { return 10 }, t: t}, dataset.SplitTest, 2)
	if err != nil {
		t.Fatal(err)
	}
	tm = m.Targets[0]
	near(t, "RMSE", tm.RMSE, math.Sqrt(80.0/7))
	near(t, "NRMSE", tm.NRMSE, math.Sqrt(35.0/31))
	near(t, "MeanNRMSE", m.MeanNRMSE, math.Sqrt(35.0/31))
	near(t, "R2", tm.R2, -4.0/31)
	near(t, "MAE", tm.MAE, 20.0/7)
	// per run: r1 RMSE √6, std √5; r2 RMSE √(56/3), std √(8/3)
	near(t, "r1 RMSE", m.Runs[0].RMSE[0], math.Sqrt(6))
	near(t, "r1 NRMSE", m.Runs[0].NRMSE[0], math.Sqrt(6.0/5))
	near(t, "r2 RMSE", m.Runs[1].RMSE[0], math.Sqrt(56.0/3))
	near(t, "r2 NRMSE", m.Runs[1].NRMSE[0], math.Sqrt(7))

	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back FreeRunMetrics
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.MeanNRMSE != m.MeanNRMSE || back.Runs[1].NRMSE[0] != m.Runs[1].NRMSE[0] || back.Runs[2].Skipped == "" || !math.IsNaN(back.Targets[0].OneStepNRMSE) {
		t.Fatalf("round trip: %s", js)
	}

	// nInit 0: every step of r3 is scored too
	m, err = FreeRun(ctx, b, perfect, dataset.SplitTest, 0)
	if err != nil || m.Targets[0].N != 6+5+2 {
		t.Fatalf("nInit 0: %v %+v", err, m)
	}
	// a split without runs has NaN metrics
	m, err = FreeRun(ctx, b, perfect, dataset.SplitVal, 2)
	if err != nil || !math.IsNaN(m.MeanNRMSE) || m.Targets[0].N != 0 {
		t.Fatalf("empty split: %v %+v", err, m)
	}
}

type badSim struct{ mode int }

func (s badSim) SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error) {
	out := make([][]float64, len(inputs))
	for k := range out {
		out[k] = []float64{0}
	}
	switch s.mode {
	case 0:
		return out[1:], nil
	case 1:
		out[len(out)-1][0] = math.Inf(1)
	case 2:
		out[len(out)-1] = []float64{1, 2}
	}
	return out, nil
}

func TestFreeRunRejects(t *testing.T) {
	b := freeRunBundle(t)
	ctx := context.Background()
	for mode := 0; mode < 3; mode++ {
		if _, err := FreeRun(ctx, b, badSim{mode}, dataset.SplitTest, 2); !model.IsModelInvalid(err) {
			t.Errorf("mode %d: %v", mode, err)
		}
	}
	if _, err := FreeRun(ctx, b, badSim{}, "holdout", 2); err == nil {
		t.Error("unknown split accepted")
	}
	if _, err := FreeRun(ctx, b, badSim{}, dataset.SplitTest, -1); err == nil {
		t.Error("negative nInit accepted")
	}
}
