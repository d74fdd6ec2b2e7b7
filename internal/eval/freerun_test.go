package eval

import (
	"context"
	"encoding/json"
	"math"
	"strings"
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
	// r1 whole; r2: segments 0..1 (skipped, not longer than nInit) and
	// 3..7 (the NaN of d at step 6 does not matter); r3 has only the 2
	// initial steps.
	r1, r2, r3 := m.Runs[0], m.Runs[1], m.Runs[2]
	if len(r1.Segments) != 1 || r1.Segments[0] != (FreeRunSegment{Offset: 0, Steps: 6, N: 4}) || r1.N != 4 ||
		len(r2.Segments) != 2 || r2.Segments[0] != (FreeRunSegment{Offset: 0, Steps: 2, Skipped: true}) ||
		r2.Segments[1] != (FreeRunSegment{Offset: 3, Steps: 5, N: 3}) || r2.N != 3 || r2.GridSteps != 8 || r3.N != 0 || r3.Skipped == "" {
		t.Fatalf("runs %+v", m.Runs)
	}
	// scored: r1 6, r2 5; skipped: r2's first, r3; not scored: 2 + (8 − 3) + 2
	if m.Segments != 2 || m.SkippedSegments != 2 || m.NotScored != 9 || m.Diverged ||
		len(m.SegmentSteps) != 2 || m.SegmentSteps[1] != 5 || len(m.SkippedSteps) != 2 || m.SkippedSteps[0] != 2 {
		t.Fatalf("segments %+v", m)
	}
	if got, want := m.Summary(), "free run over 2 segment(s) (2 skipped, 9 samples not scored)"; got != want {
		t.Errorf("summary %q, want %q", got, want)
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
	if back.MeanNRMSE != m.MeanNRMSE || back.Runs[1].NRMSE[0] != m.Runs[1].NRMSE[0] || back.Runs[2].Skipped == "" || !math.IsNaN(back.Targets[0].OneStepNRMSE) ||
		back.Segments != 2 || back.NotScored != 9 || len(back.Runs[1].Segments) != 2 {
		t.Fatalf("round trip: %s", js)
	}

	// nInit 0: every NaN-free step is scored (r2's two segments, r3)
	m, err = FreeRun(ctx, b, perfect, dataset.SplitTest, 0)
	if err != nil || m.Targets[0].N != 6+2+5+2 || m.Segments != 4 || m.NotScored != 1 {
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
	for _, mode := range []int{0, 2} {
		if _, err := FreeRun(ctx, b, badSim{mode}, dataset.SplitTest, 2); !model.IsModelInvalid(err) {
			t.Errorf("mode %d: %v", mode, err)
		}
	}
	// a non-finite value is no error but a divergence, and JSON-safe
	m, err := FreeRun(ctx, b, badSim{1}, dataset.SplitTest, 2)
	if err != nil || !m.Diverged || m.DivergedSegments != 2 || m.Divergence.RunID != "r1" || m.Divergence.Step != 5 ||
		m.Divergence.Target != "y" || !math.IsInf(m.Targets[0].RMSE, 1) {
		t.Fatalf("non-finite: %v %+v", err, m)
	}
	if _, err := json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if _, err := FreeRun(ctx, b, badSim{}, "holdout", 2); err == nil {
		t.Error("unknown split accepted")
	}
	if _, err := FreeRun(ctx, b, badSim{}, dataset.SplitTest, -1); err == nil {
		t.Error("negative nInit accepted")
	}
}

// firstOrder simulates y(k+1) = a·y(k) + b·u(k) from the last initial
// output.
type firstOrder struct{ a, b float64 }

func (s firstOrder) SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error) {
	out := make([][]float64, len(inputs))
	y := 0.0
	for k := range inputs {
		if k < nInit {
			y = outputs[k][0]
		} else {
			y = s.a*y + s.b*inputs[k-1][0]
		}
		out[k] = []float64{y}
	}
	return out, nil
}

// oneRunBundle is a dynamic bundle of columns [u, y] with one test run.
func oneRunBundle(t *testing.T, u, y []float64) *dataset.Bundle {
	t.Helper()
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindDynamic, Purpose: dataset.PurposeMPCSurrogate,
		AllNodes: []string{"u", "y"}, Controls: []string{"u"}, Targets: []string{"y"}, HistorySteps: 1, HorizonSteps: 1, Stride: 1, BeatMs: 1000,
		Split: dataset.ManifestSplit{Test: dataset.SplitPart{RunIDs: []string{"r"}}},
		Runs:  []dataset.ManifestRun{{RunID: "r", GridOffset: 0, GridSteps: len(u)}}}
	b := &dataset.Bundle{Manifest: m, X: []float32{}, U: []float32{}, Y: []float32{}, TS: []float64{}, Mask: []float32{}}
	for k := range u {
		b.Grid = append(b.Grid, float32(u[k]), float32(y[k]))
		b.GridTS = append(b.GridTS, float64(k)*1000)
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFreeRunGaps: every NaN-free segment is simulated, the model
// re-initialised after each gap; a short segment is skipped and counted;
// the pooled score stays close to the score without gaps.
func TestFreeRunGaps(t *testing.T) {
	const T, nInit = 200, 3
	u, y := make([]float64, T), make([]float64, T)
	for k := range T {
		u[k] = math.Sin(float64(k)/7) + 0.5*math.Sin(float64(k)/3)
		if k > 0 {
			y[k] = 0.9*y[k-1] + 0.5*u[k-1]
		}
	}
	sim := firstOrder{a: 0.85, b: 0.5} // a slightly wrong model: NRMSE > 0
	ctx := context.Background()
	base, err := FreeRun(ctx, oneRunBundle(t, u, y), sim, dataset.SplitTest, nInit)
	if err != nil {
		t.Fatal(err)
	}
	nan := math.NaN()
	cases := []struct {
		name                string
		nanY, nanU          []int
		segments, skipped   int
		steps, skippedSteps []int
		notScored           int
	}{
		{"no gap", nil, nil, 1, 0, []int{200}, []int{}, nInit},
		{"two NaN rows in the middle", []int{100, 101}, nil, 2, 0, []int{100, 98}, []int{}, 2 + 2*nInit},
		{"two separate NaN rows", []int{60}, []int{140}, 3, 0, []int{60, 79, 59}, []int{}, 2 + 3*nInit},
		{"short segment skipped", []int{50, 53}, nil, 2, 1, []int{50, 146}, []int{2}, 2 + 2 + 2*nInit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			uu, yy := append([]float64(nil), u...), append([]float64(nil), y...)
			for _, k := range c.nanY {
				yy[k] = nan
			}
			for _, k := range c.nanU {
				uu[k] = nan
			}
			m, err := FreeRun(ctx, oneRunBundle(t, uu, yy), sim, dataset.SplitTest, nInit)
			if err != nil {
				t.Fatal(err)
			}
			if m.Segments != c.segments || m.SkippedSegments != c.skipped || m.NotScored != c.notScored || m.Diverged ||
				!equalInts(m.SegmentSteps, c.steps) || !equalInts(m.SkippedSteps, c.skippedSteps) {
				t.Fatalf("segments %d %v skipped %d %v not scored %d diverged %v", m.Segments, m.SegmentSteps, m.SkippedSegments, m.SkippedSteps, m.NotScored, m.Diverged)
			}
			if m.Targets[0].N != T-c.notScored || m.Runs[0].N != m.Targets[0].N {
				t.Fatalf("N %d, run N %d, want %d", m.Targets[0].N, m.Runs[0].N, T-c.notScored)
			}
			if r := m.MeanNRMSE / base.MeanNRMSE; !(r > 0.85 && r < 1.15) {
				t.Errorf("NRMSE %.4f, without gaps %.4f", m.MeanNRMSE, base.MeanNRMSE)
			}
		})
	}
	if !(base.MeanNRMSE > 0.01) || base.MeanNRMSE > 1 {
		t.Fatalf("base NRMSE %v", base.MeanNRMSE)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFreeRunDiverges: an unstable simulation is flagged with its
// segment and step, a stable one is not.
func TestFreeRunDiverges(t *testing.T) {
	const T = 120
	u, y := make([]float64, T), make([]float64, T)
	for k := range T {
		u[k] = math.Sin(float64(k) / 5)
		if k > 0 {
			y[k] = 0.9*y[k-1] + 0.5*u[k-1]
		}
	}
	u[40] = math.NaN()
	b := oneRunBundle(t, u, y)
	ctx := context.Background()
	m, err := FreeRun(ctx, b, firstOrder{a: 1.2, b: 0.5}, dataset.SplitTest, 2)
	if err != nil {
		t.Fatal(err)
	}
	d := m.Divergence
	if !m.Diverged || m.DivergedSegments != 2 || d == nil || d.RunID != "r" || d.Segment != 0 || d.Step <= 2 || d.Step >= 40 ||
		!strings.Contains(d.Reason, "range") || !m.Runs[0].Segments[1].Diverged || !strings.Contains(m.Summary(), "DIVERGED") {
		t.Fatalf("diverged %v %d %+v", m.Diverged, m.DivergedSegments, d)
	}
	js, err := json.Marshal(m)
	if err != nil || !strings.Contains(string(js), `"diverged":true`) {
		t.Fatalf("%v %s", err, js)
	}
	m, err = FreeRun(ctx, b, firstOrder{a: 0.85, b: 0.5}, dataset.SplitTest, 2)
	if err != nil || m.Diverged || m.Divergence != nil || m.Segments != 2 {
		t.Fatalf("stable: %v %+v", err, m)
	}
}
