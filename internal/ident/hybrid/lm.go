package hybrid

import (
	"context"
	"errors"
	"math"
	"sync"

	"github.com/aml-project/aml/internal/ident/lm"
	"gonum.org/v1/gonum/mat"
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
// segments' initial states. It is solved by the Levenberg–Marquardt solver
// of internal/ident/lm (which eliminates the local parameters by a Schur
// complement) with a forward-difference Jacobian computed in parallel, one
// Sim per worker.
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

// lmSettings are the calibration's Levenberg–Marquardt rules: μ from 1e-3,
// ÷5 after an accepted step (not below 1e-12), ×6 after a rejected one, at
// most 12 trials per iteration and μ ≤ 1e12; D = max(diag(JᵀJ), 1e-12·max
// diag(JᵀJ)); the mean squared residual as cost; stop after three
// accepted steps in a row below tol relative decrease or a step below
// 1e-12.
func (p *blockLS) lmSettings() lm.Settings {
	tol := p.tol
	if tol <= 0 {
		tol = 1e-8
	}
	return lm.Settings{
		MaxIterations:  p.maxIter,
		InitialDamping: 1e-3, MinDamping: 1e-12, MaxDamping: 1e12,
		Decrease: 5, Increase: 6,
		MaxTrials: 12,
		Diagonal:  lm.FlooredDiagonal, DiagonalFloor: 1e-12,
		RelTol: tol, SmallSteps: 3,
		StepTol: 1e-12,
		Mean:    true,
	}
}

// solve runs Levenberg–Marquardt from (zg, zl).
func (p *blockLS) solve(ctx context.Context, zg []float64, zl [][]float64) (*lmResult, error) {
	nB, nG := len(p.nR), len(zg)
	workers := max(1, p.workers)
	maxL, maxR := 0, 0
	nl := make([]int, nB)
	for b := range zl {
		nl[b] = len(zl[b])
		maxL = max(maxL, nl[b])
		maxR = max(maxR, p.nR[b])
	}
	scratchG := make([][]float64, workers)
	scratchL := make([][]float64, workers)
	scratchR := make([][]float64, workers)
	for w := range scratchG {
		scratchG[w] = make([]float64, nG)
		scratchL[w] = make([]float64, maxL)
		scratchR[w] = make([]float64, maxR)
	}
	// the forward differences of block b: g ≥ 0 a global column, else the
	// local column l (fixed parameters have none)
	type item struct{ g, l int }
	items := make([][]item, nB)
	for b := range items {
		for i := 0; i < nG; i++ {
			if p.gb[i].kind != bFixed {
				items[b] = append(items[b], item{i, -1})
			}
		}
		for j := range zl[b] {
			if p.lb[b][j].kind != bFixed {
				items[b] = append(items[b], item{-1, j})
			}
		}
	}
	evals := 0
	// sensitive[i]: some entry of global column i of the first Jacobian
	// (the first nB calls) has a non-zero square, i.e. (JᵀJ)_ii ≠ 0 there;
	// the others are reported inactive
	sensitive := make([]bool, nG)
	jacCalls := 0
	prob := lm.Problem{
		Shared: nG, Local: nl, Rows: p.nR,
		Residuals: func(r [][]float64, zg []float64, zl [][]float64) bool {
			parallelFor(nB, p.workers, func(w, b int) { p.eval(w, b, zg, zl[b], r[b]) })
			evals += nB
			return true
		},
		Jacobian: func(jg, jl *mat.Dense, b int, zg, zlb, rb []float64) {
			var dg, dl []float64
			var sg, sl int
			if jg != nil {
				m := jg.RawMatrix()
				dg, sg = m.Data, m.Stride
			}
			if jl != nil {
				m := jl.RawMatrix()
				dl, sl = m.Data, m.Stride
			}
			parallelFor(len(items[b]), p.workers, func(w, i int) {
				c := items[b][i]
				rt := scratchR[w][:p.nR[b]]
				if c.g >= 0 {
					z := scratchG[w]
					copy(z, zg)
					h := fdStep(z[c.g])
					z[c.g] += h
					p.eval(w, b, z, zlb, rt)
					for k, v := range rt {
						dg[k*sg+c.g] = (v - rb[k]) / h
					}
					return
				}
				z := scratchL[w][:len(zlb)]
				copy(z, zlb)
				h := fdStep(z[c.l])
				z[c.l] += h
				p.eval(w, b, zg, z, rt)
				for k, v := range rt {
					dl[k*sl+c.l] = (v - rb[k]) / h
				}
			})
			evals += len(items[b])
			if jacCalls++; jacCalls <= nB && jg != nil {
				for k := 0; k < p.nR[b]; k++ {
					for i, v := range dg[k*sg : k*sg+nG] {
						sensitive[i] = sensitive[i] || v*v != 0
					}
				}
			}
		},
		Project: func(zg []float64, zl [][]float64) {
			for i := range zg {
				zg[i] = p.gb[i].clipZ(zg[i])
			}
			for b := range zl {
				for j := range zl[b] {
					zl[b][j] = p.lb[b][j].clipZ(zl[b][j])
				}
			}
		},
	}
	set := p.lmSettings()
	sol, err := lm.Solve(ctx, prob, zg, zl, &set)
	if sol == nil {
		return nil, err
	}
	if err != nil && !errors.Is(err, lm.ErrNonFinite) {
		return nil, err
	}
	// A non-finite start or Jacobian ends the run where it is, as a step
	// no trial improves does.
	res := &lmResult{zg: sol.Shared, zl: sol.Local, cost: sol.Cost, iters: sol.Iterations, evals: evals}
	if jacCalls >= nB {
		res.inactive = make([]bool, nG)
		for i, s := range sensitive {
			res.inactive[i] = !s
		}
	}
	return res, nil
}
