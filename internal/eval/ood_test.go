package eval

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// oodBundle is an in-memory dynamic bundle with history H over cols
// columns (the last one the target) and horizon 1, whose windows'
// histories are correlated Gaussian: column j of window w at step h is
// scale_j·(Σ_i L_ji g_i) + offset_j + 0.2·scale_j·noise, with g a
// window-level N(0, I) factor, so columns differ in scale by 10⁴.
func oodBundle(t *testing.T, H, cols, train, val, test int, seed uint64) *dataset.Bundle {
	t.Helper()
	all := make([]string, cols)
	for j := range all {
		all[j] = "c" + string(rune('a'+j))
	}
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindDynamic, Purpose: dataset.PurposeMPCSurrogate,
		AllNodes: all, Targets: all[cols-1:], HistorySteps: H, HorizonSteps: 1, Stride: 1, BeatMs: 1000,
		Split: dataset.ManifestSplit{
			Train: dataset.SplitPart{RunIDs: []string{"r1"}, Offset: 0, Count: train},
			Val:   dataset.SplitPart{RunIDs: []string{"r2"}, Offset: train, Count: val},
			Test:  dataset.SplitPart{RunIDs: []string{"r3"}, Offset: train + val, Count: test}}}
	d := m.Dims()
	b := &dataset.Bundle{Manifest: m,
		X: make([]float32, d.N*d.XLen()), U: make([]float32, d.N*d.ULen()), Y: make([]float32, d.N*d.YLen()),
		TS: make([]float64, d.N*(H+1)), Mask: make([]float32, d.N*(H+1))}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	g := make([]float64, cols)
	for w := 0; w < d.N; w++ {
		x, _, _ := b.Window(w)
		for i := range g {
			g[i] = rng.NormFloat64()
		}
		for j := 0; j < cols; j++ {
			sc, off := oodScale(j), 10*float64(j)
			f := g[j]
			if j > 0 {
				f = 0.8*g[j-1] + 0.6*g[j] // correlated with the previous column
			}
			for h := 0; h < H; h++ {
				x[h*cols+j] = float32(sc*(f+0.2*rng.NormFloat64()) + off)
			}
		}
	}
	return b
}

func oodScale(j int) float64 { return math.Pow(10, float64(j%5)-2) }

func oodAcceptedShare(o *OOD, b *dataset.Bundle, split string) float64 {
	lo, hi := b.Split(split)
	n := 0
	for w := lo; w < hi; w++ {
		x, _, _ := b.Window(w)
		if _, ok := o.Check(x); ok {
			n++
		}
	}
	return float64(n) / float64(hi-lo)
}

