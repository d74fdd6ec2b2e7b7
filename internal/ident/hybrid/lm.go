package hybrid

import (
	"context"
	"math"
	"sync"
)

// Bounded parameters are optimised in an unconstrained coordinate z:
//
//	linear  v = lo + (hi−lo)·σ(z)
//	log     v = exp(log lo + (log hi − log lo)·σ(z))   (lo > 0, hi/lo ≥ 100)
//	free    v = z                                      (no finite bounds)
//	fixed   v = lo                                     (lo = hi)
//
// with σ(z) = 1/(1+e^−z), so every value the optimiser can produce lies
// inside [lo, hi] (the result is clamped against rounding). z is kept in
// [−zMax, zMax].
type bound struct {
	lo, hi float64
	kind   int
}

const (
	bLinear = iota
	bLog
	bFree
	bFixed
)

const zMax = 30

func newBound(lo, hi float64) bound {
	switch {
	case math.IsInf(lo, 0) || math.IsInf(hi, 0) || math.IsNaN(lo) || math.IsNaN(hi):
		return bound{lo, hi, bFree}
	case lo == hi:
		return bound{lo, hi, bFixed}
	case lo > 0 && hi/lo >= 100:
		return bound{lo, hi, bLog}
	}
	return bound{lo, hi, bLinear}
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// value maps z to the parameter.
func (b bound) value(z float64) float64 {
	var v float64
	switch b.kind {
	case bFree:
		return z
	case bFixed:
		return b.lo
	case bLog:
		a, c := math.Log(b.lo), math.Log(b.hi)
		v = math.Exp(a + (c-a)*sigmoid(z))
	default:
		v = b.lo + (b.hi-b.lo)*sigmoid(z)
	}
	return math.Min(b.hi, math.Max(b.lo, v))
}

// frac maps a share f ∈ [0, 1] of the (log-)range to z.
func (b bound) fracZ(f float64) float64 {
	f = math.Min(1-1e-9, math.Max(1e-9, f))
	return math.Max(-zMax, math.Min(zMax, math.Log(f/(1-f))))
}

// z maps a parameter value to z (values outside the bounds are clipped).
func (b bound) z(v float64) float64 {
	switch b.kind {
	case bFree:
		return v
	case bFixed:
		return 0
	case bLog:
		v = math.Min(b.hi, math.Max(b.lo, v))
		a, c := math.Log(b.lo), math.Log(b.hi)
		return b.fracZ((math.Log(v) - a) / (c - a))
	}
	v = math.Min(b.hi, math.Max(b.lo, v))
	return b.fracZ((v - b.lo) / (b.hi - b.lo))
}

func (b bound) clipZ(z float64) float64 {
	if b.kind == bFree {
		return z
	}
	if b.kind == bFixed {
		return 0
	}
	return math.Max(-zMax, math.Min(zMax, z))
}

// blockLS is a nonlinear least-squares problem with global parameters (zg)
// and per-block local parameters (zl[b]), where block b's residuals depend
// on zg and zl[b] only: the calibration's model parameters and the
// segments' initial states. It is solved by Levenberg–Marquardt with a
// forward-difference Jacobian (computed in parallel, one Sim per worker)
// and the local parameters eliminated by a Schur complement.
type blockLS struct {
	gb      []bound   // global parameter bounds
	lb      [][]bound // per block local parameter bounds
	nR      []int     // residuals per block
	workers int
	// eval fills r (len nR[b]) with block b's residuals; w is the worker.
	eval    func(w, b int, zg, zl, r []float64)
	maxIter int
	// tol: stop after three accepted steps in a row that lower the cost by
	// less than this share (default 1e-8).
	tol float64
}

type lmResult struct {
	zg       []float64
	zl       [][]float64
	cost     float64 // mean squared residual
	iters    int
	evals    int // block evaluations
	inactive []bool
}

func parallelFor(n, workers int, f func(w, i int)) {
	if workers <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			f(0, i)
		}
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				f(w, i)
			}
		}(w)
	}
	wg.Wait()
}

