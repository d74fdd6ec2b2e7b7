package linear

import (
	"fmt"
	"math"
	"math/cmplx"

	"gonum.org/v1/gonum/mat"
)

// StateSpace is a discrete-time linear state-space model
//
//	x(k+1) = A x(k) + B ũ(k),   ỹ(k) = C x(k) + D ũ(k)
//
// in the scaled coordinates ũ = (u−UMean)/UStd, ỹ = (y−YMean)/YStd. D is
// zero unless the model was fitted with Feedthrough. Simulate and EstimateX0
// take and return signals in the original units; states are in the model's
// own (scaled) coordinates.
type StateSpace struct {
	A, B, C, D *mat.Dense
	N, NY, NU  int

	// Operating point and scales: ũ = (u−UMean)/UStd, y = YMean + YStd·ỹ.
	// UMean and YStd are training statistics; YMean is the training mean
	// plus the estimated output offset (OutputOffset, scaled units).
	YMean, YStd, UMean, UStd []float64
	Scaling                  Scaling
	OutputOffset             []float64

	// Diagnostics of the fit.
	BlockRows      int       // block rows i used by the subspace step
	SingularValues []float64 // singular values of the projected data (order selection)
	X0Train        []float64 // estimated initial state of the training record
	Stabilized     bool      // stability enforcement changed A
	Refined        bool      // prediction-error refinement was run
	RefineIters    int       // accepted LM steps
	TrainMSEInit   float64   // training simulation MSE (scaled units) before refinement
	TrainMSE       float64   // training simulation MSE (scaled units) of the final model

	// Gaussian prior for initial-state estimation, from the simulated
	// training states (see EstimateX0). Nil before the fit is complete.
	XMean    []float64
	XCov     *mat.SymDense
	NoiseVar []float64 // per-output training simulation error variance (scaled)

	// flat row-major copies used in the inner loops
	a, b, c, d []float64
}

// sync refreshes the flat copies after A, B, C or D changed.
func (m *StateSpace) sync() {
	m.a = flat(m.A)
	m.b = flat(m.B)
	m.c = flat(m.C)
	m.d = flat(m.D)
}

func flat(x *mat.Dense) []float64 {
	r, c := x.Dims()
	out := make([]float64, r*c)
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			out[i*c+j] = x.At(i, j)
		}
	}
	return out
}

// newStateSpace builds a model from flat parameter slices.
func newStateSpace(n, ny, nu int, a, b, c, d []float64) *StateSpace {
	m := &StateSpace{N: n, NY: ny, NU: nu}
	m.A = mat.NewDense(n, n, append([]float64(nil), a...))
	m.B = mat.NewDense(n, nu, append([]float64(nil), b...))
	m.C = mat.NewDense(ny, n, append([]float64(nil), c...))
	if d == nil {
		d = make([]float64, ny*nu)
	}
	m.D = mat.NewDense(ny, nu, append([]float64(nil), d...))
	m.sync()
	return m
}

// Poles returns the eigenvalues of A.
func (m *StateSpace) Poles() []complex128 {
	return eigenvalues(m.A)
}

// SpectralRadius returns max |eig(A)|.
func (m *StateSpace) SpectralRadius() float64 {
	return spectralRadius(m.A)
}

func eigenvalues(a *mat.Dense) []complex128 {
	var e mat.Eigen
	if !e.Factorize(a, mat.EigenNone) {
		r, _ := a.Dims()
		out := make([]complex128, r)
		for i := range out {
			out[i] = cmplx.Inf()
		}
		return out
	}
	return e.Values(nil)
}

func spectralRadius(a *mat.Dense) float64 {
	r := 0.0
	for _, v := range eigenvalues(a) {
		r = math.Max(r, cmplx.Abs(v))
	}
	return r
}

