package polynomial

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// ARMAX is the model of one output
//
//	A(q) y(k) = Σ_i B_i(q) u_i(k − nk_i) + d + C(q) e(k),
//	A = 1 + a_1 q⁻¹ + … + a_na q⁻ⁿᵃ,  C = 1 + c_1 q⁻¹ + … + c_nc q⁻ⁿᶜ,
//
// whose noise is filtered by C/A: ARX (C = 1) leaves the moving-average
// part in its residuals, which are then not white and bias its fit
// (TestARMAXWhiteResiduals). [FitARMAX] minimises the one-step prediction
// errors
//
//	ε(k) = y(k) + Σ a_j y(k−j) − Σ b u − d − Σ c_j ε(k−j)
//
// (ε = 0 before each segment's first n rows) with the Levenberg–Marquardt
// solver from the least-squares ARX start and C = 1, rejecting steps that
// make C non-minimum-phase (a root of C on or outside the unit circle: the
// predictor would not be stable); the covariance is σ² (JᵀJ)⁻¹.
type ARMAX struct {
	NA, NB, NC int
	NK         []int
	A, C       []float64
	B          [][]float64
	D          float64
	// Cov is the covariance of (a, b row-major, c, d), Sigma2 the
	// variance of the prediction errors, Cost their final and ARXCost
	// their starting sum of squares.
	Cov           *mat.SymDense
	Sigma2        float64
	Cost, ARXCost float64
	Iterations    int
}

func (m *ARMAX) maxLag() int {
	n := max(m.NA, m.NC)
	for _, k := range m.NK {
		n = max(n, k+m.NB-1)
	}
	return max(n, 1)
}

// PredictOneStep returns the one-step-ahead predictions ŷ(k|k−1) of the
// record (NaN for its first n rows, which only start the predictor).
func (m *ARMAX) PredictOneStep(y []float64, u [][]float64) []float64 {
	e := armaxResiduals(m.NA, m.NB, m.NC, m.NK, m.A, m.B, m.C, m.D, y, u)
	out := make([]float64, len(y))
	n := m.maxLag()
	for k := range out {
		out[k] = math.NaN()
		if k >= n {
			out[k] = y[k] - e[k]
		}
	}
	return out
}

// armaxResiduals are the prediction errors over the record (0 before row n).
func armaxResiduals(na, nb, nc int, nk []int, a []float64, b [][]float64, c []float64, d float64, y []float64, u [][]float64) []float64 {
	n := max(na, nc)
	for _, k := range nk {
		n = max(n, k+nb-1)
	}
	n = max(n, 1)
	e := make([]float64, len(y))
	for k := n; k < len(y); k++ {
		s := y[k] - d
		for j := 1; j <= na; j++ {
			s += a[j-1] * y[k-j]
		}
		for i := range b {
			for l := 0; l < nb; l++ {
				s -= b[i][l] * u[k-nk[i]-l][i]
			}
		}
		for j := 1; j <= nc; j++ {
			s -= c[j-1] * e[k-j]
		}
		e[k] = s
	}
	return e
}

// FitARMAX fits an ARMAX model of one output to the segments (y
// [seg][T], u [seg][T][inputs]).
func FitARMAX(ctx context.Context, y [][]float64, u [][][]float64, na, nb, nc int, nk []int) (*ARMAX, error) {
	if len(y) == 0 || len(y) != len(u) {
		return nil, errors.New("polynomial: give as many output as input segments, at least one")
	}
	nu := len(u[0][0])
	if len(nk) != nu || na < 1 || nb < 1 || nc < 1 {
		return nil, fmt.Errorf("polynomial: ARMAX orders na %d ≥ 1, nb %d ≥ 1, nc %d ≥ 1 and one delay per input (%d for %d inputs)", na, nb, nc, len(nk), nu)
	}
	m0 := &ARMAX{NA: na, NB: nb, NC: nc, NK: nk}
	n := m0.maxLag()
	rows := make([]int, len(y))
	for s := range y {
		if len(y[s]) != len(u[s]) || len(y[s]) <= n+1 {
			return nil, fmt.Errorf("polynomial: segment %d has %d rows, needs more than %d", s, len(y[s]), n+1)
		}
		rows[s] = len(y[s]) - n
	}
	// the ARX start: f = a, b, c = 0, d = the ARX intercept
	oe, err := arxStart(y, u, OEOrders{NF: na, NB: nb, NK: nk})
	if err != nil {
		return nil, err
	}
	np := na + nu*nb + nc + 1
	th0 := make([]float64, np)
	copy(th0, oe[:na+nu*nb])
	f1 := 1.0
	for j := 0; j < na; j++ {
		f1 += oe[j]
	}
	th0[np-1] = oe[len(oe)-1] * f1 // OE offset c → ARX intercept d = c·A(1)
	unpack := func(th []float64) (a []float64, b [][]float64, c []float64, d float64) {
		a = th[:na]
		for i := 0; i < nu; i++ {
			b = append(b, th[na+i*nb:na+(i+1)*nb])
		}
		return a, b, th[na+nu*nb : na+nu*nb+nc], th[np-1]
	}
	resid := func(blk int, th []float64, r []float64) {
		a, b, c, d := unpack(th)
		e := armaxResiduals(na, nb, nc, nk, a, b, c, d, y[blk], u[blk])
		copy(r, e[n:])
	}
	valid := func(th []float64) bool { _, _, c, _ := unpack(th); return spectralRadius(c) < 1 }
	p := pemProblem(rows, np, valid, resid)
	res, err := solvePEM(ctx, p, th0)
	if err != nil {
		return nil, fmt.Errorf("polynomial: ARMAX fit: %w", err)
	}
	a, b, c, d := unpack(res.Shared)
	m := &ARMAX{NA: na, NB: nb, NC: nc, NK: nk, A: append([]float64(nil), a...), C: append([]float64(nil), c...), D: d,
		Cost: res.Cost, ARXCost: res.InitialCost, Iterations: res.Iterations}
	for _, row := range b {
		m.B = append(m.B, append([]float64(nil), row...))
	}
	m.Sigma2, m.Cov = covariance(p, res)
	return m, nil
}
