package eval

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
)

// cfBundle is an in-memory dynamic bundle with H = 1 and columns
// [s, t0, t1, …]; windows are train | val | test. Arrays are zero.
func cfBundle(t *testing.T, F, nT, train, val, test int) *dataset.Bundle {
	t.Helper()
	all := []string{"s"}
	var tgt []string
	for k := 0; k < nT; k++ {
		tgt = append(tgt, "t"+string(rune('0'+k)))
	}
	all = append(all, tgt...)
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindDynamic, Purpose: dataset.PurposeMPCSurrogate,
		AllNodes: all, Targets: tgt, HistorySteps: 1, HorizonSteps: F, Stride: 1, BeatMs: 1000,
		Split: dataset.ManifestSplit{
			Train: dataset.SplitPart{RunIDs: []string{"r1"}, Offset: 0, Count: train},
			Val:   dataset.SplitPart{RunIDs: []string{"r2"}, Offset: train, Count: val},
			Test:  dataset.SplitPart{RunIDs: []string{"r3"}, Offset: train + val, Count: test}}}
	d := m.Dims()
	b := &dataset.Bundle{Manifest: m,
		X: make([]float32, d.N*d.XLen()), U: make([]float32, d.N*d.ULen()), Y: make([]float32, d.N*d.YLen()),
		TS: make([]float64, d.N*(1+F)), Mask: make([]float32, d.N*(1+F))}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	return b
}

// cfGain and cfSigma are the synthetic signal gain and noise std of step
// f, target k.
func cfGain(f, k int) float64  { return 0.5 * float64((f+1)*(k+1)) }
func cfSigma(f, k int) float64 { return 0.1 * float64(1+f+k) }

// cfNoisy fills every window: x = [s, 0…], s ~ N(0,1), and
// y[f,k] = gain·s + σ·ε with Gaussian ε.
func cfNoisy(b *dataset.Bundle, seed uint64) {
	d := b.Dims()
	rng := rand.New(rand.NewPCG(seed, 7))
	for w := 0; w < d.N; w++ {
		x, _, y := b.Window(w)
		s := rng.NormFloat64()
		x[0] = float32(s)
		for f := 0; f < d.F; f++ {
			for k := 0; k < d.YCols; k++ {
				y[f*d.YCols+k] = float32(cfGain(f, k)*s + cfSigma(f, k)*rng.NormFloat64())
			}
		}
	}
}

// cfSignal predicts the noise-free signal gain·s from x[0]; it counts the
// windows it predicts.
type cfSignal struct {
	F, nT, xl int
	windows   int
}

func (p *cfSignal) Format() string { return "test.signal" }
func (p *cfSignal) Horizon() int   { return p.F }
func (p *cfSignal) PredictBatch(_ context.Context, x, _ []float32, n int) ([]float32, error) {
	p.windows += n
	out := make([]float32, 0, n*p.F*p.nT)
	for w := 0; w < n; w++ {
		s := float64(x[w*p.xl])
		for f := 0; f < p.F; f++ {
			for k := 0; k < p.nT; k++ {
				out = append(out, float32(cfGain(f, k)*s))
			}
		}
	}
	return out, nil
}

func newCfSignal(b *dataset.Bundle) *cfSignal {
	d := b.Dims()
	return &cfSignal{F: d.F, nT: d.YCols, xl: d.XLen()}
}

