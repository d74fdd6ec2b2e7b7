package process

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/aml-project/aml/internal/ident/lm"
)

// Options configure Fit.
type Options struct {
	// Structures has one structure per input (required).
	Structures []Structure
	// MaxDeadTime and MaxTau bound θ and τ (s); 0: 30 sampling steps and
	// a quarter of the longest record (at least 20 steps).
	MaxDeadTime, MaxTau float64
	// MaxIterations bounds the LM iterations (0: 100).
	MaxIterations int
}

// Param is one estimated dynamic parameter.
type Param struct {
	Input int     // the input's index
	Name  string  // K, tau, tau1, tau2, theta or drift (Input −1)
	Value float64 // the estimate
	// StdErr is the standard error (NaN if JᵀJ is singular), CI95 the
	// 95 % confidence interval Value ± 1.96·StdErr.
	StdErr float64
	CI95   [2]float64
	// AtBound: the estimate is at a bound of its range (the interval is
	// then not meaningful).
	AtBound bool
}

// Result is a fitted model with its statistics.
type Result struct {
	Model   *Model
	Params  []Param     // in vector order: per input its ParamNames, then drift
	Cov     [][]float64 // covariance of Params
	Offsets []float64   // the offset c of every record
	// SSE is the sum of squared residuals over N rows; Dof = N − p − q.
	SSE        float64
	N, Dof     int
	RMSE       float64
	Iterations int
	Status     string
}

// problem is the nonlinear least-squares problem over the dynamic
// parameters; per-record offsets and initial deviations are projected
// out.
type problem struct {
	ys       [][]float64
	us       [][][]float64
	dt       float64
	st       []Structure
	umean    []float64
	drift    bool
	lo, hi   []float64
	nLinear  int // per-record linear parameters (summed over records)
	nDynamic int
	maxTau   float64
	maxTheta float64
	skip     int // leading rows of every record without a residual
}

func (pr *problem) model(x []float64) *Model {
	m := &Model{Dt: pr.dt, UMean: pr.umean}
	o := 0
	for _, s := range pr.st {
		n := s.NumParams()
		m.Pairs = append(m.Pairs, pairOf(s, x[o:o+n]))
		o += n
	}
	if pr.drift {
		m.Drift = x[o]
	}
	return m
}

// residuals fills r (len(ys[s]) − skip) with record s's projected
// residuals at x and returns the record's offset.
func (pr *problem) residuals(r []float64, s int, x []float64) float64 {
	m := pr.model(x)
	forced, free := m.basis(pr.us[s], true)
	y := pr.ys[s][pr.skip:]
	for k := range r {
		r[k] = y[k] - forced[pr.skip+k]
	}
	ridge := make([]float64, len(free))
	for j := range free {
		free[j] = free[j][pr.skip:]
		n := 0.0
		for _, v := range free[j] {
			n += v * v
		}
		ridge[j] = 1e-10*n + 1e-12
	}
	beta := solveLinear(free, r, len(r), ridge)
	for j, c := range free {
		for k := range r {
			r[k] -= beta[j] * c[k]
		}
	}
	return beta[0]
}

func (pr *problem) project(x []float64) {
	for i := range x {
		x[i] = math.Min(math.Max(x[i], pr.lo[i]), pr.hi[i])
	}
}

// step is the finite-difference step of parameter i at x.
func (pr *problem) step(x []float64, i int) float64 {
	if math.IsInf(pr.lo[i], -1) { // a gain or the drift
		return 1e-6 * math.Max(math.Abs(x[i]), 1e-3)
	}
	return 1e-5 * math.Max(math.Abs(x[i]), pr.dt)
}

// jacobian fills js (rows of record s × parameters) by central
// differences (one-sided at a bound).
func (pr *problem) jacobian(js *mat.Dense, s int, x []float64) {
	n := len(pr.ys[s]) - pr.skip
	rp, rm := make([]float64, n), make([]float64, n)
	xp := append([]float64(nil), x...)
	for i := range x {
		h := pr.step(x, i)
		a, b := x[i]+h, x[i]-h
		if a > pr.hi[i] {
			a = x[i]
		}
		if b < pr.lo[i] {
			b = x[i]
		}
		xp[i] = a
		pr.residuals(rp, s, xp)
		xp[i] = b
		pr.residuals(rm, s, xp)
		xp[i] = x[i]
		// r = y − ŷ; the Jacobian is of r
		for k := 0; k < n; k++ {
			js.Set(k, i, (rp[k]-rm[k])/(a-b))
		}
	}
}

