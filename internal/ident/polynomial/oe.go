// Package polynomial fits input–output polynomial models by
// prediction-error minimisation: output-error ([FitOE], below), ARMAX
// ([FitARMAX], armax.go) and Box–Jenkins ([FitBJ], bj.go) models of one
// output, and predicts them k steps ahead (predict.go). The output-error
// model is
//
//	y(k) = Σ_i B_i(q)/F(q) u_i(k − nk_i) + c + e(k),
//	F(q) = 1 + f_1 q⁻¹ + … + f_nf q⁻ⁿᶠ,   B_i(q) = b_i0 + … + b_i(nb−1) q⁻⁽ⁿᵇ⁻¹⁾,
//
// with one denominator shared by the inputs (a common pole set, as a
// process whose inputs act through the same dynamics) and white e: the
// noise enters at the output, not through the dynamics. ARX — which
// assumes the noise is filtered by 1/A — is biased on such a process
// (least squares on regressors that contain past noisy outputs); OE
// minimises the simulation error itself and is not (TestOEBeatsARX).
//
// # Fit
//
// [FitOE] starts from the least-squares ARX fit of the same orders
// (internal/ident/linear.FitARXOpts) and minimises Σ_segments Σ_k (y(k) −
// ŷ(k))², ŷ the model simulated from the segment's first n = max(nf,
// maxLag) measured outputs, with the Levenberg–Marquardt solver of
// internal/ident/lm (θ = f, b, c shared by the segments; forward-difference
// Jacobian, a few parameters over thousands of samples). A trial whose
// denominator is unstable (a root of F on or outside the unit circle) is
// rejected, so the fit stays stable. The parameter covariance is σ²
// (JᵀJ)⁻¹ at the optimum, σ² the residual variance.
package polynomial

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/aml-project/aml/internal/ident/linear"
	"github.com/aml-project/aml/internal/ident/lm"
)

// OEOrders are the orders of an output-error model: nf poles, nb numerator
// coefficients per input and a delay per input (len(NK) = inputs).
type OEOrders struct {
	NF, NB int
	NK     []int
}

// OE is a fitted output-error model of one output.
type OE struct {
	Orders OEOrders
	F      []float64   // f_1 … f_nf
	B      [][]float64 // [input][nb]
	C      float64     // output offset
	// Cov is the covariance of (f, b row-major, c), Sigma2 the residual
	// variance, Cost the final sum of squared simulation errors and
	// ARXCost the ARX start's.
	Cov            *mat.SymDense
	Sigma2         float64
	Cost, ARXCost  float64
	Iterations     int
	SpectralRadius float64
}

func (o OEOrders) maxLag() int {
	m := o.NF
	for _, k := range o.NK {
		m = max(m, k+o.NB-1)
	}
	return max(m, 1)
}

func (o OEOrders) nParams(nu int) int { return o.NF + nu*o.NB + 1 }

// Simulate returns the model's output over u ([T][inputs]) started from
// the first n measured outputs y0 (the model's own past is set to y0 − c
// there; earlier inputs are held at u[0]).
func (m *OE) Simulate(u [][]float64, y0 []float64) []float64 {
	return simulate(m.Orders, m.F, m.B, m.C, u, y0)
}

func simulate(o OEOrders, f []float64, b [][]float64, c float64, u [][]float64, y0 []float64) []float64 {
	T := len(u)
	w := make([]float64, T)
	n := min(len(y0), T)
	for k := 0; k < n; k++ {
		w[k] = y0[k] - c
	}
	at := func(i, k int) float64 {
		if k < 0 {
			k = 0
		}
		return u[k][i]
	}
	for k := n; k < T; k++ {
		s := 0.0
		for j := 1; j <= o.NF; j++ {
			if k-j >= 0 {
				s -= f[j-1] * w[k-j]
			} else {
				s -= f[j-1] * w[0]
			}
		}
		for i := range b {
			for l := 0; l < o.NB; l++ {
				s += b[i][l] * at(i, k-o.NK[i]-l)
			}
		}
		w[k] = s
	}
	out := make([]float64, T)
	for k := range out {
		out[k] = w[k] + c
	}
	return out
}

