package hybrid

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"github.com/aml-project/aml/internal/physics"
)

// failPenalty is the residual (in output standard deviations) of every
// measured value after a simulation failed (non-finite state or output).
const failPenalty = 10

// Initial-state modes of the calibration (CalibOptions.X0).
const (
	// X0Segment estimates the initial value of every state that no output
	// measures directly as an extra parameter per segment (bounded by the
	// state's declared range where it has one).
	X0Segment = "segment"
	// X0Estimate initialises every segment as prediction does: the
	// unmeasured states are fitted (without prior) to the segment's first
	// NInit measured rows, starting from their init clauses, at every
	// evaluation of the cost.
	X0Estimate = "estimate"
	// X0Init starts the unmeasured states from their init clauses.
	X0Init = "init"
	// X0Auto calibrates with X0Segment and X0Estimate and keeps the one
	// whose parameters give the smaller training free-run error as at
	// prediction time ([Model.Simulate] with NInit measured rows and prior
	// weight X0Weight): the mode that generalises to a new run's start.
	X0Auto = "auto"
)

// CalibOptions configure [Calibrate].
type CalibOptions struct {
	// Starts is the number of starting points (default 4): the declared
	// nominal values, the centre of the bounds (in the optimiser's
	// coordinates: the geometric centre for log-scaled parameters), then
	// points of a Halton sequence rotated by the seed.
	Starts int
	Seed   int64
	// MaxIter bounds the Levenberg–Marquardt iterations per start (100).
	MaxIter int
	// X0 is the initial-state mode (X0Auto by default).
	X0 string
	// NInit is the number of measured rows that initialise a stretch at
	// prediction time (default 5).
	NInit int
	// X0Weights are the candidate prior weights of the prediction-time
	// initial-state fit (see [Model]; negative: the prior alone). The
	// calibration keeps the (mode, weight) pair with the smallest
	// training free-run error as at prediction time. Default
	// DefaultX0Weights.
	X0Weights []float64
	// Workers simulating in parallel (default GOMAXPROCS).
	Workers int
	// Progress, if set, is called after every start.
	Progress func(done, total int)
}

// DefaultX0Weights are the default candidate prior weights: the prior
// alone, then weights from strong to weak.
var DefaultX0Weights = []float64{-1, 100, 1, 0.01}

// DefaultCalibOptions are the defaults.
func DefaultCalibOptions() CalibOptions {
	return CalibOptions{Starts: 4, MaxIter: 100, X0: X0Auto, NInit: 5}
}

// StartResult is one start of the calibration.
type StartResult struct {
	Start  []float64 `json:"start"`
	Params []float64 `json:"params"`
	// Cost is the mean squared residual in output standard deviations
	// (training free-run simulation error).
	Cost  float64 `json:"cost"`
	Iters int     `json:"iters"`
	Evals int     `json:"evals"`
}

// Calibration is the result of [Calibrate].
type Calibration struct {
	Names   []string
	Params  []float64
	Lo, Hi  []float64
	Nominal []float64
	// Inactive are parameters the training simulation does not depend on
	// (zero sensitivity at the start): they keep their start values.
	Inactive []string
	// FreeStates are the states estimated per segment (indices into the
	// model's states); X0 holds every segment's initial state.
	FreeStates []int
	X0         [][]float64
	// OutStd is the standard deviation of every measured output over the
	// training segments (the residual scale).
	OutStd []float64
	// Cost and NominalCost are the mean squared residuals (in OutStd
	// units) of the calibrated and of the nominal model (init clauses for
	// the initial states).
	Cost, NominalCost float64
	Starts            []StartResult
	Best              int
	// X0Mode is the initial-state mode used and X0Weight the chosen prior
	// weight; PredCost is the training free-run error as at prediction
	// time with that weight (mean squared, in OutStd units, steps NInit…),
	// PredCosts the error of every candidate weight (X0Weights order);
	// with X0Auto, Alternatives holds the mode not chosen.
	X0Mode       string
	X0Weight     float64
	PredCost     float64
	PredCosts    []float64
	Alternatives []*Calibration
}