func (p *blockLS) nRes() int {
	n := 0
	for _, r := range p.nR {
		n += r
	}
	return n
}

// evalAll fills r[b] for every block and returns the mean squared residual.
func (p *blockLS) evalAll(zg []float64, zl [][]float64, r [][]float64) float64 {
	parallelFor(len(p.nR), p.workers, func(w, b int) { p.eval(w, b, zg, zl[b], r[b]) })
	s := 0.0
	for _, rb := range r {
		for _, v := range rb {
			s += v * v
		}
	}
	return s / float64(max(1, p.nRes()))
}

func fdStep(z float64) float64 { return 1e-6 * math.Max(1, math.Abs(z)) }

// solve runs Levenberg–Marquardt from (zg, zl) (modified in place).
func (p *blockLS) solve(ctx context.Context, zg []float64, zl [][]float64) (*lmResult, error) {
	nB, nG := len(p.nR), len(zg)
	res := &lmResult{zg: zg, zl: zl}
	r := make([][]float64, nB)
	rt := make([][]float64, nB)
	for b := range r {
		r[b] = make([]float64, p.nR[b])
		rt[b] = make([]float64, p.nR[b])
	}
	// Jacobians per block: Jg [nR×nG], Jl [nR×nL]
	Jg := make([][]float64, nB)
	Jl := make([][]float64, nB)
	for b := range Jg {
		Jg[b] = make([]float64, p.nR[b]*nG)
		Jl[b] = make([]float64, p.nR[b]*len(zl[b]))
	}
	cost := p.evalAll(zg, zl, r)
	res.evals += nB
	res.cost = cost
	workers := max(1, p.workers)
	scratchG := make([][]float64, workers)
	scratchL := make([][]float64, workers)
	scratchR := make([][]float64, workers)
	maxL, maxR := 0, 0
	for b := range zl {
		maxL = max(maxL, len(zl[b]))
		maxR = max(maxR, p.nR[b])
	}
	for w := range scratchG {
		scratchG[w] = make([]float64, nG)
		scratchL[w] = make([]float64, maxL)
		scratchR[w] = make([]float64, maxR)
	}
	type item struct{ b, g, l int } // g ≥ 0: global column; else local column l
	var items []item
	for i := 0; i < nG; i++ {
		if p.gb[i].kind == bFixed {
			continue
		}
		for b := 0; b < nB; b++ {
			items = append(items, item{b, i, -1})
		}
	}
	for b := 0; b < nB; b++ {
		for j := range zl[b] {
			if p.lb[b][j].kind != bFixed {
				items = append(items, item{b, -1, j})
			}
		}
	}
	lambda := 1e-3
	small := 0
	tol := p.tol
	if tol <= 0 {
		tol = 1e-8
	}
	zgT := make([]float64, nG)
	zlT := make([][]float64, nB)
	for b := range zlT {
		zlT[b] = make([]float64, len(zl[b]))
	}
	Agg := make([]float64, nG*nG)
	gg := make([]float64, nG)
	Agl := make([][]float64, nB)
	All := make([][]float64, nB)
	gl := make([][]float64, nB)
	for b := 0; b < nB; b++ {
		nl := len(zl[b])
		Agl[b] = make([]float64, nG*nl)
		All[b] = make([]float64, nl*nl)
		gl[b] = make([]float64, nl)
	}
	for it := 0; it < p.maxIter && cost > 0; it++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.iters = it + 1
		// Jacobian
		parallelFor(len(items), p.workers, func(w, i int) {
			c := items[i]
			rb := scratchR[w][:p.nR[c.b]]
			var h float64
			if c.g >= 0 {
				z := scratchG[w]
				copy(z, zg)
				h = fdStep(z[c.g])
				z[c.g] += h
				p.eval(w, c.b, z, zl[c.b], rb)
				J, n := Jg[c.b], nG
				for k, v := range rb {
					J[k*n+c.g] = (v - r[c.b][k]) / h
				}
				return
			}
			zlb := scratchL[w][:len(zl[c.b])]
			copy(zlb, zl[c.b])
			h = fdStep(zlb[c.l])
			zlb[c.l] += h
			p.eval(w, c.b, zg, zlb, rb)
			J, n := Jl[c.b], len(zlb)
			for k, v := range rb {
				J[k*n+c.l] = (v - r[c.b][k]) / h
			}
		})
		res.evals += len(items)
		// normal equations, per block then summed in block order
		blockAgg := make([][]float64, nB)
		blockGg := make([][]float64, nB)
		parallelFor(nB, p.workers, func(_, b int) {
			nl, nr := len(zl[b]), p.nR[b]
			a := make([]float64, nG*nG)
			g := make([]float64, nG)
			agl, all, glb := Agl[b], All[b], gl[b]
			clear(agl)
			clear(all)
			clear(glb)
			jg, jl, rb := Jg[b], Jl[b], r[b]
			for k := 0; k < nr; k++ {
				rowG := jg[k*nG : (k+1)*nG]
				rowL := jl[k*nl : (k+1)*nl]
				rk := rb[k]
				for i, vi := range rowG {
					if vi == 0 {
						continue
					}
					g[i] += vi * rk
					ai := a[i*nG : (i+1)*nG]
					for j, vj := range rowG {
						ai[j] += vi * vj
					}
					for j, vj := range rowL {
						agl[i*nl+j] += vi * vj
					}
				}
				for i, vi := range rowL {
					if vi == 0 {
						continue
					}
					glb[i] += vi * rk
					for j, vj := range rowL {
						all[i*nl+j] += vi * vj
					}
				}
			}
			blockAgg[b], blockGg[b] = a, g
		})
		clear(Agg)
		clear(gg)
		for b := 0; b < nB; b++ {
			for i, v := range blockAgg[b] {
				Agg[i] += v
			}
			for i, v := range blockGg[b] {
				gg[i] += v
			}
		}
		if it == 0 {
			res.inactive = make([]bool, nG)
			for i := 0; i < nG; i++ {
				res.inactive[i] = Agg[i*nG+i] == 0
			}
		}
		accepted := false
		for trial := 0; trial < 12; trial++ {
			dg, dl, ok := schurSolve(Agg, gg, Agl, All, gl, nG, lambda)
			if ok {
				maxStep := 0.0
				for i := range zg {
					zgT[i] = p.gb[i].clipZ(zg[i] + dg[i])
					maxStep = math.Max(maxStep, math.Abs(zgT[i]-zg[i])/math.Max(1, math.Abs(zg[i])))
				}
				for b := range zl {
					for j := range zl[b] {
						zlT[b][j] = p.lb[b][j].clipZ(zl[b][j] + dl[b][j])
						maxStep = math.Max(maxStep, math.Abs(zlT[b][j]-zl[b][j])/math.Max(1, math.Abs(zl[b][j])))
					}
				}
				if maxStep < 1e-12 {
					break
				}
				ct := p.evalAll(zgT, zlT, rt)
				res.evals += nB
				if ct < cost {
					rel := (cost - ct) / cost
					copy(zg, zgT)
					for b := range zl {
						copy(zl[b], zlT[b])
					}
					r, rt = rt, r
					cost = ct
					lambda = math.Max(lambda/5, 1e-12)
					accepted = true
					if rel < tol {
						small++
					} else {
						small = 0
					}
					break
				}
			}
			lambda *= 6
			if lambda > 1e12 {
				break
			}
		}
		res.cost = cost
		if !accepted || small >= 3 {
			break
		}
	}
	return res, nil
}