func TestConformalCoverageGaussian(t *testing.T) {
	ctx := context.Background()
	const F, nT = 3, 2
	for i, q := range []float64{0.8, 0.9, 0.95} {
		b := cfBundle(t, F, nT, 50, 2000, 4000)
		cfNoisy(b, uint64(100+i))
		p := newCfSignal(b)
		c, err := Calibrate(ctx, b, p, q)
		if err != nil {
			t.Fatal(err)
		}
		if p.windows != 2000 {
			t.Fatalf("calibration predicted %d windows, want the 2000 val windows only", p.windows)
		}
		if c.Split != dataset.SplitVal || c.CalibrationWindows != 2000 || c.Rank != int(math.Ceil(2001*q-1e-9)) {
			t.Fatalf("calibration %+v", c)
		}
		// The width should be near σ·z, z the two-sided normal quantile.
		z := math.Sqrt2 * math.Erfinv(q)
		for f := 0; f < F; f++ {
			for k := 0; k < nT; k++ {
				want := cfSigma(f, k) * z
				if got := c.Widths[f][k]; math.Abs(got-want) > 0.1*want {
					t.Fatalf("q=%v width[%d][%d] = %v, want ≈ %v", q, f, k, got, want)
				}
			}
		}
		cov, err := c.MeasureCoverage(ctx, b, p)
		if err != nil {
			t.Fatal(err)
		}
		if cov.TestWindows != 4000 || cov.Split != dataset.SplitTest || cov.Target != q {
			t.Fatalf("report %+v", cov)
		}
		t.Logf("target %.2f: measured test coverage %.4f (per target %.4f, per step %.4f) over %d test windows, %d calibration windows",
			q, cov.Measured, cov.PerTarget, cov.PerStep, cov.TestWindows, c.CalibrationWindows)
		if math.Abs(cov.Measured-q) > 0.03 {
			t.Fatalf("q=%v: measured coverage %v not within ±0.03", q, cov.Measured)
		}
		for k, v := range cov.PerTarget {
			if math.Abs(v-q) > 0.03 {
				t.Fatalf("q=%v: target %d coverage %v", q, k, v)
			}
		}
		for f, v := range cov.PerStep {
			if math.Abs(v-q) > 0.03 {
				t.Fatalf("q=%v: step %d coverage %v", q, f, v)
			}
		}
	}
}

