package linear

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// shifted returns x with offset added to every entry.
func segShifted(x [][]float64, offset float64) [][]float64 {
	out := make([][]float64, len(x))
	for k, row := range x {
		out[k] = make([]float64, len(row))
		for i, v := range row {
			out[k][i] = v + offset
		}
	}
	return out
}

func segConcat(x [][][]float64) [][]float64 { return concatRows(x) }

func segSameDense(t *testing.T, what string, a, b *mat.Dense) {
	t.Helper()
	if !mat.Equal(a, b) {
		t.Fatalf("%s differs: max |Δ| = %.3g", what, maxMatDiff(a, b))
	}
}

func segSameSlice(t *testing.T, what string, a, b []float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: lengths %d and %d", what, len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("%s[%d]: %.17g vs %.17g", what, i, a[i], b[i])
		}
	}
}

// With one segment FitARXSegments is FitARXOpts, bit for bit.
func TestFitARXSegmentsOneSegmentIsFitARX(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	truth := twoOutputTruth(1)
	u := testInputs(r, 500, 2)
	y := truth.simulate(u, 0.1, r)
	for _, o := range []ARXOrders{{NA: 2, NB: 2, NK: 1}, {NA: 3, NB: 2, NK: 0, Diag: true}} {
		for _, opts := range []ARXOptions{{}, {Lambda: 5, NoIntercept: true}, {Scaling: CenterOnly}} {
			a, err := FitARXOpts(y, u, o, opts)
			if err != nil {
				t.Fatal(err)
			}
			b, err := FitARXSegments([][][]float64{y}, [][][]float64{u}, o, opts)
			if err != nil {
				t.Fatal(err)
			}
			segSameDense(t, "Theta", a.Theta, b.Theta)
			segSameSlice(t, "YStd", a.YStd, b.YStd)
			segSameSlice(t, "UMean", a.UMean, b.UMean)
			if a.TrainRows != b.TrainRows {
				t.Fatalf("rows %d vs %d", a.TrainRows, b.TrainRows)
			}
		}
	}
}

// threeARXRecords simulates three independent noise-free records with
// different input levels: their concatenation jumps at every boundary.
func threeARXRecords(truth arxTruth, noise float64, seed uint64) (ys, us [][][]float64) {
	r := rand.New(rand.NewPCG(seed, 99))
	for s, T := range []int{400, 250, 600} {
		u := segShifted(testInputs(r, T, 2), 3*float64(s)-2)
		ys = append(ys, truth.simulate(u, noise, r))
		us = append(us, u)
	}
	return ys, us
}