// schurSolve solves (A + λ·D) δ = −g for the block system
//
//	[Agg        Agl_1 … Agl_B] [δg]     [gg ]
//	[Agl_bᵀ     All_b        ] [δl_b] = −[gl_b]
//
// with D the diagonal of A (floored, so directions without curvature are
// damped too). It returns ok false when a factorisation fails.
func schurSolve(Agg, gg []float64, Agl, All, gl [][]float64, nG int, lambda float64) (dg []float64, dl [][]float64, ok bool) {
	maxDiag := 0.0
	for i := 0; i < nG; i++ {
		maxDiag = math.Max(maxDiag, Agg[i*nG+i])
	}
	for b := range All {
		nl := len(gl[b])
		for i := 0; i < nl; i++ {
			maxDiag = math.Max(maxDiag, All[b][i*nl+i])
		}
	}
	floor := 1e-12*maxDiag + 1e-300
	damp := func(a []float64, n int) []float64 {
		c := append([]float64(nil), a...)
		for i := 0; i < n; i++ {
			c[i*n+i] += lambda * math.Max(a[i*n+i], floor)
			if c[i*n+i] == 0 {
				c[i*n+i] = 1e-300
			}
		}
		return c
	}
	S := damp(Agg, nG)
	rhs := make([]float64, nG)
	for i := range rhs {
		rhs[i] = -gg[i]
	}
	nB := len(All)
	Y := make([][]float64, nB) // All⁻¹ Aglᵀ  [nl×nG]
	yl := make([][]float64, nB)
	for b := 0; b < nB; b++ {
		nl := len(gl[b])
		if nl == 0 {
			continue
		}
		L := damp(All[b], nl)
		if !cholesky(L, nl) {
			return nil, nil, false
		}
		Yb := make([]float64, nl*nG)
		col := make([]float64, nl)
		for i := 0; i < nG; i++ {
			for j := 0; j < nl; j++ {
				col[j] = Agl[b][i*nl+j]
			}
			cholSolve(L, nl, col)
			for j := 0; j < nl; j++ {
				Yb[j*nG+i] = col[j]
			}
		}
		y := make([]float64, nl)
		for j := range y {
			y[j] = -gl[b][j]
		}
		cholSolve(L, nl, y)
		Y[b], yl[b] = Yb, y
		// S -= Agl Y ; rhs -= Agl y
		for i := 0; i < nG; i++ {
			ai := Agl[b][i*nl : (i+1)*nl]
			for k := 0; k < nG; k++ {
				s := 0.0
				for j, v := range ai {
					s += v * Yb[j*nG+k]
				}
				S[i*nG+k] -= s
			}
			s := 0.0
			for j, v := range ai {
				s += v * y[j]
			}
			rhs[i] -= s
		}
	}
	if nG > 0 {
		if !cholesky(S, nG) {
			return nil, nil, false
		}
		cholSolve(S, nG, rhs)
	}
	dg = rhs
	dl = make([][]float64, nB)
	for b := 0; b < nB; b++ {
		nl := len(gl[b])
		dl[b] = make([]float64, nl)
		for j := 0; j < nl; j++ {
			s := yl[b][j]
			for i := 0; i < nG; i++ {
				s -= Y[b][j*nG+i] * dg[i]
			}
			dl[b][j] = s
		}
	}
	return dg, dl, true
}