// simScaled simulates in scaled coordinates. us is [T*nu]; ys ([T*ny]) is
// filled with the outputs and, if xs is non-nil ([(T+1)*n]), the states are
// stored too.
func (m *StateSpace) simScaled(us []float64, T int, x0 []float64, ys, xs []float64) {
	n, ny, nu := m.N, m.NY, m.NU
	x := make([]float64, n)
	xn := make([]float64, n)
	if x0 != nil {
		copy(x, x0)
	}
	a, b, c, d := m.a, m.b, m.c, m.d
	for k := 0; k < T; k++ {
		uk := us[k*nu : (k+1)*nu]
		if xs != nil {
			copy(xs[k*n:(k+1)*n], x)
		}
		yk := ys[k*ny : (k+1)*ny]
		for o := 0; o < ny; o++ {
			s := 0.0
			cr := c[o*n : (o+1)*n]
			for j, v := range x {
				s += cr[j] * v
			}
			dr := d[o*nu : (o+1)*nu]
			for j, v := range uk {
				s += dr[j] * v
			}
			yk[o] = s
		}
		for i := 0; i < n; i++ {
			s := 0.0
			ar := a[i*n : (i+1)*n]
			for j, v := range x {
				s += ar[j] * v
			}
			br := b[i*nu : (i+1)*nu]
			for j, v := range uk {
				s += br[j] * v
			}
			xn[i] = s
		}
		x, xn = xn, x
	}
	if xs != nil {
		copy(xs[T*n:(T+1)*n], x)
	}
}

func (m *StateSpace) checkRows(name string, x [][]float64, w int) {
	for k, row := range x {
		if len(row) != w {
			panic(fmt.Sprintf("linear: %s row %d has %d channels, model expects %d", name, k, len(row), w))
		}
	}
}

// Simulate returns the free-run output for the inputs u starting from the
// state x0 (nil means x0 = 0, i.e. the training operating point).
func (m *StateSpace) Simulate(u [][]float64, x0 []float64) [][]float64 {
	y, _ := m.simulate(u, x0, false)
	return y
}

// SimulateStates is [StateSpace.Simulate] that also returns the states:
// x has len(u)+1 rows, x[k] the state at step k's start and x[len(u)] the
// state after the last step (scaled coordinates, as x0). The digital twin
// continues a rollout from x[len(u)] of a measured window.
func (m *StateSpace) SimulateStates(u [][]float64, x0 []float64) (y, x [][]float64) {
	return m.simulate(u, x0, true)
}

func (m *StateSpace) simulate(u [][]float64, x0 []float64, states bool) (y, x [][]float64) {
	m.checkRows("u", u, m.NU)
	if x0 != nil && len(x0) != m.N {
		panic(fmt.Sprintf("linear: x0 has length %d, model order is %d", len(x0), m.N))
	}
	T := len(u)
	us := normalize(u, m.UMean, m.UStd)
	ys := make([]float64, T*m.NY)
	var xs []float64
	if states {
		xs = make([]float64, (T+1)*m.N)
	}
	m.simScaled(us, T, x0, ys, xs)
	if states {
		x = make([][]float64, T+1)
		for k := range x {
			x[k] = xs[k*m.N : (k+1)*m.N]
		}
	}
	return denormalize(ys, T, m.YMean, m.YStd), x
}

// EstimateX0 estimates the initial state from the first n samples of the
// measured y and u. The output over the window is linear in x0,
//
//	ỹ(k) = C A^k x0 + ỹ_zs(k),  k < n,
//
// with ỹ_zs the zero-state response to u. For a fitted model EstimateX0
// returns the maximum a posteriori estimate under the Gaussian prior
// x0 ~ N(XMean, XCov) (the empirical distribution of the simulated training
// states) and output noise of variance NoiseVar (the training simulation
// error): it minimises
//
//	Σ_k Σ_o (ỹ_o(k) − ŷ_o(k))²/NoiseVar_o + (x0−XMean)ᵀ XCov⁻¹ (x0−XMean).
//
// The prior makes the estimate well posed when n·NY < N or when slow modes
// make C A^k nearly collinear over a short window; without it a 4–5 sample
// window gives wildly amplified state estimates for near-integrating models.
// Without a prior (XCov nil) the minimum-norm least-squares solution
// (truncated SVD, relative threshold 1e-10) is returned.
func (m *StateSpace) EstimateX0(y, u [][]float64, n int) []float64 {
	m.checkRows("y", y, m.NY)
	m.checkRows("u", u, m.NU)
	n = min(n, len(y), len(u))
	if n <= 0 {
		if m.XMean != nil {
			return append([]float64(nil), m.XMean...)
		}
		return make([]float64, m.N)
	}
	ys := normalize(y[:n], m.YMean, m.YStd)
	us := normalize(u[:n], m.UMean, m.UStd)
	return m.estimateX0Scaled(ys, us, n, true)
}