// Discontinuous segments: the parameters are recovered exactly from
// noise-free data only if no regressor crosses a boundary.
func TestFitARXSegmentsDiscontinuousExact(t *testing.T) {
	for _, nk := range []int{0, 1} {
		truth := twoOutputTruth(nk)
		ys, us := threeARXRecords(truth, 0, uint64(10+nk))
		for _, diag := range []bool{false, true} {
			o := truth.o
			o.Diag = diag
			if diag {
				// the truth has coupled A; a diag fit is only a smoke test
				if _, err := FitARXSegments(ys, us, o, ARXOptions{}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			m, err := FitARXSegments(ys, us, o, ARXOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if e := maxCoefErr(t, m, truth); e > 1e-9 {
				t.Errorf("nk=%d segmented fit: coefficient error %.3g", nk, e)
			}
			// the boundary-crossing fit of the concatenation is visibly wrong
			joined, err := FitARXOpts(segConcat(ys), segConcat(us), o, ARXOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if e := maxCoefErr(t, joined, truth); e < 1e-4 {
				t.Errorf("nk=%d: the joined record should not fit exactly (error %.3g); the test cannot detect boundary crossing", nk, e)
			} else {
				t.Logf("nk=%d: segmented error %.2g, joined (boundary-crossing) error %.2g", nk, maxCoefErr(t, m, truth), e)
			}
			if m.TrainRows != 400+250+600-3*o.MaxLag() {
				t.Errorf("train rows %d", m.TrainRows)
			}
		}
	}
}

// One long noisy record cut into three pieces gives nearly the parameters
// of the whole record (only the 2·MaxLag rows at the cuts are lost).
func TestFitARXSegmentsMatchesLongRecord(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	truth := twoOutputTruth(1)
	u := testInputs(r, 3000, 2)
	y := truth.simulate(u, 0.05, r)
	whole, err := FitARX(y, u, truth.o, 0)
	if err != nil {
		t.Fatal(err)
	}
	cuts := []int{0, 900, 2100, 3000}
	var ys, us [][][]float64
	for i := 0; i+1 < len(cuts); i++ {
		ys = append(ys, y[cuts[i]:cuts[i+1]])
		us = append(us, u[cuts[i]:cuts[i+1]])
	}
	seg, err := FitARXSegments(ys, us, truth.o, ARXOptions{})
	if err != nil {
		t.Fatal(err)
	}
	A1, B1, c1 := whole.Coefficients()
	A2, B2, c2 := seg.Coefficients()
	d := 0.0
	for i := range A1 {
		d = math.Max(d, maxMatDiff(A1[i], A2[i]))
	}
	for j := range B1 {
		d = math.Max(d, maxMatDiff(B1[j], B2[j]))
	}
	for o := range c1 {
		d = math.Max(d, math.Abs(c1[o]-c2[o]))
	}
	t.Logf("whole vs 3 segments: max coefficient difference %.3g (error vs truth: whole %.3g, segments %.3g)", d, maxCoefErr(t, whole, truth), maxCoefErr(t, seg, truth))
	if d > 5e-3 {
		t.Errorf("segmented fit differs from the whole-record fit by %.3g", d)
	}
}

// With one segment FitSubspaceSegments is FitSubspace, bit for bit
// (including the refinement and the x0 prior).
func TestFitSubspaceSegmentsOneSegmentIsFitSubspace(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, ft := range []bool{false, true} {
		sys := thirdOrder(ft)
		u := testInputs(r, 600, 2)
		y := sys.simulate(u, []float64{0.3, -0.2, 0.1}, 0.05, r)
		opts := SubspaceOptions{Order: 3, Feedthrough: ft, Refine: true, RefineIters: 10}
		a, err := FitSubspace(y, u, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := FitSubspaceSegments([][][]float64{y}, [][][]float64{u}, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			n    string
			x, y *mat.Dense
		}{{"A", a.A, b.A}, {"B", a.B, b.B}, {"C", a.C, b.C}, {"D", a.D, b.D}} {
			segSameDense(t, c.n, c.x, c.y)
		}
		segSameSlice(t, "X0Train", a.X0Train, b.X0Train)
		segSameSlice(t, "YMean", a.YMean, b.YMean)
		segSameSlice(t, "XMean", a.XMean, b.XMean)
		segSameSlice(t, "NoiseVar", a.NoiseVar, b.NoiseVar)
		if !mat.EqualApprox(a.XCov, b.XCov, 0) || a.RefineIters != b.RefineIters || a.TrainMSE != b.TrainMSE || a.BlockRows != b.BlockRows {
			t.Fatalf("diagnostics differ: %d/%d LM steps, MSE %g/%g, i %d/%d", a.RefineIters, b.RefineIters, a.TrainMSE, b.TrainMSE, a.BlockRows, b.BlockRows)
		}
		// and the selection over one validation segment
		s1, sc1, err := SelectStateSpace(y[:400], u[:400], y[400:], u[400:], []int{2, 3, 4}, SubspaceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s2, sc2, err := SelectStateSpaceSegments([][][]float64{y[:400]}, [][][]float64{u[:400]}, [][][]float64{y[400:]}, [][][]float64{u[400:]}, []int{2, 3, 4}, SubspaceOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		segSameDense(t, "selected A", s1.A, s2.A)
		for i := range sc1 {
			if sc1[i].Value != sc2[i].Value {
				t.Fatalf("score %d: %v vs %v", i, sc1[i], sc2[i])
			}
		}
	}
}

// threeSSRecords simulates three noise-free records of sys, each from its
// own (large) initial state and with its own input level.
func threeSSRecords(sys ssTruth, seed uint64) (ys, us, x0s [][][]float64) {
	r := rand.New(rand.NewPCG(seed, 7))
	for s, T := range []int{500, 300, 700} {
		u := segShifted(testInputs(r, T, 2), 2*float64(s)-1.5)
		x0 := []float64{5 * r.NormFloat64(), 5 * r.NormFloat64(), 5 * r.NormFloat64()}
		ys = append(ys, sys.simulate(u, x0, 0, nil))
		us = append(us, u)
		x0s = append(x0s, [][]float64{x0})
	}
	return ys, us, x0s
}

// Discontinuous segments (different initial states and input levels):
// noise-free data give the exact poles and an exact simulation of every
// segment only if neither the Hankel columns nor the simulation cross a
// boundary.
func TestFitSubspaceSegmentsDiscontinuousExact(t *testing.T) {
	for _, ft := range []bool{false, true} {
		sys := thirdOrder(ft)
		truePoles := eigenvalues(sys.A)
		ys, us, _ := threeSSRecords(sys, 11)
		for _, refine := range []bool{false, true} {
			opts := SubspaceOptions{Order: 3, BlockRows: 10, Feedthrough: ft, Refine: refine}
			m, err := FitSubspaceSegments(ys, us, opts)
			if err != nil {
				t.Fatal(err)
			}
			if e := poleError(m.Poles(), truePoles); e > 1e-8 {
				t.Errorf("ft=%v refine=%v: pole error %.3g", ft, refine, e)
			}
			if m.TrainMSE > 1e-16 {
				t.Errorf("ft=%v refine=%v: training simulation MSE %.3g, want ~0 (each segment from its own x0)", ft, refine, m.TrainMSE)
			}
			for s := range ys {
				// the initial state from 10 samples (plain least squares)
				// reproduces the whole segment
				x0 := m.EstimateX0LS(ys[s], us[s], 10)
				if e := maxAbsDiff(ys[s], m.Simulate(us[s], x0), 0); e > 1e-6 {
					t.Errorf("ft=%v refine=%v segment %d: simulation error %.3g", ft, refine, s, e)
				}
			}
		}
		joined, err := FitSubspace(segConcat(ys), segConcat(us), SubspaceOptions{Order: 3, BlockRows: 10, Feedthrough: ft})
		if err != nil {
			t.Fatal(err)
		}
		e := poleError(joined.Poles(), truePoles)
		t.Logf("ft=%v: joined (boundary-crossing) record pole error %.3g", ft, e)
		if e < 1e-5 {
			t.Errorf("ft=%v: the joined record should not give exact poles (%.3g); the test cannot detect boundary crossing", ft, e)
		}
	}
}

// A long noisy record cut into three pieces gives nearly the model of the
// whole record.
func TestFitSubspaceSegmentsMatchesLongRecord(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	sys := thirdOrder(false)
	u := testInputs(r, 3000, 2)
	y := sys.simulate(u, []float64{0.3, -0.2, 0.1}, 0.05, r)
	opts := SubspaceOptions{Order: 3, BlockRows: 10, Refine: true}
	whole, err := FitSubspace(y, u, opts)
	if err != nil {
		t.Fatal(err)
	}
	cuts := []int{0, 1000, 1800, 3000}
	var ys, us [][][]float64
	for i := 0; i+1 < len(cuts); i++ {
		ys = append(ys, y[cuts[i]:cuts[i+1]])
		us = append(us, u[cuts[i]:cuts[i+1]])
	}
	seg, err := FitSubspaceSegments(ys, us, opts)
	if err != nil {
		t.Fatal(err)
	}
	pe := poleError(whole.Poles(), seg.Poles())
	// compare the input-output behaviour: simulate a fresh input
	u2 := testInputs(r, 500, 2)
	d := maxAbsDiff(whole.Simulate(u2, nil), seg.Simulate(u2, nil), 50)
	t.Logf("whole vs 3 segments: pole difference %.3g, max simulated output difference %.3g (true poles error whole %.3g, segments %.3g)",
		pe, d, poleError(whole.Poles(), eigenvalues(sys.A)), poleError(seg.Poles(), eigenvalues(sys.A)))
	if !seg.Refined || seg.RefineIters == 0 || seg.TrainMSE > seg.TrainMSEInit {
		t.Errorf("multi-segment refinement: refined %v, %d steps, MSE %.4g → %.4g", seg.Refined, seg.RefineIters, seg.TrainMSEInit, seg.TrainMSE)
	}
	if pe > 5e-3 || d > 0.02 {
		t.Errorf("segmented model differs from the whole-record model: poles %.3g, outputs %.3g", pe, d)
	}
}

func TestSelectSegments(t *testing.T) {
	truth := twoOutputTruth(1)
	ys, us := threeARXRecords(truth, 0.02, 21)
	yv, uv := threeARXRecords(truth, 0.02, 22)
	var grid []ARXOrders
	for n := 1; n <= 4; n++ {
		grid = append(grid, ARXOrders{NA: n, NB: n, NK: 1})
	}
	for _, crit := range []string{CriterionSimulation, CriterionOneStep} {
		best, scores, err := SelectARXSegments(ys, us, yv, uv, grid, []float64{0, 10}, crit, ARXOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(scores) != 8 || best.Orders.NA < 2 {
			t.Errorf("%s: chose %v (%d scores)", crit, best.Orders, len(scores))
		}
		if scores[0].Start != 4 {
			t.Errorf("start %d", scores[0].Start)
		}
	}
	// a validation set whose segments are all too short is an error
	short := [][][]float64{yv[0][:3]}
	if _, _, err := SelectARXSegments(ys, us, short, [][][]float64{uv[0][:3]}, grid, nil, "", ARXOptions{}, nil); err == nil {
		t.Error("no usable validation segment accepted")
	}

	sys := thirdOrder(false)
	r := rand.New(rand.NewPCG(1, 1))
	var sy, su, vy, vu [][][]float64
	for s := 0; s < 4; s++ {
		u := segShifted(testInputs(r, 400, 2), float64(s))
		y := sys.simulate(u, []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}, 0.02, r)
		if s < 3 {
			sy, su = append(sy, y), append(su, u)
		} else {
			vy, vu = append(vy, y[:200], y[200:]), append(vu, u[:200], u[200:])
		}
	}
	m, scores, err := SelectStateSpaceSegments(sy, su, vy, vu, []int{1, 2, 3, 4, 5}, SubspaceOptions{Refine: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scores {
		t.Logf("  %v", s)
	}
	if m.N != 3 && m.N != 4 {
		t.Errorf("selected order %d, want 3", m.N)
	}
}

// Segments too short for the Hankel step still enter the B/D/x0 step.
func TestFitSubspaceSegmentsShortSegments(t *testing.T) {
	sys := thirdOrder(false)
	ys, us, _ := threeSSRecords(sys, 4)
	ys = append(ys, ys[1][:7])
	us = append(us, us[1][:7])
	m, err := FitSubspaceSegments(ys, us, SubspaceOptions{Order: 3, BlockRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	if e := poleError(m.Poles(), eigenvalues(sys.A)); e > 1e-8 {
		t.Errorf("pole error %.3g", e)
	}
	// too little data in total
	if _, err := FitSubspaceSegments([][][]float64{ys[0][:20], ys[1][:20]}, [][][]float64{us[0][:20], us[1][:20]}, SubspaceOptions{Order: 3, BlockRows: 10}); err == nil {
		t.Error("BlockRows 10 accepted for two 20-sample segments")
	}
	if _, err := FitSubspaceSegments(nil, nil, SubspaceOptions{}); err == nil {
		t.Error("no segments accepted")
	}
	if _, err := FitARXSegments([][][]float64{ys[0]}, [][][]float64{us[0][:10]}, ARXOrders{NA: 1, NB: 1, NK: 1}, ARXOptions{}); err == nil {
		t.Error("mismatched segment lengths accepted")
	}
}

// Restore rebuilds models from their exported fields exactly.
func TestRestore(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	truth := twoOutputTruth(0)
	u := testInputs(r, 400, 2)
	y := truth.simulate(u, 0.1, r)
	a, err := FitARXOpts(y, u, ARXOrders{NA: 2, NB: 3, NK: 0}, ARXOptions{Lambda: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := &ARX{Orders: a.Orders, Theta: mat.DenseCopyOf(a.Theta), NY: a.NY, NU: a.NU, YMean: a.YMean, YStd: a.YStd, UMean: a.UMean, UStd: a.UStd, Intercept: a.Intercept}
	if err := b.Restore(); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(a.Simulate(u, y[:3]), b.Simulate(u, y[:3]), 0); d != 0 {
		t.Fatalf("restored ARX simulates differently (%.3g)", d)
	}
	b.Intercept = !b.Intercept
	if err := b.Restore(); err == nil {
		t.Error("wrong Theta size accepted")
	}

	sys := thirdOrder(true)
	y2 := sys.simulate(u, []float64{1, 0, 0}, 0.05, r)
	s, err := FitSubspace(y2, u, SubspaceOptions{Order: 3, Feedthrough: true, Refine: true})
	if err != nil {
		t.Fatal(err)
	}
	c := &StateSpace{A: mat.DenseCopyOf(s.A), B: mat.DenseCopyOf(s.B), C: mat.DenseCopyOf(s.C), D: mat.DenseCopyOf(s.D), N: s.N, NY: s.NY, NU: s.NU,
		YMean: s.YMean, YStd: s.YStd, UMean: s.UMean, UStd: s.UStd, XMean: s.XMean, XCov: s.XCov, NoiseVar: s.NoiseVar}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(s.SimulateFrom(y2, u, 5), c.SimulateFrom(y2, u, 5), 0); d != 0 {
		t.Fatalf("restored state space simulates differently (%.3g)", d)
	}
	c.B = mat.NewDense(2, 2, nil)
	if err := c.Restore(); err == nil {
		t.Error("wrong B shape accepted")
	}
}

// The projected B/D/x0 problem of several segments equals the dense one.
func TestFitBDX0ProjectedMatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	for _, ft := range []bool{false, true} {
		sys := thirdOrder(ft)
		var ys, us [][][]float64
		for s, T := range []int{300, 120, 400, 60} {
			u := segShifted(testInputs(r, T, 2), float64(s))
			ys = append(ys, sys.simulate(u, []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}, 0.05, r))
			us = append(us, u)
		}
		d, err := prepareSegments(ys, us, Standardize)
		if err != nil {
			t.Fatal(err)
		}
		res, err := poMOESP(d, 10, true)
		if err != nil {
			t.Fatal(err)
		}
		a, c, err := acFromGamma(res, d.ny, 3)
		if err != nil {
			t.Fatal(err)
		}
		af, cf := flat(a), flat(c)
		b1, d1, x1, e1, err := fitBDX0SegmentsDense(af, cf, 3, d, ft, true)
		if err != nil {
			t.Fatal(err)
		}
		b2, d2, x2, e2, err := fitBDX0Projected(af, cf, 3, d, ft, true)
		if err != nil {
			t.Fatal(err)
		}
		diff := 0.0
		for _, p := range [][2][]float64{{b1, b2}, {d1, d2}, {e1, e2}, {x1[0], x2[0]}, {x1[1], x2[1]}, {x1[2], x2[2]}, {x1[3], x2[3]}} {
			for i := range p[0] {
				diff = math.Max(diff, math.Abs(p[0][i]-p[1][i]))
			}
		}
		if diff > 1e-8 {
			t.Errorf("ft=%v: projected and dense solutions differ by %.3g", ft, diff)
		}
	}
}

// Many segments: the cost grows linearly (structured solves).
func TestFitSubspaceManySegments(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 7))
	sys := thirdOrder(false)
	var ys, us [][][]float64
	for s := 0; s < 150; s++ {
		u := testInputs(r, 40+s%30, 2)
		ys = append(ys, sys.simulate(u, []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}, 0.02, r))
		us = append(us, u)
	}
	m, err := FitSubspaceSegments(ys, us, SubspaceOptions{Order: 3, BlockRows: 6, Refine: true, RefineIters: 10})
	if err != nil {
		t.Fatal(err)
	}
	if e := poleError(m.Poles(), eigenvalues(sys.A)); e > 0.01 {
		t.Errorf("150 short segments: pole error %.3g", e)
	}
	t.Logf("150 segments: pole error %.2g, %d LM steps, MSE %.3g → %.3g", poleError(m.Poles(), eigenvalues(sys.A)), m.RefineIters, m.TrainMSEInit, m.TrainMSE)
}
