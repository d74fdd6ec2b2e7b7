package static

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// svdPath is the ridge path as it was computed before the shared solver:
// the thin SVD of the centred n×q design itself.
func svdPath(t *testing.T, pp *polyPath, X, Y [][]float64) *polyPath {
	t.Helper()
	q := len(pp.terms) - 1
	D := designRows(X, pp.in, pp.terms, pp.maxDeg)
	Phi := mat.NewDense(len(X), q, nil)
	for i := range X {
		for j := 0; j < q; j++ {
			Phi.Set(i, j, D.At(i, j+1)-pp.colMu[j])
		}
	}
	Ys := mat.NewDense(len(Y), len(Y[0]), nil)
	for i := range Y {
		Ys.SetRow(i, pp.out.apply(Y[i], nil))
	}
	var svd mat.SVD
	if !svd.Factorize(Phi, mat.SVDThin) {
		t.Fatal("SVD failed")
	}
	ref := *pp
	ref.s = svd.Values(nil)
	var U mat.Dense
	svd.UTo(&U)
	ref.v = new(mat.Dense)
	svd.VTo(ref.v)
	ref.uty = new(mat.Dense)
	ref.uty.Mul(U.T(), Ys)
	return &ref
}

// TestPolyPathQRMatchesSVD: the ridge path through the QR of [Φc Y] gives
// the coefficients of the direct SVD of Φc for every λ, also for a
// rank-deficient design (a duplicated input) and for fewer rows than terms.
func TestPolyPathQRMatchesSVD(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, tc := range []struct {
		n, d, deg int
		dup       bool
	}{{5000, 3, 3, false}, {300, 4, 2, true}, {8, 3, 2, false}} {
		X := make([][]float64, tc.n)
		Y := make([][]float64, tc.n)
		for i := range X {
			x := make([]float64, tc.d)
			for j := range x {
				x[j] = r.NormFloat64()
			}
			if tc.dup {
				x[tc.d-1] = x[0]
			}
			X[i] = x
			Y[i] = []float64{math.Sin(x[0]) + x[1]*x[1] + 0.1*r.NormFloat64(), x[0] - x[2] + 0.05*r.NormFloat64()}
		}
		terms, err := Terms(tc.d, tc.deg, true)
		if err != nil {
			t.Fatal(err)
		}
		pp, err := newPolyPath(X, Y, terms)
		if err != nil {
			t.Fatal(err)
		}
		ref := svdPath(t, pp, X, Y)
		for _, lambda := range []float64{0, 1e-3, 1, 100} {
			got, want := pp.coef(lambda), ref.coef(lambda)
			for o := range want {
				num, den := 0.0, 0.0
				for j := range want[o] {
					num += (got[o][j] - want[o][j]) * (got[o][j] - want[o][j])
					den += want[o][j] * want[o][j]
				}
				if e := math.Sqrt(num / den); !(e <= 1e-9) {
					t.Errorf("n %d, d %d, degree %d, dup %v, λ %g, output %d: relative coefficient difference %.3g", tc.n, tc.d, tc.deg, tc.dup, lambda, o, e)
				}
			}
		}
	}
}
