package linear

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// arxTruth is a simulated MIMO ARX system in original units.
type arxTruth struct {
	o ARXOrders
	A []*mat.Dense // NA matrices ny×ny
	B []*mat.Dense // NB matrices ny×nu (B[0] at lag NK)
	c []float64
}

func (s arxTruth) simulate(u [][]float64, noise float64, r *rand.Rand) [][]float64 {
	ny := len(s.c)
	y := make([][]float64, len(u))
	for k := range y {
		row := make([]float64, ny)
		for o := 0; o < ny; o++ {
			v := s.c[o]
			for i, a := range s.A {
				if t := k - i - 1; t >= 0 {
					for q := 0; q < ny; q++ {
						v += a.At(o, q) * y[t][q]
					}
				}
			}
			for j, b := range s.B {
				if t := k - s.o.NK - j; t >= 0 {
					for q := range u[t] {
						v += b.At(o, q) * u[t][q]
					}
				}
			}
			if noise > 0 {
				v += noise * r.NormFloat64()
			}
			row[o] = v
		}
		y[k] = row
	}
	return y
}

// inputs with non-zero means and unequal scales, to exercise the scaling.
func testInputs(r *rand.Rand, T, nu int) [][]float64 {
	u := randn(r, T, nu)
	for k := range u {
		for i := range u[k] {
			u[k][i] = float64(i+1)*u[k][i] + 2 - float64(i)
		}
	}
	return u
}

func twoOutputTruth(nk int) arxTruth {
	return arxTruth{
		o: ARXOrders{NA: 2, NB: 2, NK: nk},
		A: []*mat.Dense{
			mat.NewDense(2, 2, []float64{0.5, 0.1, -0.2, 0.3}),
			mat.NewDense(2, 2, []float64{-0.1, 0.05, 0.0, 0.1}),
		},
		B: []*mat.Dense{
			mat.NewDense(2, 2, []float64{1, 0.5, 0.2, -0.7}),
			mat.NewDense(2, 2, []float64{0.3, 0, 0.1, 0.4}),
		},
		c: []float64{0.5, -1},
	}
}

func maxCoefErr(t *testing.T, m *ARX, truth arxTruth) float64 {
	t.Helper()
	A, B, c := m.Coefficients()
	e := 0.0
	for i := range truth.A {
		e = math.Max(e, maxMatDiff(A[i], truth.A[i]))
	}
	for j := range truth.B {
		e = math.Max(e, maxMatDiff(B[j], truth.B[j]))
	}
	for o := range c {
		e = math.Max(e, math.Abs(c[o]-truth.c[o]))
	}
	return e
}

func maxMatDiff(a, b mat.Matrix) float64 {
	r, c := a.Dims()
	e := 0.0
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			e = math.Max(e, math.Abs(a.At(i, j)-b.At(i, j)))
		}
	}
	return e
}

func TestARXRecoversTwoOutputNoiseFree(t *testing.T) {
	for _, nk := range []int{0, 1, 3} {
		r := rand.New(rand.NewPCG(7, uint64(nk)))
		truth := twoOutputTruth(nk)
		u := testInputs(r, 2000, 2)
		y := truth.simulate(u, 0, nil)
		for _, sc := range []Scaling{Standardize, CenterOnly, NoScaling} {
			m, err := FitARXOpts(y, u, truth.o, ARXOptions{Scaling: sc})
			if err != nil {
				t.Fatal(err)
			}
			if e := maxCoefErr(t, m, truth); e > 1e-8 {
				t.Errorf("nk=%d %v: max coefficient error %.3g > 1e-8", nk, sc, e)
			}
			// noise-free data: one-step and free run reproduce y exactly
			lag := truth.o.MaxLag()
			if d := maxAbsDiff(y, m.PredictOneStep(y, u), lag); d > 1e-8 {
				t.Errorf("nk=%d one-step error %.3g", nk, d)
			}
			if d := maxAbsDiff(y, m.Simulate(u, y[:lag]), lag); d > 1e-7 {
				t.Errorf("nk=%d free-run error %.3g", nk, d)
			}
		}
	}
}

