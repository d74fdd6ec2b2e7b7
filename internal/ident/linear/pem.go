package linear

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// pemLayout describes how (A, B, C, D, x0, e) are packed into one
// parameter vector: vec(A) row-major, vec(B), vec(C), vec(D) (only with
// feedthrough), x0, the output offset e (only with offset).
type pemLayout struct {
	n, ny, nu                            int
	ft, off                              bool
	offB, offC, offD, offX, offE, params int
}

func newPEMLayout(n, ny, nu int, ft, off bool) pemLayout {
	l := pemLayout{n: n, ny: ny, nu: nu, ft: ft, off: off}
	l.offB = n * n
	l.offC = l.offB + n*nu
	l.offD = l.offC + ny*n
	l.offX = l.offD
	if ft {
		l.offX += ny * nu
	}
	l.offE = l.offX + n
	l.params = l.offE
	if off {
		l.params += ny
	}
	return l
}

func (l pemLayout) pack(m *StateSpace, x0, e []float64) []float64 {
	th := make([]float64, l.params)
	copy(th, m.a)
	copy(th[l.offB:], m.b)
	copy(th[l.offC:], m.c)
	if l.ft {
		copy(th[l.offD:], m.d)
	}
	copy(th[l.offX:], x0)
	if l.off {
		copy(th[l.offE:], e)
	}
	return th
}

// offset returns the output offset held in th (zeros without offset).
func (l pemLayout) offset(th []float64) []float64 {
	e := make([]float64, l.ny)
	if l.off {
		copy(e, th[l.offE:l.params])
	}
	return e
}

// model builds a StateSpace view of th (sharing no storage with th).
func (l pemLayout) model(th []float64) *StateSpace {
	var d []float64
	if l.ft {
		d = th[l.offD:l.offX]
	}
	return newStateSpace(l.n, l.ny, l.nu, th[:l.offB], th[l.offB:l.offC], th[l.offC:l.offD], d)
}

// refineLM minimises the training simulation error
//
//	V(θ) = Σ_k ||ỹ(k) − ŷ(k; A, B, C, D, x0)||²
//
// over all entries of A, B, C, D (if feedthrough), the initial state and
// the output offset e (unless NoOffset; ŷ includes e)
// with Levenberg–Marquardt. The Jacobian is computed exactly by forward
// sensitivity recursions. Steps that would move an eigenvalue of A outside
// the stability radius are rejected like steps that increase V, so the
// refined model stays stable. The (fully parametrised, hence
// over-parametrised by the n² similarity directions) normal equations are
// regularised by the Marquardt term μ·diag(JᵀJ).
func refineLM(m *StateSpace, d *ssData, e0 []float64, opts SubspaceOptions) []float64 {
	l := newPEMLayout(m.N, d.ny, d.nu, opts.Feedthrough, !opts.NoOffset)
	th := l.pack(m, m.X0Train, e0)
	rows := d.T * d.ny
	res := make([]float64, rows)
	xs := make([]float64, (d.T+1)*m.N)
	cost := func(th []float64, xs []float64) (float64, bool) {
		mm := l.model(th)
		if spectralRadius(mm.A) >= opts.StabilityRadius {
			return math.Inf(1), false
		}
		mm.simScaled(d.us, d.T, th[l.offX:l.offE], res, xs)
		e := l.offset(th)
		s := 0.0
		for i := range res {
			res[i] += e[i%d.ny] - d.ys[i]
			s += res[i] * res[i]
		}
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return math.Inf(1), false
		}
		return s, true
	}
	c0, ok := cost(th, xs)
	if !ok {
		return e0
	}
	m.TrainMSEInit = c0 / float64(rows)
	jac := make([]float64, rows*l.params)
	g := mat.NewVecDense(l.params, nil)
	var h mat.SymDense
	mu := 1e-3
	cur := c0
	accepted := 0
	trial := make([]float64, l.params)
	resCur := make([]float64, rows)
	copy(resCur, res)
	step := mat.NewVecDense(l.params, nil)
	for it := 0; it < opts.RefineIters; it++ {
		jacobianSS(jac, l, th, xs, d)
		J := mat.NewDense(rows, l.params, jac)
		h.SymOuterK(1, J.T())
		g.MulVec(J.T(), mat.NewVecDense(rows, resCur))
		diag := make([]float64, l.params)
		maxd := 0.0
		for i := range diag {
			diag[i] = h.At(i, i)
			maxd = math.Max(maxd, diag[i])
		}
		if maxd == 0 {
			break
		}
		improved := false
		for try := 0; try < 12; try++ {
			hm := mat.NewSymDense(l.params, nil)
			hm.CopySym(&h)
			for i := range diag {
				hm.SetSym(i, i, diag[i]+mu*(diag[i]+1e-9*maxd))
			}
			var ch mat.Cholesky
			if !ch.Factorize(hm) {
				mu *= 10
				continue
			}
			if err := ch.SolveVecTo(step, g); err != nil {
				mu *= 10
				continue
			}
			for i := range trial {
				trial[i] = th[i] - step.AtVec(i)
			}
			c, ok := cost(trial, xs)
			if ok && c < cur {
				rel := (cur - c) / cur
				copy(th, trial)
				copy(resCur, res)
				cur = c
				mu = math.Max(mu/3, 1e-12)
				improved = true
				accepted++
				if rel < 1e-9 {
					it = opts.RefineIters
				}
				break
			}
			mu *= 10
			if mu > 1e10 {
				break
			}
		}
		if !improved {
			break
		}
	}
	final := l.model(th)
	m.A, m.B, m.C, m.D = final.A, final.B, final.C, final.D
	m.sync()
	m.X0Train = append([]float64(nil), th[l.offX:l.offE]...)
	m.TrainMSE = cur / float64(rows)
	m.Refined = true
	m.RefineIters = accepted
	return l.offset(th)
}

