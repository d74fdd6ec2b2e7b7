package linear

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// delayedARX simulates the 3-input, 1-output ARX
//
//	y(k) = 0.6 y(k−1) − 0.2 y(k−2) + Σ_a Σ_{j<2} b_{a,j} u_a(k−nk_a−j) + 0.5
//
// with nk = [1, 1, 0] and returns the truth coefficients b[a][j].
func delayedARX(r *rand.Rand, T int, noise float64) (y, u [][]float64, nks []int, b [][]float64) {
	nks = []int{1, 1, 0}
	b = [][]float64{{0.8, 0.3}, {-0.5, 0.2}, {0.7, -0.4}}
	u = testInputs(r, T, 3)
	y = make([][]float64, T)
	for k := range y {
		v := 0.5
		if k >= 1 {
			v += 0.6 * y[k-1][0]
		}
		if k >= 2 {
			v -= 0.2 * y[k-2][0]
		}
		for a := range nks {
			for j := range b[a] {
				if t := k - nks[a] - j; t >= 0 {
					v += b[a][j] * u[t][a]
				}
			}
		}
		y[k] = []float64{v + noise*r.NormFloat64()}
	}
	return y, u, nks, b
}

func TestPerInputDelaysRecovered(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	y, u, nks, b := delayedARX(r, 3000, 0.02)
	ys, us := [][][]float64{y}, [][][]float64{u}
	est, scores, err := EstimateDelays(ys, us, 2, 2, 0, 4, ARXOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scores {
		t.Logf("input %d nk %d one-step NRMSE %.4f", s.Input, s.NK, s.Value)
	}
	if !slices.Equal(est, nks) {
		t.Fatalf("estimated delays %v, truth %v", est, nks)
	}
	m, err := FitARXSegments(ys, us, ARXOrders{NA: 2, NB: 2, NKs: est}, ARXOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Orders.MaxLag(); got != 2 {
		t.Errorf("MaxLag %d, want 2", got)
	}
	A, B, c := m.Coefficients()
	if math.Abs(A[0].At(0, 0)-0.6) > 0.01 || math.Abs(A[1].At(0, 0)+0.2) > 0.01 || math.Abs(c[0]-0.5) > 0.05 {
		t.Errorf("A %v %v c %v", A[0].At(0, 0), A[1].At(0, 0), c)
	}
	// B[j] multiplies u(k−j) (the smallest delay is 0)
	for a := range b {
		for j := 0; j < 3; j++ {
			want := 0.0
			if i := j - nks[a]; i >= 0 && i < len(b[a]) {
				want = b[a][i]
			}
			if got := B[j].At(0, a); math.Abs(got-want) > 0.01 {
				t.Errorf("b[input %d][lag %d] = %.4f, want %.4f", a, j, got, want)
			}
		}
	}
	// the one-step prediction reproduces the simulation to the noise level
	pred := m.PredictOneStep(y, u)
	if n := Mean(NRMSE(y, pred, 2)); n > 0.05 {
		t.Errorf("one-step NRMSE %.4f", n)
	}
}

// Equal per-input lists are the scalar orders: same regressor layout,
// same parameters, same predictions.
func TestPerInputEqualListsAreScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	y, u, _, _ := delayedARX(r, 500, 0.05)
	a, err := FitARX(y, u, ARXOrders{NA: 2, NB: 3, NK: 1}, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FitARXOpts(y, u, ARXOrders{NA: 2, NBs: []int{3, 3, 3}, NKs: []int{1, 1, 1}}, ARXOptions{Lambda: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxMatDiff(a.Theta, b.Theta); d != 0 {
		t.Errorf("theta differs by %g", d)
	}
	if d := maxAbsDiff(a.Simulate(u, y[:3]), b.Simulate(u, y[:3]), 0); d != 0 {
		t.Errorf("simulation differs by %g", d)
	}
	if _, err := FitARX(y, u, ARXOrders{NA: 2, NB: 2, NKs: []int{1, 0}}, 0); err == nil || !strings.Contains(err.Error(), "per-input nk") {
		t.Errorf("a list of the wrong length: %v", err)
	}
}

func TestSelectARXCVPerInputAndSkips(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	y, u, nks, _ := delayedARX(r, 300, 0.02)
	var grid []ARXOrders
	for n := 1; n <= 40; n += 3 {
		grid = append(grid, ARXOrders{NA: n, NB: n, NKs: nks})
	}
	best, scores, err := SelectARXCV([][][]float64{y}, [][][]float64{u}, grid, nil, "", ARXOptions{}, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, s := range scores {
		t.Log(s)
		if s.Skipped != "" {
			skipped++
		}
	}
	if skipped == 0 || skipped == len(scores) {
		t.Errorf("%d of %d candidates skipped", skipped, len(scores))
	}
	if best.Orders.NA < 2 {
		t.Errorf("chose %v", best.Orders)
	}
}

// fourthOrder is a 1-input, 1-output system with poles 0.9·e^{±0.3i} and
// 0.7·e^{±1.1i}.
func fourthOrder() ssTruth {
	blk := func(r, w float64) []float64 {
		return []float64{r * math.Cos(w), -r * math.Sin(w), r * math.Sin(w), r * math.Cos(w)}
	}
	b1, b2 := blk(0.9, 0.3), blk(0.7, 1.1)
	a := mat.NewDense(4, 4, []float64{
		b1[0], b1[1], 0, 0,
		b1[2], b1[3], 0, 0,
		0, 0, b2[0], b2[1],
		0, 0, b2[2], b2[3]})
	return ssTruth{A: a, B: mat.NewDense(4, 1, []float64{1, 0.5, 1, -0.3}), C: mat.NewDense(1, 4, []float64{0.6, 0.2, 0.5, 0.4}), D: mat.NewDense(1, 1, nil)}
}

// Block cross-validation on the estimation record alone picks the true
// order of a simulated 4th-order system more often than not.
func TestSelectStateSpaceCVPicksTrueOrder(t *testing.T) {
	sys := fourthOrder()
	hits, holdHits, runs := 0, 0, 10
	for seed := range uint64(runs) {
		r := rand.New(rand.NewPCG(100+seed, 7))
		u := testInputs(r, 800, 1)
		y := sys.simulate(u, nil, 0.02, r)
		best, scores, err := SelectStateSpaceCV([][][]float64{y}, [][][]float64{u}, []int{1, 2, 3, 4, 5, 6, 7, 8}, SubspaceOptions{}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var line []string
		for _, s := range scores {
			line = append(line, fmt.Sprintf("%d:%.4f", s.Order, s.Value))
		}
		// for comparison: the hold-out of the last 25 %
		hv, _, err := SelectStateSpace(y[:600], u[:600], y[600:], u[600:], []int{1, 2, 3, 4, 5, 6, 7, 8}, SubspaceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: CV chose %d, hold-out %d; CV scores %s", seed, best.N, hv.N, strings.Join(line, " "))
		if best.N == 4 {
			hits++
		}
		if hv.N == 4 {
			holdHits++
		}
	}
	t.Logf("true order chosen in %d of %d records (hold-out of the last 25%%: %d)", hits, runs, holdHits)
	if 2*hits <= runs {
		t.Errorf("true order chosen in %d of %d records", hits, runs)
	}
}

// A short record with a grid up to order 10 shrinks the grid instead of
// failing; orders the data cannot support are reported as skipped.
func TestSelectStateSpaceShortRecordShrinks(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	sys := fourthOrder()
	u := testInputs(r, 120, 1)
	y := sys.simulate(u, nil, 0.02, r)
	orders := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	// today's val path on 90 + 30 samples with 4 inputs: one would fail
	u4 := make([][]float64, len(u))
	for k := range u {
		u4[k] = []float64{u[k][0], r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
	}
	for _, c := range []struct {
		name string
		run  func() (*StateSpace, []Score, error)
	}{
		{"cv", func() (*StateSpace, []Score, error) {
			return SelectStateSpaceCV([][][]float64{y}, [][][]float64{u4}, orders, SubspaceOptions{}, 5, nil)
		}},
		{"val", func() (*StateSpace, []Score, error) {
			return SelectStateSpaceSegments([][][]float64{y[:90]}, [][][]float64{u4[:90]}, [][][]float64{y[90:]}, [][][]float64{u4[90:]}, orders, SubspaceOptions{}, nil)
		}},
	} {
		best, scores, err := c.run()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		skipped := 0
		for _, s := range scores {
			if s.Skipped != "" {
				skipped++
				t.Logf("%s: order %d skipped: %s", c.name, s.Order, s.Skipped)
			}
		}
		if len(scores) != len(orders) || skipped == 0 || best.N > 10-skipped {
			t.Errorf("%s: %d scores, %d skipped, chose %d", c.name, len(scores), skipped, best.N)
		}
	}
	if _, _, err := SelectStateSpaceCV([][][]float64{y[:30]}, [][][]float64{u4[:30]}, orders, SubspaceOptions{}, 5, nil); err == nil {
		t.Error("30 samples: no error")
	}
}