// cholesky factors the symmetric positive definite n×n matrix a (row-major)
// in place into its lower factor L (a = L Lᵀ); false if not positive
// definite.
func cholesky(a []float64, n int) bool {
	for j := 0; j < n; j++ {
		s := a[j*n+j]
		for k := 0; k < j; k++ {
			s -= a[j*n+k] * a[j*n+k]
		}
		if !(s > 0) || math.IsInf(s, 0) {
			return false
		}
		d := math.Sqrt(s)
		a[j*n+j] = d
		for i := j + 1; i < n; i++ {
			s := a[i*n+j]
			for k := 0; k < j; k++ {
				s -= a[i*n+k] * a[j*n+k]
			}
			a[i*n+j] = s / d
		}
	}
	return true
}

// cholSolve solves L Lᵀ x = b in place (b becomes x).
func cholSolve(L []float64, n int, b []float64) {
	for i := 0; i < n; i++ {
		s := b[i]
		for k := 0; k < i; k++ {
			s -= L[i*n+k] * b[k]
		}
		b[i] = s / L[i*n+i]
	}
	for i := n - 1; i >= 0; i-- {
		s := b[i]
		for k := i + 1; k < n; k++ {
			s -= L[k*n+i] * b[k]
		}
		b[i] = s / L[i*n+i]
	}
}