func TestConformalUsesOnlyCalibrationSplit(t *testing.T) {
	ctx := context.Background()
	b := cfBundle(t, 2, 2, 30, 200, 300)
	cfNoisy(b, 1)
	c0, err := Calibrate(ctx, b, newCfSignal(b), 0.9)
	if err != nil {
		t.Fatal(err)
	}
	// Changing test and train values leaves the widths alone.
	lo, _ := b.Split(dataset.SplitTest)
	for w := lo; w < lo+300; w += 7 {
		_, _, y := b.Window(w)
		y[0], y[3] = 1e6, -1e6
	}
	_, _, y := b.Window(0)
	y[1] = 1e6
	c1, err := Calibrate(ctx, b, newCfSignal(b), 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c0, c1) {
		t.Fatalf("widths changed with test/train values: %v → %v", c0.Widths, c1.Widths)
	}
	// Changing val values does change them: make the val window with the
	// smallest step-0 target-0 residual a huge outlier.
	vlo, vhi := b.Split(dataset.SplitVal)
	best, bestR := -1, math.Inf(1)
	for w := vlo; w < vhi; w++ {
		x, _, y := b.Window(w)
		if r := math.Abs(float64(y[0]) - cfGain(0, 0)*float64(x[0])); r < bestR {
			best, bestR = w, r
		}
	}
	_, _, y = b.Window(best)
	y[0] = 1e6
	c2, err := Calibrate(ctx, b, newCfSignal(b), 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if !(c2.Widths[0][0] > c0.Widths[0][0]) {
		t.Fatalf("a val outlier did not widen the interval: %v vs %v", c2.Widths[0][0], c0.Widths[0][0])
	}
	if c2.Widths[1][1] != c0.Widths[1][1] {
		t.Fatalf("another (step, target) changed: %v vs %v", c2.Widths[1][1], c0.Widths[1][1])
	}
}

// cfConst predicts 0 everywhere.
type cfConst struct{ F, nT int }

func (p cfConst) Format() string { return "test.zero" }
func (p cfConst) Horizon() int   { return p.F }
func (p cfConst) PredictBatch(_ context.Context, _, _ []float32, n int) ([]float32, error) {
	return make([]float32, n*p.F*p.nT), nil
}

func TestConformalRankHandComputed(t *testing.T) {
	ctx := context.Background()
	// 20 val windows with |residual| 1…20 in a scrambled order and signs.
	b := cfBundle(t, 1, 1, 1, 20, 1)
	lo, _ := b.Split(dataset.SplitVal)
	for i := 0; i < 20; i++ {
		v := float32((i*7)%20 + 1)
		if i%3 == 0 {
			v = -v
		}
		_, _, y := b.Window(lo + i)
		y[0] = v
	}
	for _, tc := range []struct {
		q    float64
		rank int
	}{
		{0.9, 19},  // ⌈21·0.9⌉ = ⌈18.9⌉
		{0.8, 17},  // ⌈16.8⌉
		{0.95, 20}, // ⌈19.95⌉
		{0.5, 11},  // ⌈10.5⌉
		{0.1, 3},   // ⌈2.1⌉
	} {
		c, err := Calibrate(ctx, b, cfConst{1, 1}, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if c.Rank != tc.rank || c.Widths[0][0] != float64(tc.rank) {
			t.Fatalf("q=%v: rank %d width %v, want %d", tc.q, c.Rank, c.Widths[0][0], tc.rank)
		}
	}
	// ⌈(n+1)q⌉ with exact integer arithmetic, where (n+1)q is often an
	// integer that floating point gets slightly wrong (30·0.9).
	for _, q := range []struct{ num, den int }{{8, 10}, {9, 10}, {95, 100}, {7, 10}, {99, 100}, {3, 10}} {
		qf := float64(q.num) / float64(q.den)
		for n := 1; n <= 2000; n++ {
			want := ((n+1)*q.num + q.den - 1) / q.den
			if got := conformalRank(n, qf); got != want {
				t.Fatalf("rank(%d, %v) = %d, want %d", n, qf, got, want)
			}
		}
	}
	if conformalRank(29, 0.9) != 27 {
		t.Fatal("⌈30·0.9⌉ must be 27")
	}
	for q, want := range map[float64]int{0.5: 20, 0.9: 20, 0.95: 20, 0.96: 24, 0.99: 99} {
		if got := CalibrationWindowsNeeded(q); got != want {
			t.Fatalf("windows needed at %v = %d, want %d", q, got, want)
		}
	}
}

func TestConformalRejects(t *testing.T) {
	ctx := context.Background()
	small := cfBundle(t, 1, 1, 5, 19, 5)
	_, err := Calibrate(ctx, small, cfConst{1, 1}, 0.9)
	if core.CodeOf(err) != core.CodeInvalidArgument || !strings.Contains(err.Error(), "19 window") || !strings.Contains(err.Error(), "at least 20") {
		t.Fatalf("19 val windows: %v", err)
	}
	b := cfBundle(t, 1, 1, 5, 50, 5)
	_, err = Calibrate(ctx, b, cfConst{1, 1}, 0.99)
	if err == nil || !strings.Contains(err.Error(), "at least 99") {
		t.Fatalf("0.99 with 50 windows: %v", err)
	}
	for _, q := range []float64{0, 1, -0.1, 1.5, math.NaN()} {
		if _, err := Calibrate(ctx, b, cfConst{1, 1}, q); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("coverage %v: %v", q, err)
		}
	}
	if _, err := Calibrate(ctx, b, cfConst{2, 1}, 0.9); err == nil {
		t.Fatal("horizon mismatch accepted")
	}
	c, err := Calibrate(ctx, b, cfConst{1, 1}, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	other := cfBundle(t, 2, 1, 5, 50, 5)
	if _, err := c.MeasureCoverage(ctx, other, cfConst{2, 1}); err == nil {
		t.Fatal("widths of another shape accepted")
	}
	noTest := cfBundle(t, 1, 1, 5, 50, 0)
	if _, err := c.MeasureCoverage(ctx, noTest, cfConst{1, 1}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("empty test split: %v", err)
	}
}

func TestConformalInterval(t *testing.T) {
	c := &Conformal{Coverage: 0.9, Widths: [][]float64{{0.1, 2}, {0.3, 4}}}
	yhat := []float32{1, 1, 1, 1, 10, 20, 30, 40} // two windows of [F=2, nT=2]
	lo, hi := c.Interval(yhat)
	for i, v := range yhat {
		w := c.Widths[(i%4)/2][i%2]
		if float64(lo[i]) > float64(v)-w || float64(hi[i]) < float64(v)+w {
			t.Fatalf("value %d: [%v, %v] does not hold %v ± %v", i, lo[i], hi[i], v, w)
		}
		if float64(hi[i])-float64(lo[i]) > 2*w+1e-5*math.Abs(float64(v)) {
			t.Fatalf("value %d: [%v, %v] wider than needed", i, lo[i], hi[i])
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("wrong length did not panic")
		}
	}()
	c.Interval(make([]float32, 3))
}

// cfEnsemble has members predicting member-specific offsets.
type cfEnsemble struct {
	cfConst
	offsets []float32
}

func (p cfEnsemble) PredictMembers(_ context.Context, _, _ []float32, n int) ([][]float32, error) {
	out := make([][]float32, len(p.offsets))
	for m, o := range p.offsets {
		out[m] = make([]float32, n*p.F*p.nT)
		for i := range out[m] {
			out[m][i] = o
		}
	}
	return out, nil
}

func TestConformalDisagreement(t *testing.T) {
	c := &Conformal{Coverage: 0.9, Widths: [][]float64{{2, 0}}}
	// Members around 0 (a mean near zero must not explode the measure):
	// values −1, 0, 1 → sample std 1.
	members := [][]float32{{-1, 5}, {0, 5}, {1, 5}}
	d := c.Disagreement(members)
	near(t, "disagreement in interval units", d[0], 0.5)
	if d[1] != 0 {
		t.Fatalf("agreeing members with zero width: %v", d[1])
	}
	d = c.Disagreement([][]float32{{0, 5}, {0, 6}})
	if !math.IsInf(d[1], 1) {
		t.Fatalf("disagreeing members with zero width: %v", d[1])
	}
	if d := c.Disagreement([][]float32{{1, 2}}); !math.IsNaN(d[0]) {
		t.Fatalf("one member: %v", d)
	}
	ctx := context.Background()
	c2 := &Conformal{Coverage: 0.9, Widths: [][]float64{{0.5}}}
	e := cfEnsemble{cfConst{1, 1}, []float32{1, 2, 3, 4}}
	got, err := c2.EnsembleDisagreement(ctx, e, make([]float32, 3), nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := math.Sqrt(5.0/3) / 0.5 // sample std of 1,2,3,4
	if len(got) != 3 {
		t.Fatalf("%v", got)
	}
	for _, v := range got {
		near(t, "ensemble disagreement", v, want)
	}
	if _, err := c2.EnsembleDisagreement(ctx, cfConst{1, 1}, nil, nil, 1); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("non-ensemble: %v", err)
	}
}

// cfInjection builds the example injection dataset over a simulated line
// (12 runs × 10 min at 1 s), opens it and returns it with a persistence
// model (y[f,k] = the target's last history value) as a linear-window
// artifact.
func cfInjection(t *testing.T) (*dataset.Bundle, model.Predictor) {
	t.Helper()
	b := builtInjection(t)
	d, man := b.Dims(), b.Manifest
	col := map[string]int{}
	for j, n := range man.AllNodes {
		col[n] = j
	}
	nFeat := d.H*d.XCols + d.F*d.NCtrl + 1
	var weights [][]float64
	for f := 0; f < d.F; f++ {
		for _, tg := range man.Targets {
			row := make([]float64, nFeat)
			row[(d.H-1)*d.XCols+col[tg]] = 1
			weights = append(weights, row)
		}
	}
	js, _ := json.Marshal(map[string]any{"format": model.FormatLinearWindow, "history": d.H, "horizon": d.F,
		"xCols": d.XCols, "uCols": d.NCtrl, "yCols": d.YCols, "normalized": false, "weights": weights})
	pdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pdir, model.FileName), js, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := model.Load(pdir, man, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b, p
}

// TestConformalInjection calibrates a persistence model on a real built
// dataset (run-wise splits) and measures coverage on its test runs, then
// feeds the measured numbers to the twin gate.
func TestConformalInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a dataset")
	}
	ctx := context.Background()
	b, p := cfInjection(t)
	m, err := Evaluate(ctx, b, p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Calibrate(ctx, b, p, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	cov, err := c.MeasureCoverage(ctx, b, p)
	if err != nil {
		t.Fatal(err)
	}
	o, err := FitOOD(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("injection, persistence: %d val (calibration) windows, %d test windows; coverage target 0.90, measured on test %.4f (per target %.3f)",
		c.CalibrationWindows, cov.TestWindows, cov.Measured, cov.PerTarget)
	t.Logf("OOD: %s, p=%d, shrinkage %.3g, threshold %.3g; accepted val %.4f, test %.4f",
		o.Features, len(o.Mean), o.Shrinkage, o.Threshold, oodAcceptedShare(o, b, dataset.SplitVal), oodAcceptedShare(o, b, dataset.SplitTest))
	if math.Abs(cov.Measured-0.9) > 0.1 {
		t.Fatalf("measured coverage %v far from 0.9", cov.Measured)
	}
	r := TwinGate(TwinInputFromMeasurements(m, c, cov, nil, 0), DefaultTwinProfile())
	t.Logf("twin-v1: stage %s, reject codes %v", r.Stage, r.RejectCodes)
	if r.Passed {
		t.Fatal("a gate without trials passed")
	}
}