func TestOODEnvelope(t *testing.T) {
	b := oodBundle(t, 6, 4, 4000, 10, 4000, 1)
	o, err := FitOOD(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if o.Quantile != DefaultOODQuantile || o.Features != OODFeaturesMeanLast || len(o.Mean) != 8 || o.Windows != 4000 {
		t.Fatalf("envelope %+v", o)
	}
	if !(o.Shrinkage >= 0 && o.Shrinkage <= 1) || !(o.Threshold > 0) || !finite(o.Threshold) {
		t.Fatalf("shrinkage %v threshold %v", o.Shrinkage, o.Threshold)
	}
	train := oodAcceptedShare(o, b, dataset.SplitTrain)
	fresh := oodAcceptedShare(o, b, dataset.SplitTest)
	t.Logf("p=%d shrinkage %.4g threshold %.4g; accepted: train %.4f, fresh same-distribution windows %.4f", len(o.Mean), o.Shrinkage, o.Threshold, train, fresh)
	if train < o.Quantile || train > o.Quantile+0.002 {
		t.Fatalf("train acceptance %v, quantile %v", train, o.Quantile)
	}
	if fresh < 0.98 {
		t.Fatalf("fresh in-distribution acceptance %v", fresh)
	}
	// Train distances are spread, never all 0; E[d²] ≈ p for Gaussian data.
	lo, hi := b.Split(dataset.SplitTrain)
	var sum2 float64
	for w := lo; w < hi; w++ {
		x, _, _ := b.Window(w)
		dd := o.Distance(x)
		if !(dd > 0) {
			t.Fatalf("window %d distance %v", w, dd)
		}
		sum2 += dd * dd
	}
	if m := sum2 / float64(hi-lo); m < 0.5*8 || m > 1.5*8 {
		t.Fatalf("mean squared distance %v, p = 8", m)
	}
	// A window shifted by 10 std of every column is far outside.
	x0, _, _ := b.Window(lo)
	d0 := o.Distance(x0)
	shifted := append([]float32(nil), x0...)
	for h := 0; h < 6; h++ {
		for j := 0; j < 4; j++ {
			shifted[h*4+j] += float32(10 * oodColumnStd(b, j))
		}
	}
	ds, ok := o.Check(shifted)
	t.Logf("distance: train window %.4g, shifted by 10 std %.4g, threshold %.4g", d0, ds, o.Threshold)
	if ok || !(ds > 3*o.Threshold) {
		t.Fatalf("shifted window: distance %v accepted %v (threshold %v)", ds, ok, o.Threshold)
	}
	// Shifting a single column along a direction the training data never
	// varies in (against the correlation) is caught as well.
	one := append([]float32(nil), x0...)
	for h := 0; h < 6; h++ {
		one[h*4+1] += float32(4 * oodColumnStd(b, 1))
		one[h*4+0] -= float32(4 * oodColumnStd(b, 0))
	}
	if d, ok := o.Check(one); ok {
		t.Fatalf("anti-correlated shift accepted: %v ≤ %v", d, o.Threshold)
	}
	// Wrong length and non-finite inputs are never accepted.
	if d, ok := o.Check(x0[:5]); ok || !math.IsNaN(d) {
		t.Fatalf("short window: %v %v", d, ok)
	}
	bad := append([]float32(nil), x0...)
	bad[3] = float32(math.NaN())
	if d, ok := o.Check(bad); ok || !math.IsNaN(d) {
		t.Fatalf("NaN window: %v %v", d, ok)
	}
	// A custom quantile moves the threshold.
	o9, err := FitOOD(b, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if !(o9.Threshold < o.Threshold) {
		t.Fatalf("0.9 threshold %v ≥ 0.995 threshold %v", o9.Threshold, o.Threshold)
	}
	if s := oodAcceptedShare(o9, b, dataset.SplitTrain); math.Abs(s-0.9) > 0.001 {
		t.Fatalf("0.9 acceptance %v", s)
	}
}

// oodColumnStd is column j's std over the train windows' values.
func oodColumnStd(b *dataset.Bundle, j int) float64 {
	d := b.Dims()
	lo, hi := b.Split(dataset.SplitTrain)
	var s, s2, n float64
	for w := lo; w < hi; w++ {
		x, _, _ := b.Window(w)
		for h := 0; h < d.H; h++ {
			v := float64(x[h*d.XCols+j])
			s += v
			s2 += v * v
			n++
		}
	}
	m := s / n
	return math.Sqrt(s2/n - m*m)
}

func TestOODConstantColumnAndFewWindows(t *testing.T) {
	b := oodBundle(t, 3, 4, 500, 5, 5, 2)
	d := b.Dims()
	for w := 0; w < d.N; w++ {
		x, _, _ := b.Window(w)
		for h := 0; h < d.H; h++ {
			x[h*d.XCols+2] = 5 // constant column: singular sample covariance
		}
	}
	o, err := FitOOD(b, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	if !(o.Shrinkage > 0 && o.Shrinkage <= 1) || !finite(o.Threshold) {
		t.Fatalf("shrinkage %v threshold %v", o.Shrinkage, o.Threshold)
	}
	if s := oodAcceptedShare(o, b, dataset.SplitTrain); s < 0.99 || s > 0.995 {
		t.Fatalf("train acceptance %v", s)
	}
	x0, _, _ := b.Window(0)
	moved := append([]float32(nil), x0...)
	for h := 0; h < d.H; h++ {
		moved[h*d.XCols+2] = 6
	}
	if dd, ok := o.Check(moved); ok || !finite(dd) {
		t.Fatalf("a constant column that moved: distance %v accepted %v", dd, ok)
	}
	// More features than windows (p = 2·16 = 32 > 20 windows).
	few := oodBundle(t, 2, 16, 20, 1, 1, 3)
	of, err := FitOOD(few, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if !(of.Shrinkage > 0 && of.Shrinkage <= 1) || !finite(of.Threshold) || !(of.Threshold > 0) {
		t.Fatalf("p > n: shrinkage %v threshold %v", of.Shrinkage, of.Threshold)
	}
	// Every column constant: Σ = I, still usable.
	flat := oodBundle(t, 2, 2, 30, 1, 1, 4)
	for i := range flat.X {
		flat.X[i] = 1
	}
	ofl, err := FitOOD(flat, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	xf, _, _ := flat.Window(0)
	if dd, ok := ofl.Check(xf); !ok || dd != 0 {
		t.Fatalf("flat: %v %v", dd, ok)
	}
	xf2 := append([]float32(nil), xf...)
	xf2[0] = 2
	if dd, ok := ofl.Check(xf2); ok || !(dd > 0) {
		t.Fatalf("flat moved: %v %v", dd, ok)
	}
}

func TestOODStaticAndRejects(t *testing.T) {
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindStatic, Purpose: dataset.PurposeStaticResponse,
		AllNodes: []string{"a", "b", "y"}, Inputs: []string{"a", "b"}, Targets: []string{"y"},
		Split: dataset.ManifestSplit{
			Train: dataset.SplitPart{RunIDs: []string{"r1"}, Offset: 0, Count: 300},
			Val:   dataset.SplitPart{RunIDs: []string{"r2"}, Offset: 300, Count: 1},
			Test:  dataset.SplitPart{RunIDs: []string{"r3"}, Offset: 301, Count: 1}}}
	d := m.Dims()
	b := &dataset.Bundle{Manifest: m, X: make([]float32, d.N*d.XLen()), Y: make([]float32, d.N), TS: make([]float64, d.N)}
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range b.X {
		b.X[i] = float32(rng.NormFloat64())
	}
	o, err := FitOOD(b, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if o.Features != OODFeaturesRow || len(o.Mean) != 2 {
		t.Fatalf("static features %s %d", o.Features, len(o.Mean))
	}
	if _, ok := o.Check([]float32{30, 0}); ok {
		t.Fatal("a row 30 std away accepted")
	}
	// H = 1: the row, not mean and last (which coincide).
	h1 := oodBundle(t, 1, 3, 100, 1, 1, 6)
	if o1, err := FitOOD(h1, 0.9); err != nil || o1.Features != OODFeaturesRow || len(o1.Mean) != 3 {
		t.Fatalf("H=1: %v %+v", err, o1)
	}
	small := oodBundle(t, 2, 2, 19, 1, 1, 7)
	if _, err := FitOOD(small, 0.9); core.CodeOf(err) != core.CodeInvalidArgument || !strings.Contains(err.Error(), "at least 20") {
		t.Fatalf("19 train windows: %v", err)
	}
	for _, q := range []float64{-1, 1, 2, math.NaN()} {
		if _, err := FitOOD(h1, q); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("quantile %v: %v", q, err)
		}
	}
	h1.X[0] = float32(math.Inf(1))
	if _, err := FitOOD(h1, 0.9); core.CodeOf(err) != core.CodeDatasetTampered {
		t.Fatalf("non-finite train input: %v", err)
	}
}

func TestOODSubsample(t *testing.T) {
	b := oodBundle(t, 1, 2, MaxOODFitWindows+5000, 1, 1, 8)
	o, err := FitOOD(b, 0.995)
	if err != nil {
		t.Fatal(err)
	}
	if o.Windows != MaxOODFitWindows {
		t.Fatalf("fitted on %d windows", o.Windows)
	}
	if s := oodAcceptedShare(o, b, dataset.SplitTrain); math.Abs(s-0.995) > 0.002 {
		t.Fatalf("acceptance over every train window %v", s)
	}
}

func TestLedoitWolfFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	n, p := 15, 6
	x := make([][]float64, n)
	mean := make([]float64, p)
	for i := range x {
		x[i] = make([]float64, p)
		for j := range x[i] {
			x[i][j] = rng.NormFloat64() * float64(j+1)
			if j == 3 {
				x[i][j] = 0.5*x[i][0] + 0.1*rng.NormFloat64()
			}
			mean[j] += x[i][j] / float64(n)
		}
	}
	for i := range x {
		for j := range x[i] {
			x[i][j] -= mean[j]
		}
	}
	got, delta := ledoitWolf(x)
	// Naive: S, μ, d², b̄² = Σ_i ‖x_i x_iᵀ − S‖² / (n² p).
	S := make([][]float64, p)
	for j := range S {
		S[j] = make([]float64, p)
		for k := range S[j] {
			for i := 0; i < n; i++ {
				S[j][k] += x[i][j] * x[i][k] / float64(n)
			}
		}
	}
	mu := 0.0
	for j := 0; j < p; j++ {
		mu += S[j][j] / float64(p)
	}
	d2, b2 := 0.0, 0.0
	for j := 0; j < p; j++ {
		for k := 0; k < p; k++ {
			v := S[j][k]
			if j == k {
				v -= mu
			}
			d2 += v * v / float64(p)
		}
	}
	for i := 0; i < n; i++ {
		s := 0.0
		for j := 0; j < p; j++ {
			for k := 0; k < p; k++ {
				v := x[i][j]*x[i][k] - S[j][k]
				s += v * v
			}
		}
		b2 += s / float64(n*n*p)
	}
	want := math.Min(b2, d2) / d2
	if math.Abs(delta-want) > 1e-12 || !(delta > 0 && delta < 1) {
		t.Fatalf("δ = %v, want %v", delta, want)
	}
	for j := 0; j < p; j++ {
		for k := 0; k < p; k++ {
			w := (1 - want) * S[j][k]
			if j == k {
				w += want * mu
			}
			if math.Abs(got[j][k]-w) > 1e-12*math.Max(1, math.Abs(w)) {
				t.Fatalf("Σ[%d][%d] = %v, want %v", j, k, got[j][k], w)
			}
		}
	}
	inv, ok := invertSPD(got)
	if !ok {
		t.Fatal("not positive definite")
	}
	for i := 0; i < p; i++ {
		for j := 0; j < p; j++ {
			s := 0.0
			for k := 0; k < p; k++ {
				s += got[i][k] * inv[k][j]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(s-want) > 1e-9 {
				t.Fatalf("Σ·Σ⁻¹[%d][%d] = %v", i, j, s)
			}
		}
	}
	if _, ok := invertSPD([][]float64{{1, 2}, {2, 1}}); ok {
		t.Fatal("indefinite matrix inverted")
	}
}
