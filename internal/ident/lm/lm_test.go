package lm

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// pemLike are the rules of the state-space refinement (internal/ident/linear).
func pemLike() Settings {
	return Settings{
		MaxIterations: 200, InitialDamping: 1e-3, MinDamping: 1e-12, MaxDamping: 1e10,
		Decrease: 3, Increase: 10, MaxTrials: 12,
		Diagonal: ShiftedDiagonal, DiagonalFloor: 1e-9, MaxCondition: mat.ConditionTolerance,
		RelTol: 1e-12, SmallSteps: 1,
	}
}

// rosenbrock is Rosenbrock's function as least squares, minimum 0 at (1, 1).
func rosenbrock() Problem {
	return Problem{
		Shared: 2, Local: []int{0}, Rows: []int{2},
		Residuals: func(r [][]float64, x []float64, _ [][]float64) bool {
			r[0][0] = 10 * (x[1] - x[0]*x[0])
			r[0][1] = 1 - x[0]
			return true
		},
		Jacobian: func(js, _ *mat.Dense, _ int, x, _, _ []float64) {
			js.Set(0, 0, -20*x[0])
			js.Set(0, 1, 10)
			js.Set(1, 0, -1)
		},
	}
}

// expFit: y(t) = a·exp(−b·t) sampled at t = 0, 0.1, …, 4.9 with a = 2,
// b = 0.5 (exact data).
func expFit() Problem {
	const n = 50
	ts := make([]float64, n)
	ys := make([]float64, n)
	for i := range ts {
		ts[i] = 0.1 * float64(i)
		ys[i] = 2 * math.Exp(-0.5*ts[i])
	}
	return Problem{
		Shared: 2, Local: []int{0}, Rows: []int{n},
		Residuals: func(r [][]float64, x []float64, _ [][]float64) bool {
			for i, t := range ts {
				r[0][i] = x[0]*math.Exp(-x[1]*t) - ys[i]
			}
			return true
		},
		Jacobian: func(js, _ *mat.Dense, _ int, x, _, _ []float64) {
			for i, t := range ts {
				e := math.Exp(-x[1] * t)
				js.Set(i, 0, e)
				js.Set(i, 1, -x[0]*t*e)
			}
		},
	}
}

// decays is a shared-plus-per-segment problem: segment s is
// y_s(t) = x0_s·exp(−k·t) + c (k and the offset c shared, the initial value
// x0_s per segment), exact data from k = 0.3, c = 0.5.
type decays struct {
	ts   [][]float64
	ys   [][]float64
	x0   []float64
	k, c float64
}

func newDecays(segs int, r *rand.Rand) *decays {
	d := &decays{k: 0.3, c: 0.5}
	for s := 0; s < segs; s++ {
		T := 20 + r.IntN(40)
		x0 := 1 + 4*r.Float64()
		ts, ys := make([]float64, T), make([]float64, T)
		for i := range ts {
			ts[i] = 0.25 * float64(i)
			ys[i] = x0*math.Exp(-d.k*ts[i]) + d.c
		}
		d.ts, d.ys, d.x0 = append(d.ts, ts), append(d.ys, ys), append(d.x0, x0)
	}
	return d
}

func (d *decays) problem() Problem {
	p := Problem{Shared: 2}
	for _, ts := range d.ts {
		p.Local = append(p.Local, 1)
		p.Rows = append(p.Rows, len(ts))
	}
	p.Residuals = func(r [][]float64, x []float64, l [][]float64) bool {
		for s, ts := range d.ts {
			for i, t := range ts {
				r[s][i] = l[s][0]*math.Exp(-x[0]*t) + x[1] - d.ys[s][i]
			}
		}
		return true
	}
	p.Jacobian = func(js, jl *mat.Dense, s int, x, l, _ []float64) {
		for i, t := range d.ts[s] {
			e := math.Exp(-x[0] * t)
			js.Set(i, 0, -l[0]*t*e)
			js.Set(i, 1, 1)
			jl.Set(i, 0, e)
		}
	}
	return p
}