// Fit fits the model with opts.Structures to the records (ys[s] the
// output of record s, us[s] its inputs [T][nu]) sampled every dt
// seconds. NaN-free records are required.
func Fit(ctx context.Context, ys [][]float64, us [][][]float64, dt float64, opts Options) (*Result, error) {
	pr, err := newProblem(ys, us, dt, opts)
	if err != nil {
		return nil, err
	}
	x0, err := pr.gridStart(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]int, len(ys))
	local := make([]int, len(ys))
	loc := make([][]float64, len(ys))
	for s, y := range ys {
		rows[s] = len(y) - pr.skip
		loc[s] = []float64{}
	}
	p := lm.Problem{Shared: len(x0), Local: local, Rows: rows,
		Residuals: func(r [][]float64, x []float64, _ [][]float64) bool {
			for s := range r {
				pr.residuals(r[s], s, x)
			}
			return true
		},
		Jacobian: func(js, _ *mat.Dense, b int, x, _, _ []float64) { pr.jacobian(js, b, x) },
		Project:  func(x []float64, _ [][]float64) { pr.project(x) },
	}
	set := lm.DefaultSettings()
	if opts.MaxIterations > 0 {
		set.MaxIterations = opts.MaxIterations
	}
	res, err := lm.Solve(ctx, p, x0, loc, &set)
	if err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	return pr.result(res.Shared, res.Iterations, res.Status.String())
}

func newProblem(ys [][]float64, us [][][]float64, dt float64, opts Options) (*problem, error) {
	if !(dt > 0) || math.IsInf(dt, 0) {
		return nil, fmt.Errorf("process: sampling period %v", dt)
	}
	if len(ys) == 0 || len(ys) != len(us) {
		return nil, fmt.Errorf("process: %d output and %d input records", len(ys), len(us))
	}
	nu := len(opts.Structures)
	if nu == 0 {
		return nil, errors.New("process: no input structures")
	}
	pr := &problem{ys: ys, us: us, dt: dt, st: opts.Structures}
	longest := 0
	sum := make([]float64, nu)
	for s, y := range ys {
		if len(us[s]) != len(y) || len(y) < 2 {
			return nil, fmt.Errorf("process: record %d has %d outputs and %d input rows", s, len(y), len(us[s]))
		}
		longest = max(longest, len(y))
		for k, row := range us[s] {
			if len(row) != nu {
				return nil, fmt.Errorf("process: record %d row %d has %d inputs, want %d", s, k, len(row), nu)
			}
			if !finite(y[k]) {
				return nil, fmt.Errorf("process: record %d output %d is not finite", s, k)
			}
			for i, v := range row {
				if !finite(v) {
					return nil, fmt.Errorf("process: record %d input row %d is not finite", s, k)
				}
				sum[i] += v
			}
		}
	}
	rowsIn := 0
	for _, y := range ys {
		rowsIn += len(y)
	}
	for i := range sum {
		sum[i] /= float64(rowsIn)
	}
	pr.umean = sum
	maxTheta := opts.MaxDeadTime
	if maxTheta <= 0 {
		maxTheta = 30 * dt
	}
	maxTau := opts.MaxTau
	if maxTau <= 0 {
		maxTau = math.Max(20, float64(longest)/4) * dt
	}
	minTau := dt / 20
	if maxTau <= minTau || maxTheta < 0 {
		return nil, fmt.Errorf("process: MaxTau %v, MaxDeadTime %v", maxTau, maxTheta)
	}
	pr.maxTau, pr.maxTheta = maxTau, maxTheta
	pr.skip = int(math.Ceil(maxTheta/dt-1e-9)) + 1
	inf := math.Inf(1)
	for _, st := range opts.Structures {
		switch st {
		case FOPDT:
			pr.lo = append(pr.lo, -inf, minTau, 0)
			pr.hi = append(pr.hi, inf, maxTau, maxTheta)
		case SOPDT:
			pr.lo = append(pr.lo, -inf, minTau, minTau, 0)
			pr.hi = append(pr.hi, inf, maxTau, maxTau, maxTheta)
		case IPDT:
			pr.lo = append(pr.lo, -inf, 0)
			pr.hi = append(pr.hi, inf, maxTheta)
			pr.drift = true
		default:
			return nil, fmt.Errorf("process: unknown structure %q", st)
		}
	}
	if pr.drift {
		pr.lo = append(pr.lo, -inf)
		pr.hi = append(pr.hi, inf)
	}
	pr.nDynamic = len(pr.lo)
	q := 1
	for _, st := range opts.Structures {
		q += st.states()
	}
	pr.nLinear = q * len(ys)
	n := 0
	for s, y := range ys {
		if len(y) <= pr.skip+q {
			return nil, fmt.Errorf("process: record %d has %d rows, it needs more than %d (the dead-time range, %d steps, and its %d linear parameters)", s, len(y), pr.skip+q, pr.skip, q)
		}
		n += len(y) - pr.skip
	}
	if n <= pr.nDynamic+pr.nLinear {
		return nil, fmt.Errorf("process: %d rows for %d parameters", n, pr.nDynamic+pr.nLinear)
	}
	return pr, nil
}