// EstimateX0LS is EstimateX0 without the prior: the plain (minimum-norm)
// least-squares fit of the first n samples.
func (m *StateSpace) EstimateX0LS(y, u [][]float64, n int) []float64 {
	m.checkRows("y", y, m.NY)
	m.checkRows("u", u, m.NU)
	n = min(n, len(y), len(u))
	if n <= 0 {
		return make([]float64, m.N)
	}
	ys := normalize(y[:n], m.YMean, m.YStd)
	us := normalize(u[:n], m.UMean, m.UStd)
	return m.estimateX0Scaled(ys, us, n, false)
}

func (m *StateSpace) estimateX0Scaled(ys, us []float64, n int, prior bool) []float64 {
	N, ny := m.N, m.NY
	zs := make([]float64, n*ny)
	m.simScaled(us, n, nil, zs, nil)
	usePrior := prior && m.XCov != nil
	extra := 0
	if usePrior {
		extra = N
	}
	obs := mat.NewDense(n*ny+extra, N, nil)
	rhs := mat.NewDense(n*ny+extra, 1, nil)
	var lchol mat.TriDense
	if usePrior {
		var ch mat.Cholesky
		cov := mat.NewSymDense(N, nil)
		cov.CopySym(m.XCov)
		tr := 0.0
		for i := 0; i < N; i++ {
			tr += cov.At(i, i)
		}
		jit := 1e-10 * math.Max(tr/float64(N), 1e-300)
		for !ch.Factorize(cov) {
			for i := 0; i < N; i++ {
				cov.SetSym(i, i, cov.At(i, i)+jit)
			}
			jit *= 10
			if jit > 1e10 {
				usePrior = false
				break
			}
		}
		if usePrior {
			ch.LTo(&lchol)
		}
	}
	// P = C A^k
	p := append([]float64(nil), m.c...)
	pn := make([]float64, len(p))
	for k := 0; k < n; k++ {
		for o := 0; o < ny; o++ {
			row := k*ny + o
			for j := 0; j < N; j++ {
				obs.Set(row, j, p[o*N+j])
			}
			rhs.Set(row, 0, ys[row]-zs[row])
		}
		matMulFlat(pn, p, m.a, ny, N, N)
		p, pn = pn, p
	}
	if !usePrior {
		o := obs.Slice(0, n*ny, 0, N)
		r := rhs.Slice(0, n*ny, 0, 1)
		var svd mat.SVD
		if !svd.Factorize(o, mat.SVDThin) {
			return make([]float64, N)
		}
		rank := svd.Rank(1e-10)
		x0 := make([]float64, N)
		if rank == 0 {
			return x0
		}
		var x mat.Dense
		svd.SolveTo(&x, r, rank)
		for i := range x0 {
			x0[i] = x.At(i, 0)
		}
		return x0
	}
	// x0 = μ + L z:  min ||W (O L z − (r − O μ))||² + ||z||²
	for k := 0; k < n; k++ {
		for o := 0; o < ny; o++ {
			row := k*ny + o
			w := 1 / math.Sqrt(math.Max(m.NoiseVar[o], 1e-12))
			s := rhs.At(row, 0)
			for j := 0; j < N; j++ {
				s -= obs.At(row, j) * m.XMean[j]
			}
			rhs.Set(row, 0, w*s)
			for j := 0; j < N; j++ {
				obs.Set(row, j, w*obs.At(row, j))
			}
		}
	}
	top := mat.DenseCopyOf(obs.Slice(0, n*ny, 0, N))
	obsL := obs.Slice(0, n*ny, 0, N).(*mat.Dense)
	obsL.Mul(top, &lchol)
	for i := 0; i < N; i++ {
		obs.Set(n*ny+i, i, 1)
	}
	z, err := lstsq(obs, rhs)
	x0 := append([]float64(nil), m.XMean...)
	if err != nil {
		return x0
	}
	for i := 0; i < N; i++ {
		for j := 0; j <= i; j++ {
			x0[i] += lchol.At(i, j) * z.At(j, 0)
		}
	}
	return x0
}