func (d *decays) start() ([]float64, [][]float64) {
	l := make([][]float64, len(d.x0))
	for s := range l {
		l[s] = []float64{1}
	}
	return []float64{1, 0}, l
}

func TestKnownProblems(t *testing.T) {
	def := DefaultSettings()
	pem := pemLike()
	dec := newDecays(6, rand.New(rand.NewPCG(1, 2)))
	ds, dl := dec.start()
	cases := []struct {
		name   string
		p      Problem
		shared []float64
		local  [][]float64
		want   []float64 // shared parameters
		wantL  [][]float64
	}{
		{"rosenbrock", rosenbrock(), []float64{-1.2, 1}, [][]float64{{}}, []float64{1, 1}, nil},
		{"exponential", expFit(), []float64{1, 1}, [][]float64{{}}, []float64{2, 0.5}, nil},
		{"shared+per-segment", dec.problem(), ds, dl, []float64{dec.k, dec.c}, func() [][]float64 {
			var w [][]float64
			for _, v := range dec.x0 {
				w = append(w, []float64{v})
			}
			return w
		}()},
	}
	for _, c := range cases {
		for _, sc := range []struct {
			name string
			s    Settings
		}{{"default", def}, {"pem-like", pem}} {
			s := sc.s
			s.MaxIterations = 500
			res, err := Solve(context.Background(), c.p, c.shared, c.local, &s)
			if err != nil {
				t.Fatalf("%s/%s: %v", c.name, sc.name, err)
			}
			t.Logf("%s/%s: %v after %d iterations (%d steps), cost %.3g → %.3g, x %.10g",
				c.name, sc.name, res.Status, res.Iterations, res.Steps, res.InitialCost, res.Cost, res.Shared)
			for i, w := range c.want {
				if math.Abs(res.Shared[i]-w) > 1e-6*math.Max(1, math.Abs(w)) {
					t.Errorf("%s/%s: shared %d = %.10g, want %g", c.name, sc.name, i, res.Shared[i], w)
				}
			}
			for b := range c.wantL {
				for i, w := range c.wantL[b] {
					if math.Abs(res.Local[b][i]-w) > 1e-6*math.Max(1, math.Abs(w)) {
						t.Errorf("%s/%s: local %d of block %d = %.10g, want %g", c.name, sc.name, i, b, res.Local[b][i], w)
					}
				}
			}
			if res.Cost > 1e-12 || res.Status == IterationLimit || res.Status == NotTerminated {
				t.Errorf("%s/%s: cost %.3g, status %v", c.name, sc.name, res.Cost, res.Status)
			}
		}
	}
}

// The start point is not modified; the result is.
func TestSolveKeepsStart(t *testing.T) {
	dec := newDecays(3, rand.New(rand.NewPCG(3, 4)))
	ds, dl := dec.start()
	res, err := Solve(context.Background(), dec.problem(), ds, dl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0] != 1 || ds[1] != 0 || dl[0][0] != 1 || res.Shared[0] == 1 {
		t.Fatalf("start %v %v, result %v", ds, dl, res.Shared)
	}
}