// outputStd is the population standard deviation of every output over the
// finite values of the segments (1 where it is 0 or undefined).
func outputStd(ny int, segs []*Segment) []float64 {
	sd := make([]float64, ny)
	for o := 0; o < ny; o++ {
		var n, s, ss float64
		for _, g := range segs {
			for _, row := range g.Y {
				if v := row[o]; finite(v) {
					n++
					s += v
					ss += v * v
				}
			}
		}
		if n > 1 {
			m := s / n
			sd[o] = math.Sqrt(math.Max(0, ss/n-m*m))
		}
		if !(sd[o] > 0) {
			sd[o] = 1
		}
	}
	return sd
}

// halton is element i (≥ 1) of the Halton sequence in base b.
func halton(i, b int) float64 {
	f, r := 1.0, 0.0
	for i > 0 {
		f /= float64(b)
		r += f * float64(i%b)
		i /= b
	}
	return r
}

var primes = []int{2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109, 113}

// startPoints returns the starting points in z coordinates.
func startPoints(gb []bound, nominal []float64, n int, seed int64) [][]float64 {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6879627269640001))
	shift := make([]float64, len(gb))
	for i := range shift {
		shift[i] = rng.Float64()
	}
	out := make([][]float64, 0, n)
	for s := 0; s < n; s++ {
		z := make([]float64, len(gb))
		for i, b := range gb {
			switch s {
			case 0:
				z[i] = b.z(nominal[i])
			case 1:
				z[i] = b.fracZ(0.5)
			default:
				f := halton(s-1, primes[i%len(primes)]) + shift[i]
				f -= math.Floor(f)
				z[i] = b.fracZ(f)
			}
			if b.kind == bFixed || b.kind == bFree {
				z[i] = b.z(nominal[i])
			}
		}
		out = append(out, z)
	}
	return out
}

// calibProblem evaluates the segments' residuals for the optimiser.
type calibProblem struct {
	sys   *System
	segs  []*Segment
	sd    []float64
	free  []int
	gb    []bound
	sims  []*physics.Sim
	trajs []*traj
	theta [][]float64
	// X0Estimate: per worker a model whose fitFree initialises segments
	est   []*Model
	nInit int
}

func (c *calibProblem) params(w int, zg []float64) []float64 {
	th := c.theta[w]
	for i, b := range c.gb {
		th[i] = b.value(zg[i])
	}
	return th
}

// x0 is segment g's initial state for parameters already set in the
// worker's sim.
func (c *calibProblem) x0(w int, g *Segment, lb []bound, zl []float64) []float64 {
	sim := c.sims[w]
	x := c.sys.baseInit(sim, g.U[0], g.d(0), g.Y[0])
	for q, j := range c.free {
		if q < len(zl) {
			x[j] = lb[q].value(zl[q])
		}
	}
	if c.est != nil && len(c.free) > 0 {
		n := min(c.nInit, g.Len())
		if n >= 2 {
			for _, j := range c.free {
				if !finite(x[j]) {
					x[j] = 0
					if b := c.sys.stateBound(j); b.kind != bFree {
						x[j] = (b.lo + b.hi) / 2
					}
				}
			}
			var d [][]float64
			if g.D != nil {
				d = g.D[:n]
			}
			x, _ = c.est[w].fitFree(sim, x, c.free, g.U[:n], d, g.Y[:n], n, 0)
		}
	}
	return x
}

func (c *calibProblem) eval(w, b int, zg, zl, r []float64, lb []bound) {
	sim := c.sims[w]
	if err := sim.SetParams(c.params(w, zg)); err != nil {
		for i := range r {
			r[i] = failPenalty
		}
		return
	}
	g := c.segs[b]
	x0 := c.x0(w, g, lb, zl)
	t := c.trajs[w]
	T := g.Len()
	c.sys.simulate(sim, x0, g.U, g.D, T, t)
	ny := c.sys.ny
	for k := 0; k < T; k++ {
		for o := 0; o < ny; o++ {
			y := g.Y[k][o]
			switch {
			case !finite(y):
				r[k*ny+o] = 0
			case k >= t.fail:
				r[k*ny+o] = failPenalty
			default:
				r[k*ny+o] = (t.Yh[k*ny+o] - y) / c.sd[o]
			}
		}
	}
}