func TestARXFeedthroughRecovered(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	truth := arxTruth{
		o: ARXOrders{NA: 1, NB: 2, NK: 0},
		A: []*mat.Dense{mat.NewDense(2, 2, []float64{0.6, 0.2, 0.1, -0.4})},
		B: []*mat.Dense{
			mat.NewDense(2, 3, []float64{2, 0, -1, 0.5, 1.5, 0}), // direct term u(k)
			mat.NewDense(2, 3, []float64{0.3, 0.2, 0.1, 0, -0.6, 0.2}),
		},
		c: []float64{0, 3},
	}
	u := testInputs(r, 1500, 3)
	y := truth.simulate(u, 0, nil)
	m, err := FitARX(y, u, truth.o, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := maxCoefErr(t, m, truth); e > 1e-8 {
		t.Fatalf("feed-through: max coefficient error %.3g", e)
	}
	_, B, _ := m.Coefficients()
	t.Logf("nk=0 direct term B0 = %v", mat.Formatted(B[0], mat.Squeeze()))
	// an nk=1 model cannot represent the direct term: clearly worse fit
	m1, err := FitARX(y, u, ARXOrders{NA: 1, NB: 2, NK: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := Mean(NRMSE(y, m1.PredictOneStep(y, u), 2)); e < 0.1 {
		t.Fatalf("nk=1 model unexpectedly fits a feed-through system (NRMSE %.3g)", e)
	}
}

func TestARXNoisyWithinTolerance(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	truth := twoOutputTruth(1)
	u := testInputs(r, 20000, 2)
	y := truth.simulate(u, 0.05, r) // equation-error noise: LS is consistent
	m, err := FitARX(y, u, truth.o, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := maxCoefErr(t, m, truth)
	t.Logf("noisy 2-output ARX (σ=0.05, T=20000): max coefficient error %.4f", e)
	if e > 0.01 {
		t.Fatalf("max coefficient error %.4f > 0.01", e)
	}
}

func TestARXDiagStructure(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	truth := arxTruth{
		o: ARXOrders{NA: 2, NB: 1, NK: 0, Diag: true},
		A: []*mat.Dense{
			mat.NewDense(2, 2, []float64{0.7, 0, 0, -0.3}),
			mat.NewDense(2, 2, []float64{-0.2, 0, 0, 0.1}),
		},
		B: []*mat.Dense{mat.NewDense(2, 2, []float64{1, 2, -1, 0.5})},
		c: []float64{1, 1},
	}
	u := testInputs(r, 1000, 2)
	y := truth.simulate(u, 0, nil)
	m, err := FitARX(y, u, truth.o, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.NumRegressors() != 2+2+1 {
		t.Fatalf("diag model has %d regressors per output, want 5", m.NumRegressors())
	}
	if e := maxCoefErr(t, m, truth); e > 1e-8 {
		t.Fatalf("diag: max coefficient error %.3g", e)
	}
}

func TestARXRidge(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	truth := twoOutputTruth(1)
	u := testInputs(r, 400, 2)
	y := truth.simulate(u, 0.1, r)
	o := truth.o
	prev := math.Inf(1)
	for _, lam := range []float64{0, 1, 100, 1e4, 1e7} {
		m, err := FitARX(y, u, o, lam)
		if err != nil {
			t.Fatal(err)
		}
		// The ridge solution satisfies (ΦᵀΦ + λP)θ = ΦᵀY, P = I without the intercept.
		ys := normalize(y, m.YMean, m.YStd)
		us := normalize(u, m.UMean, m.UStd)
		p := m.NumRegressors()
		phi := make([]float64, p)
		g := mat.NewDense(p, 2, nil)
		for k := o.MaxLag(); k < len(y); k++ {
			fillRegressor(phi, o, 2, 2, true, ys, us, k, 0)
			for out := 0; out < 2; out++ {
				e := -ys[k*2+out]
				for i := 0; i < p; i++ {
					e += phi[i] * m.Theta.At(i, out)
				}
				for i := 0; i < p; i++ {
					g.Set(i, out, g.At(i, out)+phi[i]*e)
				}
			}
		}
		for i := 0; i < p-1; i++ {
			for out := 0; out < 2; out++ {
				g.Set(i, out, g.At(i, out)+lam*m.Theta.At(i, out))
			}
		}
		if gn := mat.Norm(g, math.Inf(1)); gn > 1e-8*(1+lam) {
			t.Errorf("λ=%g: ridge normal equations residual %.3g", lam, gn)
		}
		n := mat.Norm(m.Theta.Slice(0, p-1, 0, 2), 2)
		if n > prev+1e-12 {
			t.Errorf("λ=%g: parameter norm %.4g grew (previous %.4g)", lam, n, prev)
		}
		prev = n
	}
	if prev > 1e-2 {
		t.Errorf("huge λ should shrink parameters to ~0, norm %.3g", prev)
	}
	if _, err := FitARX(y, u, o, -1); err == nil {
		t.Error("negative λ accepted")
	}
}

func TestARXPredictionConventions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	truth := twoOutputTruth(1)
	u := testInputs(r, 300, 2)
	y := truth.simulate(u, 0.01, r)
	m, err := FitARX(y, u, truth.o, 0)
	if err != nil {
		t.Fatal(err)
	}
	lag := m.Orders.MaxLag()
	p := m.PredictOneStep(y, u)
	for k := 0; k < len(p); k++ {
		for _, v := range p[k] {
			if (k < lag) != math.IsNaN(v) {
				t.Fatalf("row %d: NaN=%v, want NaN exactly for k < %d", k, math.IsNaN(v), lag)
			}
		}
	}
	s := m.Simulate(u, y[:5])
	for k := 0; k < 5; k++ {
		if s[k][0] != y[k][0] || s[k][1] != y[k][1] {
			t.Fatal("Simulate must return the given initial outputs unchanged")
		}
	}
	// fewer initial outputs than MaxLag: pre-sample values at the mean, still finite
	s0 := m.Simulate(u, nil)
	if math.IsNaN(s0[len(s0)-1][0]) {
		t.Fatal("Simulate without initial outputs returned NaN")
	}
	if _, err := FitARX(y[:3], u[:3], truth.o, 0); err == nil {
		t.Fatal("too short data accepted")
	}
	if _, err := FitARX(y, u[:10], truth.o, 0); err == nil {
		t.Fatal("length mismatch accepted")
	}
}

func TestSelectARX(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	truth := twoOutputTruth(1)
	u := testInputs(r, 3000, 2)
	y := truth.simulate(u, 0.02, r)
	var grid []ARXOrders
	for na := 1; na <= 3; na++ {
		for nk := 0; nk <= 2; nk++ {
			grid = append(grid, ARXOrders{NA: na, NB: 2, NK: nk})
		}
	}
	for _, crit := range []string{CriterionSimulation, CriterionOneStep} {
		best, scores, err := SelectARX(y[:2000], u[:2000], y[2000:], u[2000:], grid, []float64{0, 10}, crit)
		if err != nil {
			t.Fatal(err)
		}
		if len(scores) != 2*len(grid) {
			t.Fatalf("got %d scores, want %d", len(scores), 2*len(grid))
		}
		if best.Orders.NK != 1 || best.Orders.NA < 2 {
			t.Errorf("%s: selected %v, want nk=1, na≥2", crit, best.Orders)
		}
		t.Logf("%s: selected %v λ=%g", crit, best.Orders, best.Lambda)
	}
	if _, _, err := SelectARX(y, u, y, u, grid, nil, "bogus"); err == nil {
		t.Error("unknown criterion accepted")
	}
}

func TestMetrics(t *testing.T) {
	yt := [][]float64{{1, 10}, {2, 20}, {3, 30}, {4, 40}}
	yp := [][]float64{{100, 0}, {2, 21}, {4, 30}, {4, 41}}
	r := RMSE(yt, yp, 1)
	if math.Abs(r[0]-math.Sqrt(1.0/3)) > 1e-15 || math.Abs(r[1]-math.Sqrt(2.0/3)) > 1e-15 {
		t.Fatalf("RMSE %v", r)
	}
	n := NRMSE(yt, yp, 1)
	sd := math.Sqrt(2.0 / 3) // std of {2,3,4}
	if math.Abs(n[0]-r[0]/sd) > 1e-15 || math.Abs(n[1]-r[1]/(10*sd)) > 1e-15 {
		t.Fatalf("NRMSE %v", n)
	}
}

func TestARXRankDeficientFallsBackToMinimumNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	truth := arxTruth{
		o: ARXOrders{NA: 1, NB: 1, NK: 1},
		A: []*mat.Dense{mat.NewDense(1, 1, []float64{0.5})},
		B: []*mat.Dense{mat.NewDense(1, 2, []float64{1, 0})},
		c: []float64{0.2},
	}
	u := testInputs(r, 500, 2)
	for k := range u {
		u[k][1] = 3 // constant input: its regressor column is zero after centring
	}
	y := truth.simulate(u, 0, nil)
	m, err := FitARX(y, u, truth.o, 0)
	if err != nil {
		t.Fatal(err)
	}
	A, B, c := m.Coefficients()
	if math.Abs(A[0].At(0, 0)-0.5) > 1e-9 || math.Abs(B[0].At(0, 0)-1) > 1e-9 || B[0].At(0, 1) != 0 || math.Abs(c[0]-0.2) > 1e-9 {
		t.Fatalf("rank-deficient fit: A=%v B=%v c=%v", A[0].At(0, 0), mat.Formatted(B[0]), c)
	}
}