// Accepted steps never raise the cost, from many starts of problems with
// plateaus and curved valleys (Rosenbrock, shared + per-segment decays with
// noisy data, both damping diagonals).
func TestCostNeverIncreases(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dec := newDecays(8, r)
	for s := range dec.ys {
		for i := range dec.ys[s] {
			dec.ys[s][i] += 0.05 * r.NormFloat64()
		}
	}
	for trial := 0; trial < 40; trial++ {
		var p Problem
		var sh []float64
		var lo [][]float64
		if trial%2 == 0 {
			p, sh, lo = rosenbrock(), []float64{4 * r.NormFloat64(), 4 * r.NormFloat64()}, [][]float64{{}}
		} else {
			p, sh = dec.problem(), []float64{math.Abs(r.NormFloat64()), r.NormFloat64()}
			for range dec.ys {
				lo = append(lo, []float64{5 * r.NormFloat64()})
			}
		}
		s := DefaultSettings()
		if trial%4 >= 2 {
			s = pemLike()
		}
		var costs []float64
		s.Progress = func(it int, c float64) {
			if it != len(costs)+1 {
				t.Fatalf("progress iteration %d after %d calls", it, len(costs))
			}
			costs = append(costs, c)
		}
		res, err := Solve(context.Background(), p, sh, lo, &s)
		if err != nil {
			t.Fatal(err)
		}
		prev := res.InitialCost
		for i, c := range costs {
			if c > prev {
				t.Fatalf("trial %d: cost rose from %.17g to %.17g at iteration %d", trial, prev, c, i+1)
			}
			prev = c
		}
		if len(costs) != res.Iterations || res.Steps > res.Iterations || (len(costs) > 0 && costs[len(costs)-1] != res.Cost) {
			t.Fatalf("trial %d: %d progress calls, %d iterations, %d steps, cost %g", trial, len(costs), res.Iterations, res.Steps, res.Cost)
		}
		// the reported cost is the cost at the reported point
		rr := make([][]float64, len(p.Rows))
		for b, n := range p.Rows {
			rr[b] = make([]float64, n)
		}
		p.Residuals(rr, res.Shared, res.Local)
		sum := 0.0
		for _, rb := range rr {
			for _, v := range rb {
				sum += v * v
			}
		}
		if sum != res.Cost {
			t.Fatalf("trial %d: cost %.17g at the result, reported %.17g", trial, sum, res.Cost)
		}
	}
}

// Several blocks (the Schur complement) and the same problem as one block
// (the dense system) give the same steps.
func TestSchurMatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	ns, nl, B, rows := 7, 3, 4, 40
	js := make([]*mat.Dense, B)
	jl := make([]*mat.Dense, B)
	rs := make([][]float64, B)
	for b := range js {
		js[b] = mat.NewDense(rows, ns, nil)
		jl[b] = mat.NewDense(rows, nl, nil)
		rs[b] = make([]float64, rows)
		for i := 0; i < rows; i++ {
			for j := 0; j < ns; j++ {
				js[b].Set(i, j, r.NormFloat64())
			}
			for j := 0; j < nl; j++ {
				jl[b].Set(i, j, r.NormFloat64())
			}
			rs[b][i] = r.NormFloat64()
		}
	}
	local := make([][]float64, B)
	for b := range local {
		local[b] = make([]float64, nl)
	}
	blocks := Problem{Shared: ns, Local: []int{nl, nl, nl, nl}, Rows: []int{rows, rows, rows, rows},
		Residuals: func(r [][]float64, _ []float64, _ [][]float64) bool { return true },
		Jacobian: func(a, c *mat.Dense, b int, _, _, _ []float64) {
			a.Copy(js[b])
			c.Copy(jl[b])
		}}
	// one block: every parameter local, the rows stacked
	P := ns + nl*B
	one := Problem{Shared: 0, Local: []int{P}, Rows: []int{rows * B},
		Residuals: blocks.Residuals,
		Jacobian: func(_, c *mat.Dense, _ int, _, _, _ []float64) {
			for b := 0; b < B; b++ {
				for i := 0; i < rows; i++ {
					for j := 0; j < ns; j++ {
						c.Set(b*rows+i, j, js[b].At(i, j))
					}
					for j := 0; j < nl; j++ {
						c.Set(b*rows+i, ns+b*nl+j, jl[b].At(i, j))
					}
				}
			}
		}}
	var rOne []float64
	for _, rb := range rs {
		rOne = append(rOne, rb...)
	}
	for _, d := range []Diagonal{ShiftedDiagonal, FlooredDiagonal} {
		s := DefaultSettings()
		s.Diagonal = d
		sb := newSolver(blocks, s)
		sb.normal(make([]float64, ns), local, rs)
		so := newSolver(one, s)
		so.normal(nil, [][]float64{make([]float64, P)}, [][]float64{rOne})
		mb, _ := sb.maxDiag()
		mo, _ := so.maxDiag()
		if math.Abs(mb-mo) > 1e-12*mo {
			t.Fatalf("max diagonal %g and %g", mb, mo)
		}
		for _, mu := range []float64{1e-9, 1e-3, 1, 1e3} {
			if !sb.solve(mb, mu) || !so.solve(mo, mu) {
				t.Fatal("factorisation failed")
			}
			got := append([]float64(nil), sb.ss...)
			for _, v := range sb.sl {
				got = append(got, v...)
			}
			for i, w := range so.sl[0] {
				if math.Abs(got[i]-w) > 1e-10*(1+math.Abs(w)) {
					t.Fatalf("diagonal %d, μ %g: component %d: Schur %.15g, dense %.15g", d, mu, i, got[i], w)
				}
			}
		}
	}
}