// Calibrate estimates the parameters of sys's model (inside their declared
// bounds) by bounded nonlinear least squares of the free-run simulation
// error over the training segments: every segment is simulated from its
// initial state (directly observed states from the first measured row,
// the others estimated per segment or from their init clauses) through
// its whole length, and the residuals are the differences to the measured
// outputs in units of each output's standard deviation. A step that fails
// (non-finite) makes every later residual of the segment failPenalty.
// Levenberg–Marquardt runs from opts.Starts points; the start with the
// smallest cost wins. See [CalibOptions.X0] for the initial states.
func Calibrate(ctx context.Context, sys *System, segs []*Segment, opts CalibOptions) (*Calibration, error) {
	if opts.X0 == "" {
		opts.X0 = X0Auto
	}
	if opts.NInit < 0 {
		return nil, fmt.Errorf("hybrid: nInit %d is negative", opts.NInit)
	}
	switch opts.X0 {
	case X0Segment, X0Estimate, X0Init:
		c, err := calibrate(ctx, sys, segs, opts, opts.X0)
		if err != nil {
			return nil, err
		}
		return c, scorePred(sys, c, segs, opts)
	case X0Auto:
	default:
		return nil, fmt.Errorf("hybrid: initial-state mode %q: auto, segment, estimate or init", opts.X0)
	}
	prog := opts.Progress
	var out []*Calibration
	for i, mode := range []string{X0Segment, X0Estimate} {
		o := opts
		if prog != nil {
			o.Progress = func(done, total int) { prog(i*total+done, 2*total) }
		}
		c, err := calibrate(ctx, sys, segs, o, mode)
		if err != nil {
			return nil, err
		}
		if err := scorePred(sys, c, segs, opts); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	best, other := out[0], out[1]
	if other.PredCost < best.PredCost {
		best, other = other, best
	}
	best.Alternatives = []*Calibration{other}
	return best, nil
}

// scorePred scores every candidate prior weight (the training free-run
// error of the calibrated physics as at prediction time) and sets
// c.X0Weight, c.PredCost and c.PredCosts.
func scorePred(sys *System, c *Calibration, segs []*Segment, opts CalibOptions) error {
	ws := opts.X0Weights
	if len(ws) == 0 {
		ws = DefaultX0Weights
	}
	c.PredCosts = nil
	c.PredCost = math.Inf(1)
	for _, w := range ws {
		m, err := NewModel(sys, c, segs, w, opts.NInit)
		if err != nil {
			return err
		}
		pc, err := predCost(m, c, segs, opts.NInit)
		if err != nil {
			return err
		}
		c.PredCosts = append(c.PredCosts, pc)
		if pc < c.PredCost {
			c.PredCost, c.X0Weight = pc, w
		}
	}
	return nil
}

// predCost is the mean squared training free-run error of m's physics (in
// OutStd units, steps nInit… of every segment).
func predCost(m *Model, c *Calibration, segs []*Segment, nInit int) (float64, error) {
	sim, err := m.NewSim()
	if err != nil {
		return 0, err
	}
	var sse, n float64
	for _, g := range segs {
		p, err := m.Simulate(sim, g.U, g.D, g.Y[:min(nInit, g.Len())], nInit)
		if err != nil {
			sse += failPenalty * failPenalty * float64(g.Len())
			n += float64(g.Len())
			continue
		}
		for k := nInit; k < g.Len(); k++ {
			for o, y := range g.Y[k] {
				if finite(y) {
					e := (p.Phys[k][o] - y) / c.OutStd[o]
					if k >= p.Fail {
						e = failPenalty
					}
					sse += e * e
					n++
				}
			}
		}
	}
	return sse / math.Max(1, n), nil
}

func calibrate(ctx context.Context, sys *System, segs []*Segment, opts CalibOptions, mode string) (*Calibration, error) {
	if len(segs) == 0 {
		return nil, fmt.Errorf("hybrid: no training segments")
	}
	for _, g := range segs {
		if g.Len() == 0 {
			return nil, fmt.Errorf("hybrid: empty segment %s@%d", g.Run, g.Start)
		}
		if err := sys.CheckSegment(g); err != nil {
			return nil, err
		}
	}
	if opts.Starts <= 0 {
		opts.Starts = 4
	}
	if opts.MaxIter <= 0 {
		opts.MaxIter = 100
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	m := sys.Model
	lo, hi := m.ParamBounds()
	nominal := m.ParamVector()
	c := &calibProblem{sys: sys, segs: segs, sd: outputStd(sys.ny, segs)}
	for i := range lo {
		c.gb = append(c.gb, newBound(lo[i], hi[i]))
	}
	if mode != X0Init {
		for j, o := range sys.ObservedBy {
			if o < 0 {
				c.free = append(c.free, j)
			}
		}
	}
	c.nInit = opts.NInit
	for w := 0; w < opts.Workers; w++ {
		sim, err := m.NewSim(nominal)
		if err != nil {
			return nil, err
		}
		c.sims = append(c.sims, sim)
		c.trajs = append(c.trajs, sys.newTraj(0))
		c.theta = append(c.theta, make([]float64, len(lo)))
		if mode == X0Estimate {
			ones := func(n int) []float64 {
				v := make([]float64, n)
				for i := range v {
					v[i] = 1
				}
				return v
			}
			c.est = append(c.est, &Model{Sys: sys, OutStd: c.sd, ErrScale: ones(sys.ny), StateScale: ones(sys.nx)})
		}
	}
	lbs := make([][]bound, len(segs))
	for b := range segs {
		if mode != X0Segment {
			break
		}
		for _, j := range c.free {
			if finite(sys.Lo[j]) && finite(sys.Hi[j]) && sys.Hi[j] > sys.Lo[j] {
				lbs[b] = append(lbs[b], bound{sys.Lo[j], sys.Hi[j], bLinear})
			} else {
				lbs[b] = append(lbs[b], bound{math.Inf(-1), math.Inf(1), bFree})
			}
		}
	}
	nR := make([]int, len(segs))
	for b, g := range segs {
		nR[b] = g.Len() * sys.ny
	}
	p := &blockLS{gb: c.gb, lb: lbs, nR: nR, workers: opts.Workers, maxIter: opts.MaxIter,
		eval: func(w, b int, zg, zl, r []float64) { c.eval(w, b, zg, zl, r, lbs[b]) }}
	// local starts: the init clauses (clipped into the ranges) with the
	// start's parameters
	localStart := func(zg []float64) ([][]float64, error) {
		zl := make([][]float64, len(segs))
		sim := c.sims[0]
		if err := sim.SetParams(c.params(0, zg)); err != nil {
			return nil, fmt.Errorf("hybrid: calibration start: %w", err)
		}
		for b, g := range segs {
			x := sys.baseInit(sim, g.U[0], g.d(0), g.Y[0])
			zl[b] = make([]float64, len(lbs[b]))
			for q, j := range c.free[:len(lbs[b])] {
				v := x[j]
				if !finite(v) {
					v = 0
					if lbs[b][q].kind != bFree {
						v = (sys.Lo[j] + sys.Hi[j]) / 2
					}
				}
				zl[b][q] = lbs[b][q].z(v)
			}
		}
		return zl, nil
	}
	cal := &Calibration{Names: m.ParamNames(), Lo: lo, Hi: hi, Nominal: nominal, FreeStates: c.free, OutStd: c.sd, Best: -1, X0Mode: mode}
	starts := startPoints(c.gb, nominal, opts.Starts, opts.Seed)
	var best *lmResult
	for s, zg := range starts {
		zl, err := localStart(zg)
		if err != nil {
			return nil, err
		}
		if s == 0 {
			r := make([][]float64, len(segs))
			for b := range r {
				r[b] = make([]float64, nR[b])
			}
			cal.NominalCost = p.evalAll(zg, zl, r)
		}
		startVals := make([]float64, len(zg))
		for i, b := range c.gb {
			startVals[i] = b.value(zg[i])
		}
		res, err := p.solve(ctx, zg, zl)
		if err != nil {
			return nil, err
		}
		sr := StartResult{Start: startVals, Cost: res.cost, Iters: res.iters, Evals: res.evals}
		for i, b := range c.gb {
			sr.Params = append(sr.Params, b.value(res.zg[i]))
		}
		cal.Starts = append(cal.Starts, sr)
		if best == nil || res.cost < best.cost {
			best, cal.Best = res, s
		}
		if opts.Progress != nil {
			opts.Progress(s+1, len(starts))
		}
	}
	cal.Cost = best.cost
	cal.Params = cal.Starts[cal.Best].Params
	for i, in := range best.inactive {
		if in {
			cal.Inactive = append(cal.Inactive, cal.Names[i])
		}
	}
	if err := c.sims[0].SetParams(cal.Params); err != nil {
		return nil, err
	}
	for b, g := range segs {
		cal.X0 = append(cal.X0, c.x0(0, g, lbs[b], best.zl[b]))
	}
	return cal, nil
}