// gridStart finds starting values: per input in turn (two sweeps), the
// time constants on a logarithmic grid and the dead time in whole steps,
// gains, offsets (per record) and drift by least squares.
func (pr *problem) gridStart(ctx context.Context) ([]float64, error) {
	nu := len(pr.st)
	taus := []float64{}
	for t := pr.dt / 2; t <= pr.maxTau*1.0001; t *= 1.6 {
		taus = append(taus, t)
	}
	nTheta := int(math.Floor(pr.maxTheta/pr.dt + 1e-9))
	thetaStep := max(1, nTheta/40)
	// current unit-gain pairs
	cur := make([]Pair, nu)
	for i, s := range pr.st {
		cur[i] = Pair{Structure: s, K: 1, Tau1: taus[len(taus)/2], Tau2: taus[len(taus)/2] * 0.3}
	}
	cols := make([][][]float64, nu) // cols[i][s]: unit response of input i in record s
	for i := range cur {
		cols[i] = pr.unitResponse(i, cur[i])
	}
	best := math.Inf(1)
	var gains []float64
	var drift float64
	for sweep := 0; sweep < 2; sweep++ {
		for i, s := range pr.st {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var cands []Pair
			for m := 0; m <= nTheta; m += thetaStep {
				th := float64(m) * pr.dt
				switch s {
				case FOPDT:
					for _, t := range taus {
						cands = append(cands, Pair{Structure: s, K: 1, Tau1: t, Theta: th})
					}
				case SOPDT:
					for _, t := range taus {
						for _, r := range []float64{0.1, 0.3, 0.6} {
							cands = append(cands, Pair{Structure: s, K: 1, Tau1: t, Tau2: r * t, Theta: th})
						}
					}
				case IPDT:
					cands = append(cands, Pair{Structure: s, K: 1, Theta: th})
				}
			}
			keep := cols[i]
			for _, c := range cands {
				cols[i] = pr.unitResponse(i, c)
				sse, g, d := pr.linearFit(cols)
				if sse < best {
					best, gains, drift = sse, g, d
					cur[i] = c
					keep = cols[i]
				}
			}
			cols[i] = keep
		}
	}
	if gains == nil {
		_, gains, drift = pr.linearFit(cols)
	}
	var x []float64
	for i, p := range cur {
		p.K = gains[i]
		x = p.vector(x)
	}
	if pr.drift {
		x = append(x, drift)
	}
	pr.project(x)
	return x, nil
}

// offset is the index of input i's first parameter.
func (pr *problem) offset(i int) int {
	o := 0
	for _, s := range pr.st[:i] {
		o += s.NumParams()
	}
	return o
}

func (pr *problem) unitResponse(i int, p Pair) [][]float64 {
	out := make([][]float64, len(pr.ys))
	v := []float64{}
	for s, u := range pr.us {
		v = delayed(v, u, i, p.Theta, pr.dt, pr.umean[i])
		out[s] = make([]float64, len(u))
		response(out[s], v, p, pr.dt, nil)
	}
	return out
}

// linearFit regresses the outputs on the unit responses (and a drift
// ramp), each record with its own offset, and returns the SSE, the gains
// and the drift.
func (pr *problem) linearFit(cols [][][]float64) (float64, []float64, float64) {
	nu := len(cols)
	q := nu
	if pr.drift {
		q++
	}
	h := mat.NewSymDense(q, nil)
	g := mat.NewVecDense(q, nil)
	yy := 0.0
	col := func(j, s, k int) float64 {
		if j < nu {
			return cols[j][s][k]
		}
		return pr.dt * float64(k)
	}
	means := make([]float64, q)
	for s, y := range pr.ys {
		T, k0 := len(y), pr.skip
		ym := 0.0
		for _, v := range y[k0:] {
			ym += v
		}
		ym /= float64(T - k0)
		for j := 0; j < q; j++ {
			means[j] = 0
			for k := k0; k < T; k++ {
				means[j] += col(j, s, k)
			}
			means[j] /= float64(T - k0)
		}
		for k := k0; k < T; k++ {
			yc := y[k] - ym
			yy += yc * yc
			for a := 0; a < q; a++ {
				ca := col(a, s, k) - means[a]
				g.SetVec(a, g.AtVec(a)+ca*yc)
				for b := a; b < q; b++ {
					h.SetSym(a, b, h.At(a, b)+ca*(col(b, s, k)-means[b]))
				}
			}
		}
	}
	for a := 0; a < q; a++ {
		h.SetSym(a, a, h.At(a, a)*(1+1e-10)+1e-12)
	}
	var ch mat.Cholesky
	beta := make([]float64, q)
	if !ch.Factorize(h) {
		return math.Inf(1), beta, 0
	}
	var x mat.VecDense
	_ = ch.SolveVecTo(&x, g) // a Condition error: the result is used anyway
	copy(beta, x.RawVector().Data)
	// SSE = yᵀy − βᵀg for the least-squares solution
	sse := yy
	for a := 0; a < q; a++ {
		sse -= beta[a] * g.AtVec(a)
	}
	d := 0.0
	if pr.drift {
		d = beta[nu]
	}
	return sse, beta[:nu], d
}

