package lm

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Problem is a least-squares problem with Shared parameters common to all
// blocks and Local[b] parameters of block b's own; block b has Rows[b]
// residuals, which depend on the shared parameters and on block b's local
// parameters only.
type Problem struct {
	Shared int
	Local  []int // one entry per block
	Rows   []int // one entry per block, each ≥ 1

	// Residuals fills r[b] (length Rows[b]) with block b's residuals at
	// (shared, local) for every block. It returns false if the point is
	// outside the problem's domain (a trial step there is rejected). It
	// must not modify shared or local.
	Residuals func(r [][]float64, shared []float64, local [][]float64) bool

	// Jacobian fills js (Rows[b]×Shared) with ∂r_b/∂shared and jl
	// (Rows[b]×Local[b]) with ∂r_b/∂local_b at (shared, local), where r are
	// block b's residuals. Both arrive zeroed; a matrix without columns is
	// nil. It must not modify its slice arguments.
	Jacobian func(js, jl *mat.Dense, b int, shared, local, r []float64)

	// Project, if not nil, maps a trial point into the feasible set in
	// place (for example clips it to bounds).
	Project func(shared []float64, local [][]float64)
}

// Diagonal selects the damping matrix D of the damped normal equations
// (JᵀJ + μD)δ = −Jᵀr; ε is Settings.DiagonalFloor and m the largest
// diagonal entry of JᵀJ.
type Diagonal int

const (
	// ShiftedDiagonal: D_ii = (JᵀJ)_ii + ε·m.
	ShiftedDiagonal Diagonal = iota
	// FlooredDiagonal: D_ii = max((JᵀJ)_ii, ε·m + 1e-300); a damped
	// diagonal entry that is still exactly zero becomes 1e-300.
	FlooredDiagonal
)

// Settings are the rules of the iteration (see the package
// documentation). Start from DefaultSettings: every field is used as
// given.
type Settings struct {
	// MaxIterations bounds the iterations (Jacobian evaluations); 0
	// evaluates the cost at the starting point only.
	MaxIterations int
	// InitialDamping is μ at the start; MinDamping and MaxDamping bound it.
	InitialDamping, MinDamping, MaxDamping float64
	// Decrease divides μ after an accepted step, Increase multiplies it
	// after a rejected one (both > 1).
	Decrease, Increase float64
	// MaxTrials bounds the damped steps tried per iteration.
	MaxTrials int
	// Diagonal and DiagonalFloor define the damping matrix D.
	Diagonal      Diagonal
	DiagonalFloor float64
	// MaxCondition: a factorisation whose condition estimate exceeds it
	// fails like a non-positive-definite one (0: no limit).
	MaxCondition float64
	// The solve has converged after SmallSteps accepted steps in a row that
	// each lowered the cost by less than the share RelTol.
	RelTol     float64
	SmallSteps int
	// StepTol: the solve has converged when a projected trial step changes
	// no parameter x_i by more than StepTol·max(1, |x_i|) (0: never).
	StepTol float64
	// Mean makes the cost the mean squared residual instead of the sum of
	// squares (the same minimiser; it changes the reported cost and the
	// rounding of the comparisons).
	Mean bool
	// Progress, if not nil, is called after every iteration with the
	// number of iterations so far and the cost at their end.
	Progress func(iteration int, cost float64)
}

// DefaultSettings returns the default rules: at most 100 iterations, μ
// from 1e-3 within [1e-12, 1e12], divided by 5 after an accepted step and
// multiplied by 6 after a rejected one, 12 trials per iteration, the
// floored diagonal with ε = 1e-12, no condition limit, convergence after 3
// steps in a row below 1e-8 relative decrease or a step below 1e-12.
func DefaultSettings() Settings {
	return Settings{
		MaxIterations:  100,
		InitialDamping: 1e-3,
		MinDamping:     1e-12,
		MaxDamping:     1e12,
		Decrease:       5,
		Increase:       6,
		MaxTrials:      12,
		Diagonal:       FlooredDiagonal,
		DiagonalFloor:  1e-12,
		RelTol:         1e-8,
		SmallSteps:     3,
		StepTol:        1e-12,
	}
}

// Status is why a solve stopped.
type Status int

