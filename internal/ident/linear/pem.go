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
// with Levenberg–Marquardt. The Jacobian is computed exactly by forward
// sensitivity recursions. Steps that would move an eigenvalue of A outside
// the stability radius are rejected like steps that increase V, so the
// refined model stays stable. The (fully parametrised, hence
// over-parametrised by the n² similarity directions) normal equations are
// regularised by the Marquardt term μ·diag(JᵀJ).
//
// The parameter vector is A, B, C, D, x0 of every segment, e. A segment's
// residuals depend on the shared parameters (A, B, C, D, e) and on its own
// initial state only, so the normal equations JᵀJ, Jᵀr have an arrow
// structure: they are accumulated segment by segment from each segment's
// Jacobian, and (for more than one segment) every damped system is solved
// by eliminating the initial-state blocks (Schur complement on the shared
// parameters, solveArrow), so the cost grows linearly with the number of
// segments. It returns the refined initial states and offset and updates
// A, B, C, D and the diagnostics of m.
func refineLM(m *StateSpace, d *segData, x0s [][]float64, e0 []float64, opts SubspaceOptions) ([][]float64, []float64) {
	n, ny, S := m.N, d.ny, len(d.segs)
	l := newPEMLayout(n, d.ny, d.nu, opts.Feedthrough, !opts.NoOffset)
	shared := l.offX        // A, B, C, D
	nE := l.params - l.offE // e
	ps := shared + nE       // shared parameters
	P := shared + n*S + nE  // global parameter count
	offEG := shared + n*S   // e in the global vector
	pl := l.params          // local parameters of one segment: shared, x0, e
	th := make([]float64, P)
	copy(th, m.a)
	copy(th[l.offB:], m.b)
	copy(th[l.offC:], m.c)
	if l.ft {
		copy(th[l.offD:], m.d)
	}
	for k := range x0s {
		copy(th[shared+k*n:], x0s[k])
	}
	if l.off {
		copy(th[offEG:], e0)
	}
	x0of := func(th []float64, k int) []float64 { return th[shared+k*n : shared+(k+1)*n] }
	offsetOf := func(th []float64) []float64 {
		e := make([]float64, ny)
		if l.off {
			copy(e, th[offEG:P])
		}
		return e
	}
	// sIdx maps a shared-parameter index (0..ps) to the global vector.
	sIdx := func(i int) int {
		if i < shared {
			return i
		}
		return offEG + i - shared
	}
	rows := d.T * ny
	rowOff := make([]int, S)
	xOff := make([]int, S)
	maxRows := 0
	for k, g := range d.segs {
		if k > 0 {
			rowOff[k] = rowOff[k-1] + d.segs[k-1].T*ny
			xOff[k] = xOff[k-1] + (d.segs[k-1].T+1)*n
		}
		maxRows = max(maxRows, g.T*ny)
	}
	res := make([]float64, rows)
	xs := make([]float64, d.T*n+S*n)
	cost := func(th []float64) (float64, bool) {
		mm := l.model(th)
		if spectralRadius(mm.A) >= opts.StabilityRadius {
			return math.Inf(1), false
		}
		e := offsetOf(th)
		s := 0.0
		for k, g := range d.segs {
			r := res[rowOff[k] : rowOff[k]+g.T*ny]
			mm.simScaled(g.us, g.T, x0of(th, k), r, xs[xOff[k]:xOff[k]+(g.T+1)*n])
			for i := range r {
				r[i] += e[i%ny] - g.ys[i]
				s += r[i] * r[i]
			}
		}
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return math.Inf(1), false
		}
		return s, true
	}
	c0, ok := cost(th)
	if !ok {
		return x0s, e0
	}
	m.TrainMSEInit = c0 / float64(rows)
	jac := make([]float64, maxRows*pl)
	resCur := make([]float64, rows)
	copy(resCur, res)

	// Normal equations. One segment: the dense JᵀJ (h) and Jᵀr (g).
	// Several: the blocks hss (shared × shared), hsk[k] (shared ×
	// x0_k), hkk[k] (x0_k × x0_k) and gs, gk[k].
	var h mat.SymDense
	g := mat.NewVecDense(pl, nil)
	var hss *mat.SymDense
	var gs []float64
	var hsk []*mat.Dense
	var hkk []*mat.SymDense
	var gk [][]float64
	if S > 1 {
		hss = mat.NewSymDense(ps, nil)
		gs = make([]float64, ps)
		for k := 0; k < S; k++ {
			hsk = append(hsk, mat.NewDense(ps, n, nil))
			hkk = append(hkk, mat.NewSymDense(n, nil))
			gk = append(gk, make([]float64, n))
		}
	}
	// local → shared index (−1 for the x0 columns)
	lsh := func(i int) int {
		switch {
		case i < shared:
			return i
		case i < shared+n:
			return -1
		default:
			return i - n
		}
	}
	buildNormal := func() {
		mm := l.model(th)
		if S > 1 {
			hss.Zero()
			clear(gs)
		}
		for k, sg := range d.segs {
			rk := sg.T * ny
			jk := jac[:rk*pl]
			jacobianSS(jk, l, mm, x0of(th, k), sg)
			J := mat.NewDense(rk, pl, jk)
			rv := mat.NewVecDense(rk, resCur[rowOff[k]:rowOff[k]+rk])
			if S == 1 {
				h.SymOuterK(1, J.T())
				g.MulVec(J.T(), rv)
				return
			}
			var hk mat.SymDense
			hk.SymOuterK(1, J.T())
			var gv mat.VecDense
			gv.MulVec(J.T(), rv)
			for i := 0; i < pl; i++ {
				si := lsh(i)
				if si < 0 {
					gk[k][i-shared] = gv.AtVec(i)
					for j := i; j < shared+n; j++ {
						hkk[k].SetSym(i-shared, j-shared, hk.At(i, j))
					}
					continue
				}
				gs[si] += gv.AtVec(i)
				for j := 0; j < pl; j++ {
					sj := lsh(j)
					switch {
					case sj < 0:
						hsk[k].Set(si, j-shared, hk.At(i, j))
					case sj >= si:
						hss.SetSym(si, sj, hss.At(si, sj)+hk.At(i, j))
					}
				}
			}
		}
	}
	// diagonal of the normal matrix in global order, and its maximum
	diagOf := func() ([]float64, float64) {
		dg := make([]float64, P)
		if S == 1 {
			for i := range dg {
				dg[i] = h.At(i, i)
			}
		} else {
			for i := 0; i < ps; i++ {
				dg[sIdx(i)] = hss.At(i, i)
			}
			for k := 0; k < S; k++ {
				for i := 0; i < n; i++ {
					dg[shared+k*n+i] = hkk[k].At(i, i)
				}
			}
		}
		maxd := 0.0
		for _, v := range dg {
			maxd = math.Max(maxd, v)
		}
		return dg, maxd
	}
	step := make([]float64, P)
	stepVec := mat.NewVecDense(pl, nil)
	// solve computes the LM step for damping mu; false if a factorisation
	// fails.
	solve := func(dg []float64, maxd, mu float64) bool {
		damp := func(v float64) float64 { return v + mu*(v+1e-9*maxd) }
		if S == 1 {
			hm := mat.NewSymDense(P, nil)
			hm.CopySym(&h)
			for i := range dg {
				hm.SetSym(i, i, damp(dg[i]))
			}
			var ch mat.Cholesky
			if !ch.Factorize(hm) {
				return false
			}
			if err := ch.SolveVecTo(stepVec, g); err != nil {
				return false
			}
			copy(step, stepVec.RawVector().Data)
			return true
		}
		ds := make([]float64, ps)
		for i := range ds {
			ds[i] = damp(dg[sIdx(i)])
		}
		dks := make([][]float64, S)
		for k := range dks {
			dks[k] = make([]float64, n)
			for i := range dks[k] {
				dks[k][i] = damp(dg[shared+k*n+i])
			}
		}
		sx, kx, ok := solveArrow(hss, hsk, hkk, gs, gk, ds, dks)
		if !ok {
			return false
		}
		for i := 0; i < ps; i++ {
			step[sIdx(i)] = sx[i]
		}
		for k := 0; k < S; k++ {
			copy(step[shared+k*n:], kx[k])
		}
		return true
	}
	mu := 1e-3
	cur := c0
	accepted := 0
	trial := make([]float64, P)
	for it := 0; it < opts.RefineIters; it++ {
		buildNormal()
		dg, maxd := diagOf()
		if maxd == 0 {
			break
		}
		improved := false
		for try := 0; try < 12; try++ {
			if !solve(dg, maxd, mu) {
				mu *= 10
				continue
			}
			for i := range trial {
				trial[i] = th[i] - step[i]
			}
			c, ok := cost(trial)
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
	out := make([][]float64, S)
	for k := range out {
		out[k] = append([]float64(nil), x0of(th, k)...)
	}
	m.TrainMSE = cur / float64(rows)
	m.Refined = true
	m.RefineIters = accepted
	return out, offsetOf(th)
}

// solveArrow solves the symmetric positive definite arrow system
//
//	[ Hss    Hs1  …  HsS ] [xs]   [gs]
//	[ H1s    H11         ] [x1] = [g1]
//	[  ⋮           ⋱     ] [ ⋮]   [ ⋮]
//	[ HSs            HSS ] [xS]   [gS]
//
// whose diagonals are replaced by diagS (shared block) and diagK[k]
// (block k), by eliminating the diagonal blocks: the Schur complement
// Σ = Hss − Σ_k Hsk Hkk⁻¹ Hks gives xs = Σ⁻¹ (gs − Σ_k Hsk Hkk⁻¹ gk), then
// xk = Hkk⁻¹ (gk − Hks xs). ok is false if a Cholesky factorisation fails.
func solveArrow(hss *mat.SymDense, hsk []*mat.Dense, hkk []*mat.SymDense, gs []float64, gk [][]float64, diagS []float64, diagK [][]float64) (xs []float64, xk [][]float64, ok bool) {
	ps := hss.SymmetricDim()
	sch := mat.NewDense(ps, ps, nil)
	for i := 0; i < ps; i++ {
		for j := i; j < ps; j++ {
			v := hss.At(i, j)
			if i == j {
				v = diagS[i]
			}
			sch.Set(i, j, v)
			sch.Set(j, i, v)
		}
	}
	rs := mat.NewVecDense(ps, append([]float64(nil), gs...))
	chols := make([]mat.Cholesky, len(hkk))
	var x, w mat.Dense
	var t mat.VecDense
	for k := range hkk {
		n := hkk[k].SymmetricDim()
		hd := mat.NewSymDense(n, nil)
		hd.CopySym(hkk[k])
		for i := 0; i < n; i++ {
			hd.SetSym(i, i, diagK[k][i])
		}
		if !chols[k].Factorize(hd) {
			return nil, nil, false
		}
		x.Reset()
		if err := chols[k].SolveTo(&x, hsk[k].T()); err != nil { // Hkk⁻¹ Hks
			return nil, nil, false
		}
		w.Reset()
		w.Mul(hsk[k], &x)
		sch.Sub(sch, &w)
		t.Reset()
		t.MulVec(x.T(), mat.NewVecDense(n, gk[k]))
		rs.SubVec(rs, &t)
	}
	ss := mat.NewSymDense(ps, nil)
	for i := 0; i < ps; i++ {
		for j := i; j < ps; j++ {
			ss.SetSym(i, j, 0.5*(sch.At(i, j)+sch.At(j, i)))
		}
	}
	var cs mat.Cholesky
	if !cs.Factorize(ss) {
		return nil, nil, false
	}
	dsv := mat.NewVecDense(ps, nil)
	if err := cs.SolveVecTo(dsv, rs); err != nil {
		return nil, nil, false
	}
	xs = append([]float64(nil), dsv.RawVector().Data...)
	xk = make([][]float64, len(hkk))
	for k := range hkk {
		n := hkk[k].SymmetricDim()
		t.Reset()
		t.MulVec(hsk[k].T(), dsv)
		rk := mat.NewVecDense(n, append([]float64(nil), gk[k]...))
		rk.SubVec(rk, &t)
		dk := mat.NewVecDense(n, nil)
		if err := chols[k].SolveVecTo(dk, rk); err != nil {
			return nil, nil, false
		}
		xk[k] = dk.RawVector().Data
	}
	return xs, xk, true
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
