package static

import (
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/ident/lsq"
	"gonum.org/v1/gonum/mat"
)

// scaler holds per-column means and standard deviations.
type scaler struct {
	mean, std []float64
}

// newScaler computes column means and population standard deviations
// (divisor n). A column whose std is zero or not finite gets std 1, so a
// constant input standardises to 0 and a constant output is fitted exactly.
func newScaler(rows [][]float64) scaler {
	n := len(rows)
	d := len(rows[0])
	s := scaler{mean: make([]float64, d), std: make([]float64, d)}
	for j := 0; j < d; j++ {
		m := 0.0
		for i := 0; i < n; i++ {
			m += rows[i][j]
		}
		m /= float64(n)
		v := 0.0
		for i := 0; i < n; i++ {
			e := rows[i][j] - m
			v += e * e
		}
		sd := math.Sqrt(v / float64(n))
		if !(sd > 0) || math.IsInf(sd, 0) || sd < 1e-12*math.Max(1, math.Abs(m)) {
			sd = 1
		}
		s.mean[j], s.std[j] = m, sd
	}
	return s
}

func (s scaler) apply(row []float64, dst []float64) []float64 {
	if dst == nil {
		dst = make([]float64, len(row))
	}
	for j, v := range row {
		dst[j] = (v - s.mean[j]) / s.std[j]
	}
	return dst
}

// polyPath is a polynomial design on one training set, factorised once so
// that the ridge solution for any λ is cheap.
//
// With Φ the n×q matrix of the non-intercept terms (standardised inputs),
// Φc its column-centred version and y the standardised (hence centred)
// output, the ridge problem with an unpenalised intercept
//
//	min_{c0,β} ‖y − c0 − Φβ‖² + λ‖β‖²
//
// has c0 = −mean(Φ)·β and β = (ΦcᵀΦc + λI)⁻¹Φcᵀy. With the thin SVD
// Φc = U S Vᵀ this is β = V diag(s/(s²+λ)) Uᵀy, so one SVD per design serves
// every λ. λ = 0 gives the least-squares (minimum-norm, for a rank-deficient
// design) solution, with singular values below s_max·max(n,q)·ε dropped.
type polyPath struct {
	terms  [][]int
	maxDeg int
	in     scaler
	out    scaler
	colMu  []float64 // mean of each non-intercept term column
	v      *mat.Dense
	s      []float64
	uty    *mat.Dense // r × m
	tol    float64
}

func designRows(X [][]float64, in scaler, terms [][]int, maxDeg int) *mat.Dense {
	n, d := len(X), len(X[0])
	p := len(terms)
	D := mat.NewDense(n, p, nil)
	z := make([]float64, d)
	pw := make([]float64, d*(maxDeg+1))
	for i := 0; i < n; i++ {
		in.apply(X[i], z)
		evalTerms(D.RawRowView(i), terms, z, maxDeg, pw)
	}
	return D
}

func newPolyPath(X, Y [][]float64, terms [][]int) (*polyPath, error) {
	n := len(X)
	m := len(Y[0])
	pp := &polyPath{terms: terms, maxDeg: maxDegree(terms), in: newScaler(X), out: newScaler(Y)}
	q := len(terms) - 1
	pp.colMu = make([]float64, q)
	if q == 0 {
		return pp, nil
	}
	D := designRows(X, pp.in, terms, pp.maxDeg)
	Phi := mat.NewDense(n, q, nil)
	for j := 0; j < q; j++ {
		mu := 0.0
		for i := 0; i < n; i++ {
			mu += D.At(i, j+1)
		}
		mu /= float64(n)
		pp.colMu[j] = mu
		for i := 0; i < n; i++ {
			Phi.Set(i, j, D.At(i, j+1)-mu)
		}
	}
	Ys := mat.NewDense(n, m, nil)
	z := make([]float64, m)
	for i := 0; i < n; i++ {
		pp.out.apply(Y[i], z)
		Ys.SetRow(i, z)
	}
	// Φc = Q·R11 and QᵀY = R12 from the shared least-squares solver's
	// tall-skinny QR of [Φc Y]; then the SVD of the q×q R11 = U_R S Vᵀ
	// gives Φc's singular values and V, and Uᵀy = U_Rᵀ R12 (U = Q U_R).
	// Fewer rows than terms: the SVD of Φc itself.
	var svd mat.SVD
	a, rhs := mat.Matrix(Phi), mat.Matrix(Ys)
	if n >= q {
		R := lsq.Factor(Phi, Ys)
		rm := mat.NewDense(q+m, q+m, R)
		a, rhs = rm.Slice(0, q, 0, q), rm.Slice(0, q, q, q+m)
	}
	if !svd.Factorize(a, mat.SVDThin) {
		return nil, fmt.Errorf("static: SVD of the %d×%d design did not converge", n, q)
	}
	pp.s = svd.Values(nil)
	var U mat.Dense
	svd.UTo(&U)
	pp.v = new(mat.Dense)
	svd.VTo(pp.v)
	pp.uty = new(mat.Dense)
	pp.uty.Mul(U.T(), rhs)
	smax := 0.0
	if len(pp.s) > 0 {
		smax = pp.s[0]
	}
	pp.tol = smax * float64(max(n, q)) * 2.220446049250313e-16
	return pp, nil
}

// coef returns, per output, the coefficients of every term (intercept
// first) in standardised units for penalty lambda.
func (pp *polyPath) coef(lambda float64) [][]float64 {
	m := len(pp.out.mean)
	p := len(pp.terms)
	q := p - 1
	out := make([][]float64, m)
	for o := range out {
		out[o] = make([]float64, p)
	}
	if q == 0 {
		return out
	}
	r := len(pp.s)
	w := make([]float64, r)
	for k, s := range pp.s {
		switch {
		case s <= pp.tol:
			w[k] = 0
		default:
			w[k] = s / (s*s + lambda)
		}
	}
	for o := 0; o < m; o++ {
		c := out[o]
		for j := 0; j < q; j++ {
			b := 0.0
			for k := 0; k < r; k++ {
				b += pp.v.At(j, k) * w[k] * pp.uty.At(k, o)
			}
			c[j+1] = b
			c[0] -= b * pp.colMu[j]
		}
	}
	return out
}

// polyPredict evaluates a polynomial with standardised-unit coefficients
// coef (per output) and returns predictions in original units.
func polyPredict(X [][]float64, in, out scaler, terms [][]int, coef [][]float64) [][]float64 {
	d := len(in.mean)
	maxDeg := maxDegree(terms)
	z := make([]float64, d)
	pw := make([]float64, d*(maxDeg+1))
	phi := make([]float64, len(terms))
	res := make([][]float64, len(X))
	for i, x := range X {
		in.apply(x, z)
		evalTerms(phi, terms, z, maxDeg, pw)
		row := make([]float64, len(coef))
		for o, c := range coef {
			v := 0.0
			for t, ct := range c {
				v += ct * phi[t]
			}
			row[o] = out.mean[o] + out.std[o]*v
		}
		res[i] = row
	}
	return res
}