const (
	// NotTerminated: the solve ended with an error.
	NotTerminated Status = iota
	// IterationLimit: MaxIterations iterations ran.
	IterationLimit
	// CostConvergence: SmallSteps accepted steps in a row lowered the cost
	// by less than RelTol each.
	CostConvergence
	// StepConvergence: a trial step was below StepTol.
	StepConvergence
	// ZeroCost: the residuals are all zero.
	ZeroCost
	// ZeroCurvature: JᵀJ has a zero diagonal (the residuals do not depend
	// on the parameters).
	ZeroCurvature
	// NoDecrease: no trial step of the last iteration lowered the cost.
	NoDecrease
)

func (s Status) String() string {
	switch s {
	case NotTerminated:
		return "not terminated"
	case IterationLimit:
		return "iteration limit"
	case CostConvergence:
		return "cost convergence"
	case StepConvergence:
		return "step convergence"
	case ZeroCost:
		return "zero cost"
	case ZeroCurvature:
		return "zero curvature"
	case NoDecrease:
		return "no decrease"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

var (
	// ErrInfeasible: Problem.Residuals rejected the starting point.
	ErrInfeasible = errors.New("lm: the starting point is outside the problem's domain")
	// ErrNonFinite: a residual at the starting point, or an entry of JᵀJ or
	// Jᵀr at an accepted point, is NaN or infinite.
	ErrNonFinite = errors.New("lm: non-finite value")
)

// Result is the outcome of Solve.
type Result struct {
	// Shared and Local are the last accepted point.
	Shared []float64
	Local  [][]float64
	// Cost is the cost at that point, InitialCost at the starting point.
	Cost, InitialCost float64
	// Iterations counts the iterations begun (Jacobians evaluated), Steps
	// the accepted steps.
	Iterations, Steps int
	Status            Status
}

// Solve minimises the cost of p from (shared, local), which it does not
// modify, with the rules s (DefaultSettings if nil). It returns an error,
// and a nil Result, if p, the starting point or s are malformed. With
// ErrInfeasible or ErrNonFinite at the starting point, the Result is the
// starting point with Iterations 0; with ErrNonFinite later, and with the
// context's error when ctx is done, it is the last accepted point.
func Solve(ctx context.Context, p Problem, shared []float64, local [][]float64, s *Settings) (*Result, error) {
	set := DefaultSettings()
	if s != nil {
		set = *s
	}
	if err := check(p, shared, local, set); err != nil {
		return nil, err
	}
	sv := newSolver(p, set)
	return sv.run(ctx, shared, local)
}

func check(p Problem, shared []float64, local [][]float64, s Settings) error {
	switch {
	case p.Residuals == nil || p.Jacobian == nil:
		return errors.New("lm: Problem needs Residuals and Jacobian")
	case len(p.Rows) == 0:
		return errors.New("lm: Problem has no blocks")
	case len(p.Local) != len(p.Rows):
		return fmt.Errorf("lm: %d local parameter counts for %d blocks", len(p.Local), len(p.Rows))
	case p.Shared < 0:
		return errors.New("lm: negative shared parameter count")
	case len(shared) != p.Shared:
		return fmt.Errorf("lm: %d shared starting values for %d parameters", len(shared), p.Shared)
	case len(local) != len(p.Local):
		return fmt.Errorf("lm: local starting values for %d blocks, the problem has %d", len(local), len(p.Local))
	}
	for b := range p.Rows {
		switch {
		case p.Rows[b] < 1:
			return fmt.Errorf("lm: block %d has no residuals", b)
		case p.Local[b] < 0:
			return fmt.Errorf("lm: block %d: negative local parameter count", b)
		case len(local[b]) != p.Local[b]:
			return fmt.Errorf("lm: block %d: %d local starting values for %d parameters", b, len(local[b]), p.Local[b])
		}
	}
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case s.MaxIterations < 0:
		return errors.New("lm: negative MaxIterations")
	case !(s.InitialDamping > 0) || !ok(s.InitialDamping):
		return errors.New("lm: InitialDamping must be positive")
	case !(s.MinDamping >= 0) || !(s.MaxDamping >= s.MinDamping) || !ok(s.MaxDamping):
		return errors.New("lm: need 0 ≤ MinDamping ≤ MaxDamping")
	case !(s.Decrease > 1) || !(s.Increase > 1) || !ok(s.Decrease) || !ok(s.Increase):
		return errors.New("lm: Decrease and Increase must be > 1")
	case s.MaxTrials < 1:
		return errors.New("lm: MaxTrials must be ≥ 1")
	case s.Diagonal != ShiftedDiagonal && s.Diagonal != FlooredDiagonal:
		return fmt.Errorf("lm: unknown Diagonal %d", s.Diagonal)
	case !(s.DiagonalFloor >= 0) || !ok(s.DiagonalFloor):
		return errors.New("lm: DiagonalFloor must be ≥ 0")
	case !(s.MaxCondition >= 0):
		return errors.New("lm: MaxCondition must be ≥ 0")
	case !(s.RelTol >= 0) || !(s.StepTol >= 0):
		return errors.New("lm: RelTol and StepTol must be ≥ 0")
	case s.SmallSteps < 1:
		return errors.New("lm: SmallSteps must be ≥ 1")
	}
	return nil
}

// solver holds the normal equations of one iteration and the buffers.
type solver struct {
	p      Problem
	s      Settings
	ns     int   // shared parameters
	nl     []int // local parameters per block
	nRes   int   // residuals
	js, jl []float64
	// normal equations: hss = Σ_b J_bsᵀJ_bs (nil without shared
	// parameters), hsl[b] = J_bsᵀJ_bl, hll[b] = J_blᵀJ_bl (nil without
	// local parameters), gs = Σ_b J_bsᵀr_b, gl[b] = J_blᵀr_b
	hss *mat.SymDense
	hsl []*mat.Dense
	hll []*mat.SymDense
	gs  []float64
	gl  [][]float64
	// step: the solution of the damped system with right-hand side Jᵀr
	// (the step is its negative)
	ss []float64
	sl [][]float64
	// workspaces of normal, the dense and the Schur solve
	hb   mat.SymDense
	gv   mat.VecDense
	work struct {
		h     *mat.SymDense
		g, st *mat.VecDense
		ch    mat.Cholesky
	}
	schur schurWork
}

func newSolver(p Problem, s Settings) *solver {
	sv := &solver{p: p, s: s, ns: p.Shared, nl: p.Local}
	maxRows, maxL := 0, 0
	for b, r := range p.Rows {
		sv.nRes += r
		maxRows = max(maxRows, r)
		maxL = max(maxL, p.Local[b])
	}
	sv.js = make([]float64, maxRows*sv.ns)
	sv.jl = make([]float64, maxRows*maxL)
	if sv.ns > 0 {
		sv.hss = mat.NewSymDense(sv.ns, nil)
	}
	sv.gs = make([]float64, sv.ns)
	sv.ss = make([]float64, sv.ns)
	nB := len(p.Rows)
	sv.hsl = make([]*mat.Dense, nB)
	sv.hll = make([]*mat.SymDense, nB)
	sv.gl = make([][]float64, nB)
	sv.sl = make([][]float64, nB)
	for b, n := range p.Local {
		sv.gl[b] = make([]float64, n)
		sv.sl[b] = make([]float64, n)
		if n > 0 {
			sv.hll[b] = mat.NewSymDense(n, nil)
			if sv.ns > 0 {
				sv.hsl[b] = mat.NewDense(sv.ns, n, nil)
			}
		}
	}
	return sv
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// cost is the sum (or mean) of the squared residuals, in block and row
// order.
func (sv *solver) cost(r [][]float64) float64 {
	c := 0.0
	for _, rb := range r {
		for _, v := range rb {
			c += v * v
		}
	}
	if sv.s.Mean {
		c /= float64(max(1, sv.nRes))
	}
	return c
}

func blocks(rows []int) [][]float64 {
	r := make([][]float64, len(rows))
	for b, n := range rows {
		r[b] = make([]float64, n)
	}
	return r
}

func copyLocal(dst, src [][]float64) {
	for b := range src {
		copy(dst[b], src[b])
	}
}

func (sv *solver) run(ctx context.Context, shared0 []float64, local0 [][]float64) (*Result, error) {
	p, s := sv.p, sv.s
	x := append([]float64(nil), shared0...)
	xl := blocks(p.Local)
	copyLocal(xl, local0)
	res := &Result{Shared: x, Local: xl}
	r, rt := blocks(p.Rows), blocks(p.Rows)
	if !p.Residuals(r, x, xl) {
		res.Cost, res.InitialCost = math.Inf(1), math.Inf(1)
		return res, ErrInfeasible
	}
	cost := sv.cost(r)
	res.Cost, res.InitialCost = cost, cost
	if !finite(cost) {
		for b, rb := range r {
			for i, v := range rb {
				if !finite(v) {
					return res, fmt.Errorf("%w: residual %d of block %d is %v at the starting point", ErrNonFinite, i, b, v)
				}
			}
		}
		return res, fmt.Errorf("%w: the cost overflows at the starting point", ErrNonFinite)
	}
	xt := make([]float64, len(x))
	xlt := blocks(p.Local)
	mu := s.InitialDamping
	small := 0
	for it := 0; ; it++ {
		if it >= s.MaxIterations {
			res.Status = IterationLimit
			break
		}
		if cost == 0 {
			res.Status = ZeroCost
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.Iterations = it + 1
		sv.normal(x, xl, r)
		maxd, err := sv.maxDiag()
		if err != nil {
			return res, fmt.Errorf("%w at iteration %d", err, it+1)
		}
		if maxd == 0 {
			res.Status = ZeroCurvature
			break
		}
		accepted, stepConv := false, false
		for trial := 0; trial < s.MaxTrials; trial++ {
			if sv.solve(maxd, mu) {
				for i := range x {
					xt[i] = x[i] - sv.ss[i]
				}
				for b := range xl {
					for i := range xl[b] {
						xlt[b][i] = xl[b][i] - sv.sl[b][i]
					}
				}
				if p.Project != nil {
					p.Project(xt, xlt)
				}
				if s.StepTol > 0 && maxStep(x, xt, xl, xlt) < s.StepTol {
					stepConv = true
					break
				}
				if p.Residuals(rt, xt, xlt) {
					if ct := sv.cost(rt); ct < cost {
						rel := (cost - ct) / cost
						copy(x, xt)
						copyLocal(xl, xlt)
						r, rt = rt, r
						cost = ct
						mu = math.Max(mu/s.Decrease, s.MinDamping)
						accepted = true
						res.Steps++
						if rel < s.RelTol {
							small++
						} else {
							small = 0
						}
						break
					}
				}
			}
			mu *= s.Increase
			if mu > s.MaxDamping {
				break
			}
		}
		res.Cost = cost
		if s.Progress != nil {
			s.Progress(it+1, cost)
		}
		if stepConv {
			res.Status = StepConvergence
			break
		}
		if !accepted {
			res.Status = NoDecrease
			break
		}
		if small >= s.SmallSteps {
			res.Status = CostConvergence
			break
		}
	}
	return res, nil
}

// maxStep is the largest change of a parameter relative to max(1, |x_i|).
func maxStep(x, xt []float64, xl, xlt [][]float64) float64 {
	m := 0.0
	for i := range x {
		m = math.Max(m, math.Abs(xt[i]-x[i])/math.Max(1, math.Abs(x[i])))
	}
	for b := range xl {
		for i := range xl[b] {
			m = math.Max(m, math.Abs(xlt[b][i]-xl[b][i])/math.Max(1, math.Abs(xl[b][i])))
		}
	}
	return m
}

// normal accumulates the normal equations at (x, xl) block by block from
// every block's Jacobian.
func (sv *solver) normal(x []float64, xl, r [][]float64) {
	ns := sv.ns
	if ns > 0 {
		sv.hss.Zero()
	}
	clear(sv.gs)
	hb, gv := &sv.hb, &sv.gv
	for b, rows := range sv.p.Rows {
		nl := sv.nl[b]
		var js, jl *mat.Dense
		if ns > 0 {
			d := sv.js[:rows*ns]
			clear(d)
			js = mat.NewDense(rows, ns, d)
		}
		if nl > 0 {
			d := sv.jl[:rows*nl]
			clear(d)
			jl = mat.NewDense(rows, nl, d)
		}
		sv.p.Jacobian(js, jl, b, x, xl[b], r[b])
		rv := mat.NewVecDense(rows, r[b])
		if ns > 0 {
			hb.SymOuterK(1, js.T())
			sv.hss.AddSym(sv.hss, hb)
			gv.Reset()
			gv.MulVec(js.T(), rv)
			for i := range sv.gs {
				sv.gs[i] += gv.AtVec(i)
			}
		}
		if nl > 0 {
			sv.hll[b].SymOuterK(1, jl.T())
			gv.Reset()
			gv.MulVec(jl.T(), rv)
			copy(sv.gl[b], gv.RawVector().Data)
			if ns > 0 {
				sv.hsl[b].Mul(js.T(), jl)
			}
		}
	}
}

// maxDiag returns the largest diagonal entry of JᵀJ, or ErrNonFinite if
// a diagonal or gradient entry is not finite (any non-finite Jacobian
// entry makes its column's diagonal entry non-finite).
func (sv *solver) maxDiag() (float64, error) {
	m := 0.0
	for i := 0; i < sv.ns; i++ {
		v := sv.hss.At(i, i)
		if !finite(v) || !finite(sv.gs[i]) {
			return 0, fmt.Errorf("%w: Jacobian or gradient of shared parameter %d", ErrNonFinite, i)
		}
		m = math.Max(m, v)
	}
	for b, h := range sv.hll {
		for i := 0; i < sv.nl[b]; i++ {
			v := h.At(i, i)
			if !finite(v) || !finite(sv.gl[b][i]) {
				return 0, fmt.Errorf("%w: Jacobian or gradient of local parameter %d of block %d", ErrNonFinite, i, b)
			}
			m = math.Max(m, v)
		}
	}
	return m, nil
}

// damp is the diagonal entry v of JᵀJ plus μ·D_ii.
func (sv *solver) damp(v, maxd, mu float64) float64 {
	if sv.s.Diagonal == ShiftedDiagonal {
		return v + mu*(v+sv.s.DiagonalFloor*maxd)
	}
	d := v + mu*math.Max(v, sv.s.DiagonalFloor*maxd+1e-300)
	if d == 0 {
		d = 1e-300
	}
	return d
}

// factorize factorises a into ch; false if a is not positive definite or
// its condition estimate exceeds MaxCondition. The solves with ch then
// return a mat.Condition error only when no limit is set, and their
// result is used regardless.
func (sv *solver) factorize(ch *mat.Cholesky, a *mat.SymDense) bool {
	if !ch.Factorize(a) {
		return false
	}
	return sv.s.MaxCondition == 0 || !(ch.Cond() > sv.s.MaxCondition)
}

// solve solves the damped normal equations (JᵀJ + μD) (ss, sl) = Jᵀr; false
// if a factorisation fails.
func (sv *solver) solve(maxd, mu float64) bool {
	if len(sv.nl) == 1 {
		return sv.solveDense(maxd, mu)
	}
	return sv.solveSchur(maxd, mu)
}

// solveDense solves the system of a single block at once, the shared
// parameters first.
func (sv *solver) solveDense(maxd, mu float64) bool {
	ns, nl := sv.ns, sv.nl[0]
	n := ns + nl
	w := &sv.work
	if w.h == nil {
		w.h = mat.NewSymDense(n, nil)
		w.g = mat.NewVecDense(n, nil)
		w.st = mat.NewVecDense(n, nil)
	}
	h, g := w.h, w.g
	for i := 0; i < ns; i++ {
		for j := i; j < ns; j++ {
			h.SetSym(i, j, sv.hss.At(i, j))
		}
		for j := 0; j < nl; j++ {
			h.SetSym(i, ns+j, sv.hsl[0].At(i, j))
		}
		g.SetVec(i, sv.gs[i])
	}
	for i := 0; i < nl; i++ {
		for j := i; j < nl; j++ {
			h.SetSym(ns+i, ns+j, sv.hll[0].At(i, j))
		}
		g.SetVec(ns+i, sv.gl[0][i])
	}
	for i := 0; i < n; i++ {
		h.SetSym(i, i, sv.damp(h.At(i, i), maxd, mu))
	}
	if !sv.factorize(&w.ch, h) {
		return false
	}
	_ = w.ch.SolveVecTo(w.st, g) // a Condition error: see factorize
	copy(sv.ss, w.st.RawVector().Data[:ns])
	copy(sv.sl[0], w.st.RawVector().Data[ns:])
	return true
}

// schurWork is the workspace of solveSchur, allocated at its first use.
type schurWork struct {
	sch   *mat.Dense      // Schur complement (ns×ns)
	ss    *mat.SymDense   // its symmetric part
	rs    *mat.VecDense   // its right-hand side
	dsv   *mat.VecDense   // the shared step
	hd    []*mat.SymDense // damped Hbb
	chols []mat.Cholesky  // their factorisations
	x     []mat.Dense     // Hbb⁻¹ Hbs
	rk    []*mat.VecDense
	dk    []*mat.VecDense
	cs    mat.Cholesky
	w     mat.Dense
	t     mat.VecDense
}

// solveSchur eliminates the local blocks: with the damped diagonal blocks,
// Σ = Hss − Σ_b Hsb Hbb⁻¹ Hbs, Σ ss = gs − Σ_b Hsb Hbb⁻¹ gb, then
// sb = Hbb⁻¹ (gb − Hbs ss).
func (sv *solver) solveSchur(maxd, mu float64) bool {
	ns := sv.ns
	nB := len(sv.nl)
	w := &sv.schur
	if w.hd == nil {
		if ns > 0 {
			w.sch = mat.NewDense(ns, ns, nil)
			w.ss = mat.NewSymDense(ns, nil)
			w.rs = mat.NewVecDense(ns, nil)
			w.dsv = mat.NewVecDense(ns, nil)
		}
		w.hd = make([]*mat.SymDense, nB)
		w.chols = make([]mat.Cholesky, nB)
		w.x = make([]mat.Dense, nB)
		w.rk = make([]*mat.VecDense, nB)
		w.dk = make([]*mat.VecDense, nB)
		for b, nl := range sv.nl {
			if nl > 0 {
				w.hd[b] = mat.NewSymDense(nl, nil)
				w.rk[b] = mat.NewVecDense(nl, nil)
				w.dk[b] = mat.NewVecDense(nl, nil)
			}
		}
	}
	sch, rs := w.sch, w.rs
	if ns > 0 {
		for i := 0; i < ns; i++ {
			for j := i; j < ns; j++ {
				v := sv.hss.At(i, j)
				if i == j {
					v = sv.damp(v, maxd, mu)
				}
				sch.Set(i, j, v)
				sch.Set(j, i, v)
			}
			rs.SetVec(i, sv.gs[i])
		}
	}
	for b, nl := range sv.nl {
		if nl == 0 {
			continue
		}
		hd := w.hd[b]
		hd.CopySym(sv.hll[b])
		for i := 0; i < nl; i++ {
			hd.SetSym(i, i, sv.damp(hd.At(i, i), maxd, mu))
		}
		if !sv.factorize(&w.chols[b], hd) {
			return false
		}
		if ns == 0 {
			continue
		}
		x := &w.x[b]
		x.Reset()
		_ = w.chols[b].SolveTo(x, sv.hsl[b].T()) // Hbb⁻¹ Hbs; a Condition error: see factorize
		w.w.Reset()
		w.w.Mul(sv.hsl[b], x)
		sch.Sub(sch, &w.w)
		w.t.Reset()
		w.t.MulVec(x.T(), mat.NewVecDense(nl, sv.gl[b]))
		rs.SubVec(rs, &w.t)
	}
	if ns > 0 {
		for i := 0; i < ns; i++ {
			for j := i; j < ns; j++ {
				w.ss.SetSym(i, j, 0.5*(sch.At(i, j)+sch.At(j, i)))
			}
		}
		if !sv.factorize(&w.cs, w.ss) {
			return false
		}
		_ = w.cs.SolveVecTo(w.dsv, rs)
		copy(sv.ss, w.dsv.RawVector().Data)
	}
	for b, nl := range sv.nl {
		if nl == 0 {
			continue
		}
		rk := w.rk[b]
		copy(rk.RawVector().Data, sv.gl[b])
		if ns > 0 {
			w.t.Reset()
			w.t.MulVec(sv.hsl[b].T(), w.dsv)
			rk.SubVec(rk, &w.t)
		}
		_ = w.chols[b].SolveVecTo(w.dk[b], rk)
		copy(sv.sl[b], w.dk[b].RawVector().Data)
	}
	return true
}