// jacobianSS fills jac (rows = T·ny, row-major, columns = parameters) with
// ∂ŷ/∂θ at θ = th. It first simulates the states into xs.
func jacobianSS(jac []float64, l pemLayout, th, xs []float64, d *ssData) {
	n, ny, nu, T := l.n, l.ny, l.nu, d.T
	p := l.params
	mm := l.model(th)
	ytmp := make([]float64, T*ny)
	mm.simScaled(d.us, T, th[l.offX:l.offE], ytmp, xs)
	a, c := mm.a, mm.c
	clear(jac)
	z := make([]float64, n*n)
	zn := make([]float64, n*n)
	cz := make([]float64, ny*n)
	// sensitivity to a state injection e_i·w(k) for all i at once:
	// Z(k+1) = A Z(k) + w(k) I, ∂ŷ(k)/∂θ_i = (C Z(k))[:, i].
	inject := func(col func(i int) int, w func(k int) float64, init bool) {
		clear(z)
		if init {
			for i := 0; i < n; i++ {
				z[i*n+i] = 1
			}
		}
		for k := 0; k < T; k++ {
			matMulFlat(cz, c, z, ny, n, n)
			for o := 0; o < ny; o++ {
				row := jac[(k*ny+o)*p:]
				for i := 0; i < n; i++ {
					row[col(i)] = cz[o*n+i]
				}
			}
			matMulFlat(zn, a, z, n, n, n)
			if w != nil {
				if wk := w(k); wk != 0 {
					for i := 0; i < n; i++ {
						zn[i*n+i] += wk
					}
				}
			}
			z, zn = zn, z
		}
	}
	for j := 0; j < n; j++ {
		jj := j
		inject(func(i int) int { return i*n + jj }, func(k int) float64 { return xs[k*n+jj] }, false)
	}
	for in := 0; in < nu; in++ {
		ii := in
		inject(func(i int) int { return l.offB + i*nu + ii }, func(k int) float64 { return d.us[k*nu+ii] }, false)
	}
	inject(func(i int) int { return l.offX + i }, nil, true)
	for k := 0; k < T; k++ {
		for o := 0; o < ny; o++ {
			row := jac[(k*ny+o)*p:]
			copy(row[l.offC+o*n:l.offC+(o+1)*n], xs[k*n:(k+1)*n])
			if l.ft {
				copy(row[l.offD+o*nu:l.offD+(o+1)*nu], d.us[k*nu:(k+1)*nu])
			}
			if l.off {
				row[l.offE+o] = 1
			}
		}
	}
}