// setPrior computes XMean, XCov and NoiseVar from a simulation of the
// training segments, each started at its own initial state x0s[k]: the
// state mean and covariance pool the simulated states of all segments, the
// noise variance all simulation errors (e is the output offset).
func (m *StateSpace) setPrior(d *segData, x0s [][]float64, e []float64) {
	N := m.N
	yss := make([][]float64, len(d.segs))
	xss := make([][]float64, len(d.segs))
	for k, g := range d.segs {
		yss[k] = make([]float64, g.T*d.ny)
		xss[k] = make([]float64, (g.T+1)*N)
		m.simScaled(g.us, g.T, x0s[k], yss[k], xss[k])
	}
	T := float64(d.T)
	mean := make([]float64, N)
	for k, g := range d.segs {
		for t := 0; t < g.T; t++ {
			for i := 0; i < N; i++ {
				mean[i] += xss[k][t*N+i]
			}
		}
	}
	for i := range mean {
		mean[i] /= T
	}
	cov := mat.NewSymDense(N, nil)
	for k, g := range d.segs {
		for t := 0; t < g.T; t++ {
			x := xss[k][t*N : (t+1)*N]
			for i := 0; i < N; i++ {
				for j := i; j < N; j++ {
					cov.SetSym(i, j, cov.At(i, j)+(x[i]-mean[i])*(x[j]-mean[j])/T)
				}
			}
		}
	}
	nv := make([]float64, d.ny)
	for k, g := range d.segs {
		for t := 0; t < g.T; t++ {
			for o := 0; o < d.ny; o++ {
				r := yss[k][t*d.ny+o] + e[o] - g.ys[t*d.ny+o]
				nv[o] += r * r / T
			}
		}
	}
	m.XMean, m.XCov, m.NoiseVar = mean, cov, nv
}

// SimulateFrom estimates x0 from the first nInit samples of y and u and
// returns the free-run simulation over the whole of u.
func (m *StateSpace) SimulateFrom(y, u [][]float64, nInit int) [][]float64 {
	return m.Simulate(u, m.EstimateX0(y, u, nInit))
}

// matMulFlat computes dst (r×c) = a (r×k) · b (k×c), all row-major.
func matMulFlat(dst, a, b []float64, r, k, c int) {
	for i := 0; i < r; i++ {
		d := dst[i*c : (i+1)*c]
		clear(d)
		for t := 0; t < k; t++ {
			v := a[i*k+t]
			if v == 0 {
				continue
			}
			br := b[t*c : (t+1)*c]
			for j := range d {
				d[j] += v * br[j]
			}
		}
	}
}

// Unscaled returns the model in the original units of u and y,
//
//	x(k+1) = A x(k) + Bu (u(k) − UMean),  y(k) = YMean + Cu x(k) + Du (u(k) − UMean),
//
// i.e. Bu = B·diag(1/UStd), Cu = diag(YStd)·C, Du = diag(YStd)·D·diag(1/UStd).
// The state coordinates are unchanged.
func (m *StateSpace) Unscaled() (A, Bu, Cu, Du *mat.Dense) {
	A = mat.DenseCopyOf(m.A)
	Bu = mat.NewDense(m.N, m.NU, nil)
	Cu = mat.NewDense(m.NY, m.N, nil)
	Du = mat.NewDense(m.NY, m.NU, nil)
	for i := 0; i < m.N; i++ {
		for j := 0; j < m.NU; j++ {
			Bu.Set(i, j, m.B.At(i, j)/m.UStd[j])
		}
	}
	for o := 0; o < m.NY; o++ {
		for j := 0; j < m.N; j++ {
			Cu.Set(o, j, m.YStd[o]*m.C.At(o, j))
		}
		for j := 0; j < m.NU; j++ {
			Du.Set(o, j, m.YStd[o]*m.D.At(o, j)/m.UStd[j])
		}
	}
	return A, Bu, Cu, Du
}
