package linear

import (
	"context"

	"github.com/aml-project/aml/internal/ident/lm"
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

// model builds a StateSpace view of th (sharing no storage with th).
func (l pemLayout) model(th []float64) *StateSpace {
	var d []float64
	if l.ft {
		d = th[l.offD:l.offX]
	}
	return newStateSpace(l.n, l.ny, l.nu, th[:l.offB], th[l.offB:l.offC], th[l.offC:l.offD], d)
}

// refineLM minimises the training simulation error over all segments
//
//	V(θ) = Σ_s Σ_k ||ỹ_s(k) − ŷ_s(k; A, B, C, D, x0_s)||²
//
// over all entries of A, B, C, D (if feedthrough), the initial state x0_s
// of every segment and the output offset e (unless NoOffset; ŷ includes e)
// with the Levenberg–Marquardt solver of internal/ident/lm. The Jacobian
// is computed exactly by forward sensitivity recursions. Steps that would
// move an eigenvalue of A outside the stability radius are rejected like
// steps that increase V, so the refined model stays stable. The (fully
// parametrised, hence over-parametrised by the n² similarity directions)
// normal equations are regularised by the Marquardt term
// μ·(diag(JᵀJ) + 1e-9·max diag(JᵀJ)).
//
// A segment's residuals depend on the shared parameters (A, B, C, D, e) and
// on its own initial state only: the segments are the solver's blocks, so
// it holds one segment's Jacobian at a time and (for more than one
// segment) solves every damped system by eliminating the initial-state
// blocks (Schur complement on the shared parameters), and the cost grows
// linearly with the number of segments. It returns the refined initial
// states and offset and updates A, B, C, D and the diagnostics of m.
func refineLM(m *StateSpace, d *segData, x0s [][]float64, e0 []float64, opts SubspaceOptions) ([][]float64, []float64) {
	n, ny, S := m.N, d.ny, len(d.segs)
	l := newPEMLayout(n, d.ny, d.nu, opts.Feedthrough, !opts.NoOffset)
	nE := l.params - l.offE // e
	pl := l.params          // parameters of one segment: A, B, C, D, x0, e
	// The solver's shared parameters are A, B, C, D and (with several
	// segments) e, each segment's local ones its x0. With a single segment
	// e is counted with x0, so that the one dense system keeps the order
	// A, B, C, D, x0, e of the layout.
	eShared := S > 1
	ns := l.offX
	if eShared {
		ns += nE
	}
	shared := make([]float64, ns)
	copy(shared, m.a)
	copy(shared[l.offB:], m.b)
	copy(shared[l.offC:], m.c)
	if l.ft {
		copy(shared[l.offD:], m.d)
	}
	nLocal := make([]int, S)
	rows := make([]int, S)
	local := make([][]float64, S)
	maxRows := 0
	for k, g := range d.segs {
		rows[k] = g.T * ny
		maxRows = max(maxRows, rows[k])
		local[k] = append([]float64(nil), x0s[k]...)
		if !eShared && l.off {
			local[k] = append(local[k], e0...)
		}
		nLocal[k] = len(local[k])
	}
	if eShared && l.off {
		copy(shared[l.offX:], e0)
	}
	offsetOf := func(sh []float64, loc [][]float64) []float64 {
		e := make([]float64, ny)
		switch {
		case !l.off:
		case eShared:
			copy(e, sh[l.offX:])
		default:
			copy(e, loc[0][n:])
		}
		return e
	}
	jac := make([]float64, maxRows*pl)
	th := make([]float64, pl)
	prob := lm.Problem{
		Shared: ns, Local: nLocal, Rows: rows,
		Residuals: func(r [][]float64, sh []float64, loc [][]float64) bool {
			mm := l.model(sh)
			if spectralRadius(mm.A) >= opts.StabilityRadius {
				return false
			}
			e := offsetOf(sh, loc)
			for k, g := range d.segs {
				rk := r[k]
				mm.simScaled(g.us, g.T, loc[k][:n], rk, nil)
				for i := range rk {
					rk[i] += e[i%ny] - g.ys[i]
				}
			}
			return true
		},
		Jacobian: func(js, jl *mat.Dense, k int, sh, lk, _ []float64) {
			// the segment's parameters in layout order
			copy(th, sh[:l.offX])
			copy(th[l.offX:], lk)
			if eShared {
				copy(th[l.offE:], sh[l.offX:])
			}
			rk := rows[k]
			jk := jac[:rk*pl]
			jacobianSS(jk, l, l.model(th), lk[:n], d.segs[k])
			for i := 0; i < rk; i++ {
				row := jk[i*pl : (i+1)*pl]
				sr := js.RawRowView(i)
				copy(sr, row[:l.offX])
				if eShared {
					copy(sr[l.offX:], row[l.offE:])
					copy(jl.RawRowView(i), row[l.offX:l.offE])
				} else {
					copy(jl.RawRowView(i), row[l.offX:])
				}
			}
		},
	}
	set := lm.Settings{
		MaxIterations:  max(0, opts.RefineIters),
		InitialDamping: 1e-3, MinDamping: 1e-12, MaxDamping: 1e10,
		Decrease: 3, Increase: 10,
		MaxTrials: 12,
		Diagonal:  lm.ShiftedDiagonal, DiagonalFloor: 1e-9,
		// a factorisation gonum deems singular fails the trial
		MaxCondition: mat.ConditionTolerance,
		RelTol:       1e-9, SmallSteps: 1,
	}
	res, err := lm.Solve(context.Background(), prob, shared, local, &set)
	if res == nil || (err != nil && res.Iterations == 0) {
		// unstable or non-finite at the start: nothing to refine
		return x0s, e0
	}
	// A non-finite Jacobian (err, later) ends the refinement at the last
	// accepted point, as a step no trial improves does.
	m.TrainMSEInit = res.InitialCost / float64(d.T*ny)
	final := l.model(res.Shared)
	m.A, m.B, m.C, m.D = final.A, final.B, final.C, final.D
	m.sync()
	out := make([][]float64, S)
	for k := range out {
		out[k] = append([]float64(nil), res.Local[k][:n]...)
	}
	m.TrainMSE = res.Cost / float64(d.T*ny)
	m.Refined = true
	m.RefineIters = res.Steps
	return out, offsetOf(res.Shared, res.Local)
}

// jacobianSS fills jac (rows = T·ny of segment g, row-major, columns =
// the local parameters A, B, C, D, x0, e of layout l) with ∂ŷ/∂θ for the
// model mm started at x0.
func jacobianSS(jac []float64, l pemLayout, mm *StateSpace, x0 []float64, g *ssData) {
	n, ny, nu, T := l.n, l.ny, l.nu, g.T
	p := l.params
	ytmp := make([]float64, T*ny)
	xs := make([]float64, (T+1)*n)
	mm.simScaled(g.us, T, x0, ytmp, xs)
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
		inject(func(i int) int { return l.offB + i*nu + ii }, func(k int) float64 { return g.us[k*nu+ii] }, false)
	}
	inject(func(i int) int { return l.offX + i }, nil, true)
	for k := 0; k < T; k++ {
		for o := 0; o < ny; o++ {
			row := jac[(k*ny+o)*p:]
			copy(row[l.offC+o*n:l.offC+(o+1)*n], xs[k*n:(k+1)*n])
			if l.ft {
				copy(row[l.offD+o*nu:l.offD+(o+1)*nu], g.us[k*nu:(k+1)*nu])
			}
			if l.off {
				row[l.offE+o] = 1
			}
		}
	}
}