// FitOE fits an output-error model to the segments (y [seg][T] one
// output, u [seg][T][inputs]).
func FitOE(ctx context.Context, y [][]float64, u [][][]float64, o OEOrders) (*OE, error) {
	if len(y) == 0 || len(y) != len(u) {
		return nil, errors.New("polynomial: give as many output as input segments, at least one")
	}
	nu := len(u[0][0])
	if len(o.NK) != nu || o.NF < 1 || o.NB < 1 {
		return nil, fmt.Errorf("polynomial: orders nf %d ≥ 1, nb %d ≥ 1 and one delay per input (%d for %d inputs)", o.NF, o.NB, len(o.NK), nu)
	}
	n := o.maxLag()
	rows := make([]int, len(y))
	for s := range y {
		if len(y[s]) != len(u[s]) || len(y[s]) <= n+1 {
			return nil, fmt.Errorf("polynomial: segment %d has %d rows, needs more than %d", s, len(y[s]), n+1)
		}
		rows[s] = len(y[s]) - n
	}
	// start: ARX(na = nf, nb, nk) least squares, one output
	th0, err := arxStart(y, u, o)
	if err != nil {
		return nil, err
	}
	np := o.nParams(nu)
	unpack := func(th []float64) ([]float64, [][]float64, float64) {
		f := th[:o.NF]
		b := make([][]float64, nu)
		for i := range b {
			b[i] = th[o.NF+i*o.NB : o.NF+(i+1)*o.NB]
		}
		return f, b, th[np-1]
	}
	resid := func(r [][]float64, th []float64) bool {
		f, b, c := unpack(th)
		if spectralRadius(f) >= 1 {
			return false
		}
		for s := range y {
			sim := simulate(o, f, b, c, u[s], y[s][:n])
			for k := n; k < len(y[s]); k++ {
				r[s][k-n] = sim[k] - y[s][k]
			}
		}
		return true
	}
	local := make([]int, len(y))
	p := lm.Problem{Shared: np, Local: local, Rows: rows,
		Residuals: func(r [][]float64, shared []float64, _ [][]float64) bool { return resid(r, shared) },
		Jacobian: func(js, _ *mat.Dense, blk int, shared, _, r []float64) {
			th := append([]float64(nil), shared...)
			f, b, c := unpack(th)
			base := simulate(o, f, b, c, u[blk], y[blk][:n])
			for j := 0; j < np; j++ {
				h := 1e-6 * math.Max(1, math.Abs(th[j]))
				th[j] += h
				f, b, c := unpack(th)
				sim := simulate(o, f, b, c, u[blk], y[blk][:n])
				for k := n; k < len(y[blk]); k++ {
					js.Set(k-n, j, (sim[k]-base[k])/h)
				}
				th[j] = shared[j]
			}
		}}
	if spectralRadius(th0[:o.NF]) >= 1 {
		th0 = stableStart(th0, o.NF)
	}
	set := lm.DefaultSettings()
	set.MaxIterations = 60
	res, err := lm.Solve(ctx, p, th0, make([][]float64, len(y)), &set)
	if err != nil {
		return nil, fmt.Errorf("polynomial: OE fit: %w", err)
	}
	f, b, c := unpack(res.Shared)
	m := &OE{Orders: o, F: append([]float64(nil), f...), C: c, Cost: res.Cost, ARXCost: res.InitialCost, Iterations: res.Iterations, SpectralRadius: spectralRadius(f)}
	for i := range b {
		m.B = append(m.B, append([]float64(nil), b[i]...))
	}
	m.Sigma2, m.Cov = covariance(p, res)
	return m, nil
}

// covariance is the residual variance σ² = cost/(N − parameters) of a
// solve of p without local parameters and the parameters' covariance
// σ² (JᵀJ)⁻¹ at its optimum (nil when JᵀJ is singular).
func covariance(p lm.Problem, res *lm.Result) (float64, *mat.SymDense) {
	np, N := p.Shared, 0
	for _, r := range p.Rows {
		N += r
	}
	sigma2 := res.Cost / float64(max(1, N-np))
	jtj := mat.NewSymDense(np, nil)
	for s, rows := range p.Rows {
		js := mat.NewDense(rows, np, nil)
		p.Jacobian(js, nil, s, res.Shared, nil, nil)
		var t mat.SymDense
		t.SymOuterK(1, js.T())
		jtj.AddSym(jtj, &t)
	}
	var ch mat.Cholesky
	if !ch.Factorize(jtj) {
		return sigma2, nil
	}
	var inv mat.SymDense
	if ch.InverseTo(&inv) != nil {
		return sigma2, nil
	}
	inv.ScaleSym(sigma2, &inv)
	return sigma2, &inv
}