// result assembles the Result at x: the model, the covariance σ²(JᵀJ)⁻¹
// and the intervals. SOPDT time constants are ordered τ1 ≥ τ2.
func (pr *problem) result(x []float64, iters int, status string) (*Result, error) {
	x = append([]float64(nil), x...)
	// order the SOPDT time constants (the model is symmetric in them);
	// the Jacobian below is taken at the ordered point
	for i, s := range pr.st {
		if o := pr.offset(i); s == SOPDT && x[o+2] > x[o+1] {
			x[o+1], x[o+2] = x[o+2], x[o+1]
		}
	}
	p := len(x)
	jtj := mat.NewSymDense(p, nil)
	sse, n := 0.0, 0
	var offsets []float64
	for s, y := range pr.ys {
		T := len(y) - pr.skip
		r := make([]float64, T)
		offsets = append(offsets, pr.residuals(r, s, x))
		for _, v := range r {
			sse += v * v
		}
		n += T
		js := mat.NewDense(T, p, nil)
		pr.jacobian(js, s, x)
		var h mat.SymDense
		h.SymOuterK(1, js.T())
		jtj.AddSym(jtj, &h)
	}
	dof := n - p - pr.nLinear
	sigma2 := sse / float64(dof)
	cov := make([][]float64, p)
	for i := range cov {
		cov[i] = make([]float64, p)
		for j := range cov[i] {
			cov[i][j] = math.NaN()
		}
	}
	var ch mat.Cholesky
	if ch.Factorize(jtj) {
		var inv mat.SymDense
		if err := ch.InverseTo(&inv); err == nil || inv.SymmetricDim() == p {
			for i := 0; i < p; i++ {
				for j := 0; j < p; j++ {
					cov[i][j] = sigma2 * inv.At(i, j)
				}
			}
		}
	}
	m := pr.model(x)
	mo := 0.0
	for _, c := range offsets {
		mo += c
	}
	m.Offset = mo / float64(len(offsets))
	if len(offsets) > 1 {
		v := 0.0
		for _, c := range offsets {
			v += (c - m.Offset) * (c - m.Offset)
		}
		// twice the spread: a few records estimate it poorly
		m.OffsetStd = 2 * math.Sqrt(v/float64(len(offsets)-1))
	}
	m.NoiseVar = sigma2
	m.YStd = pr.outputStd()
	res := &Result{Model: m, Cov: cov, Offsets: offsets, SSE: sse, N: n, Dof: dof, RMSE: math.Sqrt(sse / float64(n)), Iterations: iters, Status: status}
	for i, s := range pr.st {
		o := pr.offset(i)
		for j, name := range s.ParamNames() {
			res.Params = append(res.Params, pr.param(i, name, o+j, x, cov))
		}
	}
	if pr.drift {
		res.Params = append(res.Params, pr.param(-1, "drift", p-1, x, cov))
	}
	return res, nil
}

func (pr *problem) param(input int, name string, j int, x []float64, cov [][]float64) Param {
	se := math.Sqrt(cov[j][j])
	if !finite(se) {
		se = math.NaN()
	}
	tol := 1e-9 * math.Max(1, math.Abs(x[j]))
	return Param{Input: input, Name: name, Value: x[j], StdErr: se, CI95: [2]float64{x[j] - 1.96*se, x[j] + 1.96*se},
		AtBound: math.Abs(x[j]-pr.lo[j]) <= tol || math.Abs(x[j]-pr.hi[j]) <= tol}
}

func (pr *problem) outputStd() float64 {
	s, s2, n := 0.0, 0.0, 0.0
	for _, y := range pr.ys {
		for _, v := range y {
			s += v
			s2 += v * v
			n++
		}
	}
	m := s / n
	return math.Sqrt(math.Max(s2/n-m*m, 0))
}