// Project keeps every trial point inside the bounds.
func TestProjectBounds(t *testing.T) {
	p := expFit()
	p.Project = func(x []float64, _ [][]float64) {
		x[0] = math.Min(x[0], 1.5) // the answer a = 2 lies outside
	}
	inner := p.Residuals
	p.Residuals = func(r [][]float64, x []float64, l [][]float64) bool {
		if x[0] > 1.5 {
			t.Fatalf("residuals at a = %g outside the bound", x[0])
		}
		return inner(r, x, l)
	}
	res, err := Solve(context.Background(), p, []float64{1, 1}, [][]float64{{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Shared[0] != 1.5 || res.Status == NotTerminated {
		t.Fatalf("a = %g (bound 1.5), status %v", res.Shared[0], res.Status)
	}
}

func TestCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Solve(ctx, rosenbrock(), []float64{-1.2, 1}, [][]float64{{}}, nil)
	if !errors.Is(err, context.Canceled) || res == nil || res.Iterations != 0 || res.Shared[0] != -1.2 {
		t.Fatalf("cancelled before the start: %v, %+v", err, res)
	}
	// cancelled after two iterations: the result is their end point
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	s := DefaultSettings()
	var last float64
	s.Progress = func(it int, c float64) {
		last = c
		if it == 2 {
			cancel()
		}
	}
	res, err = Solve(ctx, rosenbrock(), []float64{-1.2, 1}, [][]float64{{}}, &s)
	if !errors.Is(err, context.Canceled) || res.Iterations != 2 || res.Cost != last || res.Status != NotTerminated {
		t.Fatalf("cancelled after two iterations: %v, %+v", err, res)
	}
}

// sqrtFit: r = √x − 0.5, NaN for x < 0, where the Gauss–Newton step
// −x + √x from any x > 1 lands.
func sqrtFit() Problem {
	return Problem{
		Shared: 1, Local: []int{0}, Rows: []int{1},
		Residuals: func(r [][]float64, x []float64, _ [][]float64) bool {
			r[0][0] = math.Sqrt(x[0]) - 0.5
			return true
		},
		Jacobian: func(js, _ *mat.Dense, _ int, x, _, _ []float64) {
			js.Set(0, 0, 0.5/math.Sqrt(x[0]))
		},
	}
}

func TestNonFinite(t *testing.T) {
	// NaN at the start: an error, no panic
	p := sqrtFit()
	res, err := Solve(context.Background(), p, []float64{-1}, [][]float64{{}}, nil)
	if !errors.Is(err, ErrNonFinite) || res == nil || res.Iterations != 0 || !math.IsNaN(res.Cost) {
		t.Fatalf("NaN start: %v, %+v", err, res)
	}
	t.Logf("NaN start: %v", err)
	// NaN at trial points (full steps from x = 4 land at x < 0) are
	// rejected; the solve converges
	nan := 0
	inner := p.Residuals
	p.Residuals = func(r [][]float64, x []float64, l [][]float64) bool {
		inner(r, x, l)
		if math.IsNaN(r[0][0]) {
			nan++
		}
		return true
	}
	for _, s := range []Settings{DefaultSettings(), pemLike()} {
		res, err = Solve(context.Background(), p, []float64{4}, [][]float64{{}}, &s)
		if err != nil || math.Abs(res.Shared[0]-0.25) > 1e-8 {
			t.Fatalf("NaN trial points: %v, %+v", err, res)
		}
	}
	if nan == 0 {
		t.Error("no trial point met the NaN region: the test does not exercise it")
	}
	// an infinite residual at the start
	q := expFit()
	q.Residuals = func(r [][]float64, _ []float64, _ [][]float64) bool {
		r[0][3] = math.Inf(1)
		return true
	}
	if _, err := Solve(context.Background(), q, []float64{1, 1}, [][]float64{{}}, nil); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("Inf start: %v", err)
	}
	// a NaN Jacobian: an error with the last accepted point
	q = expFit()
	calls := 0
	jac := q.Jacobian
	q.Jacobian = func(js, jl *mat.Dense, b int, x, l, r []float64) {
		jac(js, jl, b, x, l, r)
		if calls++; calls == 3 {
			js.Set(7, 1, math.NaN())
		}
	}
	res, err = Solve(context.Background(), q, []float64{1, 1}, [][]float64{{}}, nil)
	if !errors.Is(err, ErrNonFinite) || res.Iterations != 3 || res.Steps != 2 || !(res.Cost < res.InitialCost) {
		t.Fatalf("NaN Jacobian: %v, %+v", err, res)
	}
	t.Logf("NaN Jacobian: %v", err)
	// a start the residual function rejects
	q = expFit()
	q.Residuals = func(_ [][]float64, _ []float64, _ [][]float64) bool { return false }
	if res, err := Solve(context.Background(), q, []float64{1, 1}, [][]float64{{}}, nil); !errors.Is(err, ErrInfeasible) || res.Iterations != 0 {
		t.Fatalf("infeasible start: %v", err)
	}
}

// Trial points the residual function rejects (outside its domain) are
// rejected steps.
func TestInfeasibleTrials(t *testing.T) {
	p := expFit()
	inner := p.Residuals
	rejected := 0
	p.Residuals = func(r [][]float64, x []float64, l [][]float64) bool {
		if x[1] < 0.7 { // the answer b = 0.5 is outside the domain
			rejected++
			return false
		}
		return inner(r, x, l)
	}
	res, err := Solve(context.Background(), p, []float64{1, 1}, [][]float64{{}}, nil)
	if err != nil || rejected == 0 || res.Shared[1] < 0.7 || !(res.Cost < res.InitialCost) {
		t.Fatalf("%v, %d rejected, %+v", err, rejected, res)
	}
}

func TestStatus(t *testing.T) {
	// exact start
	res, err := Solve(context.Background(), rosenbrock(), []float64{1, 1}, [][]float64{{}}, nil)
	if err != nil || res.Status != ZeroCost || res.Iterations != 0 {
		t.Fatalf("exact start: %v %+v", err, res)
	}
	// residuals independent of the parameters
	p := rosenbrock()
	p.Jacobian = func(_, _ *mat.Dense, _ int, _, _, _ []float64) {}
	res, err = Solve(context.Background(), p, []float64{0, 0}, [][]float64{{}}, nil)
	if err != nil || res.Status != ZeroCurvature || res.Iterations != 1 {
		t.Fatalf("zero Jacobian: %v %+v", err, res)
	}
	// iteration limit
	s := DefaultSettings()
	s.MaxIterations = 2
	res, err = Solve(context.Background(), rosenbrock(), []float64{-1.2, 1}, [][]float64{{}}, &s)
	if err != nil || res.Status != IterationLimit || res.Iterations != 2 {
		t.Fatalf("two iterations: %v %+v", err, res)
	}
	// no iterations: the cost at the start
	s.MaxIterations = 0
	res, err = Solve(context.Background(), rosenbrock(), []float64{-1.2, 1}, [][]float64{{}}, &s)
	if err != nil || res.Iterations != 0 || res.Cost != res.InitialCost || math.Abs(res.Cost-24.2) > 1e-12 {
		t.Fatalf("no iterations: %v %+v", err, res)
	}
	// a wrong Jacobian: no step lowers the cost
	p = expFit()
	jac := p.Jacobian
	p.Jacobian = func(js, jl *mat.Dense, b int, x, l, r []float64) {
		jac(js, jl, b, x, l, r)
		js.Scale(-1, js)
	}
	res, err = Solve(context.Background(), p, []float64{1, 1}, [][]float64{{}}, nil)
	if err != nil || res.Status != NoDecrease || res.Steps != 0 {
		t.Fatalf("wrong Jacobian: %v %+v", err, res)
	}
	// noisy data: the cost converges
	q := newDecays(4, rand.New(rand.NewPCG(8, 9)))
	for s := range q.ys {
		for i := range q.ys[s] {
			q.ys[s][i] += 0.01 * math.Sin(float64(7*i+s))
		}
	}
	ds, dl := q.start()
	res, err = Solve(context.Background(), q.problem(), ds, dl, nil)
	if err != nil || (res.Status != CostConvergence && res.Status != StepConvergence) {
		t.Fatalf("noisy decays: %v %+v", err, res)
	}
	if NoDecrease.String() != "no decrease" || Status(99).String() != "Status(99)" {
		t.Error("Status strings")
	}
}

func TestMalformed(t *testing.T) {
	ok := rosenbrock()
	for i, c := range []struct {
		p  Problem
		x  []float64
		l  [][]float64
		s  func(*Settings)
		in string
	}{
		{Problem{Shared: 2, Local: []int{0}, Rows: []int{2}}, []float64{0, 0}, [][]float64{{}}, nil, "callbacks"},
		{Problem{Shared: 2, Residuals: ok.Residuals, Jacobian: ok.Jacobian}, []float64{0, 0}, nil, nil, "no blocks"},
		{Problem{Shared: 2, Local: []int{0, 0}, Rows: []int{2}, Residuals: ok.Residuals, Jacobian: ok.Jacobian}, []float64{0, 0}, [][]float64{{}}, nil, "local counts"},
		{ok, []float64{0}, [][]float64{{}}, nil, "shared start"},
		{ok, []float64{0, 0}, [][]float64{{1}}, nil, "local start"},
		{Problem{Shared: 2, Local: []int{0}, Rows: []int{0}, Residuals: ok.Residuals, Jacobian: ok.Jacobian}, []float64{0, 0}, [][]float64{{}}, nil, "no residuals"},
		{ok, []float64{0, 0}, [][]float64{{}}, func(s *Settings) { s.Decrease = 1 }, "Decrease"},
		{ok, []float64{0, 0}, [][]float64{{}}, func(s *Settings) { s.InitialDamping = 0 }, "InitialDamping"},
		{ok, []float64{0, 0}, [][]float64{{}}, func(s *Settings) { s.MaxTrials = 0 }, "MaxTrials"},
		{ok, []float64{0, 0}, [][]float64{{}}, func(s *Settings) { s.SmallSteps = 0 }, "SmallSteps"},
		{ok, []float64{0, 0}, [][]float64{{}}, func(s *Settings) { s.MaxDamping = 1e-20 }, "MaxDamping"},
		{ok, []float64{0, 0}, [][]float64{{}}, func(s *Settings) { s.Diagonal = 7 }, "Diagonal"},
	} {
		s := DefaultSettings()
		if c.s != nil {
			c.s(&s)
		}
		res, err := Solve(context.Background(), c.p, c.x, c.l, &s)
		if err == nil || res != nil {
			t.Errorf("case %d (%s): no error", i, c.in)
		}
	}
}