// arxStart is the least-squares ARX(nf, nb, nk) fit of one output as an OE
// parameter vector (f = a, b, c).
func arxStart(y [][]float64, u [][][]float64, o OEOrders) ([]float64, error) {
	nk := o.NK[0]
	for _, k := range o.NK {
		nk = min(nk, k)
	}
	ys := make([][][]float64, len(y))
	for s := range y {
		ys[s] = make([][]float64, len(y[s]))
		for k, v := range y[s] {
			ys[s][k] = []float64{v}
		}
	}
	// the ARX start with the smallest delay and nb extended to cover every
	// input's delay; the coefficients are then shifted per input
	nbA := o.NB
	for _, k := range o.NK {
		nbA = max(nbA, k-nk+o.NB)
	}
	yy, uu := ys[0], u[0]
	for s := 1; s < len(ys); s++ { // one record for the start (segments joined: a start, not the fit)
		yy, uu = append(append([][]float64{}, yy...), ys[s]...), append(append([][]float64{}, uu...), u[s]...)
	}
	a, err := linear.FitARXOpts(yy, uu, linear.ARXOrders{NA: o.NF, NB: nbA, NK: nk}, linear.ARXOptions{})
	if err != nil {
		return nil, fmt.Errorf("polynomial: ARX start: %w", err)
	}
	A, B, c := a.Coefficients()
	nu := len(u[0][0])
	th := make([]float64, o.nParams(nu))
	for j := 0; j < o.NF; j++ {
		th[j] = A[j].At(0, 0) // y(k) = −Σ a_j y(k−j) … in AML's sign: A multiplies y(k−j) on the right-hand side
	}
	// AML's ARX: y(k) = Σ A_i y(k−i) + Σ B_j u(k−nk−j) + c, so f = −A
	for j := range th[:o.NF] {
		th[j] = -th[j]
	}
	for i := 0; i < nu; i++ {
		shift := o.NK[i] - nk
		for l := 0; l < o.NB; l++ {
			th[o.NF+i*o.NB+l] = B[shift+l].At(0, i)
		}
	}
	// c: the ARX intercept is c·F(1) in OE terms
	f1 := 1.0
	for j := 0; j < o.NF; j++ {
		f1 += th[j]
	}
	if len(c) > 0 && math.Abs(f1) > 1e-9 {
		th[len(th)-1] = c[0] / f1
	}
	return th, nil
}

// stableStart shrinks f toward 0 until F is stable.
func stableStart(th []float64, nf int) []float64 {
	for s := 0.9; s > 0.01; s *= 0.9 {
		f := make([]float64, nf)
		for j := range f {
			f[j] = th[j] * math.Pow(s, float64(j+1))
		}
		if spectralRadius(f) < 1 {
			copy(th, f)
			return th
		}
	}
	for j := 0; j < nf; j++ {
		th[j] = 0
	}
	return th
}

// Poles are the roots of z^nf + f_1 z^(nf−1) + … + f_nf: the poles of
// the model (stable when all are inside the unit circle).
func (m *OE) Poles() []complex128 { return poles(m.F) }

func poles(f []float64) []complex128 {
	n := len(f)
	if n == 0 {
		return nil
	}
	comp := mat.NewDense(n, n, nil)
	for j := 0; j < n; j++ {
		comp.Set(0, j, -f[j])
	}
	for i := 1; i < n; i++ {
		comp.Set(i, i-1, 1)
	}
	var e mat.Eigen
	if !e.Factorize(comp, mat.EigenNone) {
		return []complex128{complex(math.Inf(1), 0)}
	}
	return e.Values(nil)
}

// spectralRadius is the largest root modulus of z^nf + f_1 z^(nf−1) + … +
// f_nf (the poles of 1/F).
func spectralRadius(f []float64) float64 {
	r := 0.0
	for _, v := range poles(f) {
		r = math.Max(r, math.Hypot(real(v), imag(v)))
	}
	return r
}
