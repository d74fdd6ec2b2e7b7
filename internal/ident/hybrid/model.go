package hybrid

import (
	"context"
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/physics"
)

// Model is a calibrated physics model plus an optional bounded residual
// ensemble: the hybrid predictor. Prediction ([Model.Simulate]) is the
// same for windows, whole runs and the residual's training data:
//
//  1. the initial state: init clauses with the calibrated parameters and
//     the first inputs; directly observed states from the first measured
//     row; every other state ("free") starts at its prior (init clause +
//     PriorOffset, the mean fitted offset of the training runs' starts)
//     and, given at least two measured rows, is refined by a small
//     bounded least-squares fit of the first nInit measured rows with the
//     prior as a penalty (weight X0Weight, scale StateScale; data
//     residuals in units of OutStd·ErrScale);
//  2. the free-run simulation with physics.Sim.Step over every input row;
//  3. the residual: ŷ = y_phys + OutStd·mean_i(residualScale·tanh(net_i)),
//     where every member net_i sees only simulated quantities and inputs.
type Model struct {
	Sys    *System
	Params []float64
	// Free marks the states estimated at prediction time (not directly
	// observed); PriorOffset[j] is added to a free state's init clause to
	// give its prior mean, StateScale[j] is the prior's scale.
	Free        []bool
	PriorOffset []float64
	StateScale  []float64
	// OutStd is each output's training standard deviation; ErrScale the
	// calibrated physics's training free-run error in OutStd units (floor
	// 0.01): the noise level of the initial-state fit.
	OutStd   []float64
	ErrScale []float64
	// X0Weight weighs the prior of the initial-state fit of a run's start
	// (negative: no fit, free states start at their prior);
	// WindowX0Weight that of a window starting anywhere in a run (see
	// [Model.ForWindows]).
	X0Weight       float64
	WindowX0Weight float64
	Residual       *Ensemble
}

// ForWindows returns the model that predicts windows: the same model with
// the window prior weight (a window starts anywhere in a run, where the
// prior — fitted at the training runs' starts — says less than at a run's
// start). Everything else, the update rule and the residual features
// included, is shared.
func (m *Model) ForWindows() *Model {
	c := *m
	c.X0Weight = m.WindowX0Weight
	return &c
}

// maxSelectWindows bounds the training windows SelectWindowX0Weight scores.
const maxSelectWindows = 500

// SelectWindowX0Weight sets WindowX0Weight to the candidate with the
// smallest mean squared error (in OutStd units) of the physics over the F
// future steps of up to 500 training windows spread evenly over the
// segments, each initialised from its H history rows as PredictBatch does,
// and returns every candidate's error.
func (m *Model) SelectWindowX0Weight(segs []*Segment, H, F int, candidates []float64) ([]float64, error) {
	if len(candidates) == 0 {
		candidates = DefaultX0Weights
	}
	type win struct{ b, k int }
	total := 0
	for _, g := range segs {
		total += max(0, g.Len()-H-F+1)
	}
	m.WindowX0Weight = m.X0Weight
	if total == 0 || H < 1 || F < 1 {
		return nil, nil
	}
	M := min(maxSelectWindows, total)
	var wins []win
	for i := 0; i < M; i++ {
		pos := int((float64(i) + 0.5) * float64(total) / float64(M))
		for b, g := range segs {
			n := max(0, g.Len()-H-F+1)
			if pos < n {
				wins = append(wins, win{b, pos})
				break
			}
			pos -= n
		}
	}
	sim, err := m.NewSim()
	if err != nil {
		return nil, err
	}
	scores := make([]float64, len(candidates))
	best := math.Inf(1)
	for c, w := range candidates {
		mm := *m
		mm.X0Weight = w
		mm.Residual = nil
		var sse, n float64
		for _, wi := range wins {
			g := segs[wi.b]
			u := g.U[wi.k : wi.k+H+F]
			var d [][]float64
			if g.D != nil {
				d = g.D[wi.k : wi.k+H+F]
			}
			p, err := mm.Simulate(sim, u, d, g.Y[wi.k:wi.k+H], H)
			for k := H; k < H+F; k++ {
				for o, y := range g.Y[wi.k+k] {
					if !finite(y) {
						continue
					}
					e := float64(failPenalty)
					if err == nil && k < p.Fail {
						e = (p.Phys[k][o] - y) / m.OutStd[o]
					}
					sse += e * e
					n++
				}
			}
		}
		scores[c] = sse / math.Max(1, n)
		if scores[c] < best {
			best, m.WindowX0Weight = scores[c], w
		}
	}
	return scores, nil
}

// NewSim returns a simulator with the model's parameters (one per
// goroutine).
func (m *Model) NewSim() (*physics.Sim, error) { return m.Sys.Model.NewSim(m.Params) }

// NewModel builds the physics part of a hybrid model from a calibration on
// segs: the prior offsets of the free states (the mean over segments that
// start a run, or over all segments when none does, of the fitted initial
// value minus the init clause), the state scales (standard deviations over
// the calibrated training simulations) and the error scales (the
// short-horizon error level of the physics over nInit steps, see
// shortHorizonNoise; the free-run error when nInit < 2).
func NewModel(sys *System, cal *Calibration, segs []*Segment, x0Weight float64, nInit int) (*Model, error) {
	if len(cal.X0) != len(segs) {
		return nil, fmt.Errorf("hybrid: calibration has %d initial states for %d segments", len(cal.X0), len(segs))
	}
	nx, ny := sys.nx, sys.ny
	m := &Model{Sys: sys, Params: append([]float64(nil), cal.Params...), Free: make([]bool, nx), PriorOffset: make([]float64, nx),
		StateScale: make([]float64, nx), OutStd: append([]float64(nil), cal.OutStd...), ErrScale: make([]float64, ny), X0Weight: x0Weight}
	for j, o := range sys.ObservedBy {
		m.Free[j] = o < 0
	}
	sim, err := m.NewSim()
	if err != nil {
		return nil, err
	}
	runStarts := 0
	for _, g := range segs {
		if g.Start == 0 {
			runStarts++
		}
	}
	cnt := 0
	for b, g := range segs {
		if runStarts > 0 && g.Start != 0 {
			continue
		}
		base := sim.Init(nil, g.U[0], g.d(0))
		for _, j := range cal.FreeStates {
			if finite(base[j]) {
				m.PriorOffset[j] += cal.X0[b][j] - base[j]
			}
		}
		cnt++
	}
	for j := range m.PriorOffset {
		m.PriorOffset[j] /= float64(max(1, cnt))
	}
	// state and error scales from the calibrated simulations
	t := sys.newTraj(0)
	xs, xss := make([]float64, nx), make([]float64, nx)
	sse, n := make([]float64, ny), make([]float64, ny)
	nk := 0.0
	for b, g := range segs {
		T := g.Len()
		sys.simulate(sim, cal.X0[b], g.U, g.D, T, t)
		for k := 0; k < T; k++ {
			for j := 0; j < nx; j++ {
				v := t.X[k*nx+j]
				xs[j] += v
				xss[j] += v * v
			}
			nk++
			for o := 0; o < ny; o++ {
				if y := g.Y[k][o]; finite(y) {
					e := (t.Yh[k*ny+o] - y) / m.OutStd[o]
					if k >= t.fail {
						e = failPenalty
					}
					sse[o] += e * e
					n[o]++
				}
			}
		}
	}
	for j := 0; j < nx; j++ {
		mean := xs[j] / math.Max(1, nk)
		sd := math.Sqrt(math.Max(0, xss[j]/math.Max(1, nk)-mean*mean))
		m.StateScale[j] = math.Max(sd, 1e-6*(1+math.Abs(mean)))
		if !finite(m.StateScale[j]) {
			m.StateScale[j] = 1
		}
	}
	for o := 0; o < ny; o++ {
		m.ErrScale[o] = 0.01
		if n[o] > 0 {
			m.ErrScale[o] = math.Max(0.01, math.Sqrt(sse[o]/n[o]))
		}
	}
	if nInit >= 2 {
		m.shortHorizonNoise(sim, cal, segs, nInit)
	}
	return m, nil
}

// noiseStretches is the number of training stretches shortHorizonNoise
// uses.
const noiseStretches = 200

// shortHorizonNoise sets ErrScale to the error level of the physics over
// nInit steps, the horizon of the initial-state fit: at up to
// noiseStretches points spread evenly over the training segments, the free
// states are fitted without prior (starting from the calibrated
// simulation's state there) to the next nInit measured rows, and ErrScale
// is the RMS of the remaining residuals (floor 1e-4), so that measured rows
// outweigh the prior exactly as much as the data warrant.
func (m *Model) shortHorizonNoise(sim *physics.Sim, cal *Calibration, segs []*Segment, nInit int) {
	sys := m.Sys
	ny := sys.ny
	total := 0
	for _, g := range segs {
		if g.Len() >= nInit {
			total += g.Len() - nInit + 1
		}
	}
	if total == 0 {
		return
	}
	M := min(noiseStretches, total)
	sse, cnt := make([]float64, ny), make([]float64, ny)
	t := sys.newTraj(0)
	last := -1
	for i := 0; i < M; i++ {
		pos := int((float64(i) + 0.5) * float64(total) / float64(M))
		b, k := 0, pos
		for ; b < len(segs); b++ {
			n := segs[b].Len() - nInit + 1
			if n <= 0 {
				continue
			}
			if k < n {
				break
			}
			k -= n
		}
		g := segs[b]
		if b != last {
			sys.simulate(sim, cal.X0[b], g.U, g.D, g.Len(), t)
			last = b
		}
		if k >= t.fail {
			continue
		}
		var d [][]float64
		if g.D != nil {
			d = g.D[k : k+nInit]
		}
		prior := append([]float64(nil), t.X[k*sys.nx:(k+1)*sys.nx]...)
		var free []int
		for j := range prior {
			if o := sys.ObservedBy[j]; o >= 0 && finite(g.Y[k][o]) {
				prior[j] = g.Y[k][o]
				continue
			}
			free = append(free, j)
		}
		_, s := m.fitFree(sim, prior, free, g.U[k:k+nInit], d, g.Y[k:k+nInit], nInit, 0)
		for o := 0; o < ny; o++ {
			sse[o] += s[o]
			for _, row := range g.Y[k : k+nInit] {
				if finite(row[o]) {
					cnt[o]++
				}
			}
		}
	}
	for o := 0; o < ny; o++ {
		if cnt[o] > 0 {
			m.ErrScale[o] = math.Max(1e-4, math.Sqrt(sse[o]/cnt[o]))
		}
	}
}

// Prediction is a simulated stretch: per step the hybrid prediction Y, the
// physics alone Phys and the spread of the ensemble members (their
// standard deviation, 0 without an ensemble), all [T][outputs] in model
// units; X0 is the initial state used and Fail the first step whose
// physics step failed (len when none; later rows repeat the last good
// row).
type Prediction struct {
	Y, Phys, Spread [][]float64
	X0              []float64
	Fail            int
}

// stateBound is the bound of free state j's coordinate in the fits.
func (s *System) stateBound(j int) bound {
	if finite(s.Lo[j]) && finite(s.Hi[j]) && s.Hi[j] > s.Lo[j] {
		return bound{s.Lo[j], s.Hi[j], bLinear}
	}
	return bound{math.Inf(-1), math.Inf(1), bFree}
}

// priorState is the prior initial state of a stretch and its free
// states (those not set from the first measured row y0, which may be nil).
func (m *Model) priorState(sim *physics.Sim, u0, d0, y0 []float64) (x []float64, free []int) {
	sys := m.Sys
	x = sys.baseInit(sim, u0, d0, y0)
	for j, f := range m.Free {
		if o := sys.ObservedBy[j]; o >= 0 && y0 != nil && finite(y0[o]) {
			continue // measured
		}
		if !finite(x[j]) {
			x[j] = 0
			if b := sys.stateBound(j); b.kind != bFree {
				x[j] = (b.lo + b.hi) / 2
			}
		}
		if f {
			x[j] += m.PriorOffset[j]
		}
		if b := sys.stateBound(j); b.kind != bFree {
			x[j] = math.Min(b.hi, math.Max(b.lo, x[j]))
		}
		free = append(free, j)
	}
	return x, free
}

// fitFree refines the free states of prior by bounded least squares over
// the first n rows: data residuals (ŷ−y)/(OutStd·ErrScale) and prior
// residuals √weight·(x−prior)/StateScale. It returns the state and the
// data residuals' sum of squares per output (in OutStd units) at the end.
func (m *Model) fitFree(sim *physics.Sim, prior []float64, free []int, u, d, y [][]float64, n int, weight float64) ([]float64, []float64) {
	sys := m.Sys
	ny := sys.ny
	lb := make([]bound, len(free))
	zl := make([]float64, len(free))
	for q, j := range free {
		lb[q] = sys.stateBound(j)
		zl[q] = lb[q].z(prior[j])
	}
	t := sys.newTraj(n)
	xt := make([]float64, len(prior))
	wp := math.Sqrt(math.Max(0, weight))
	p := &blockLS{lb: [][]bound{lb}, nR: []int{n*ny + len(free)}, workers: 1, maxIter: 50, tol: 1e-15,
		eval: func(_, _ int, _, zl, r []float64) {
			copy(xt, prior)
			for q, j := range free {
				xt[j] = lb[q].value(zl[q])
			}
			sys.simulate(sim, xt, u, d, n, t)
			for k := 0; k < n; k++ {
				for o := 0; o < ny; o++ {
					yv := y[k][o]
					switch {
					case !finite(yv):
						r[k*ny+o] = 0
					case k >= t.fail:
						r[k*ny+o] = failPenalty / m.ErrScale[o]
					default:
						r[k*ny+o] = (t.Yh[k*ny+o] - yv) / (m.OutStd[o] * m.ErrScale[o])
					}
				}
			}
			for q, j := range free {
				r[n*ny+q] = wp * (xt[j] - prior[j]) / m.StateScale[j]
			}
		}}
	x := append([]float64(nil), prior...)
	res, err := p.solve(context.Background(), nil, [][]float64{zl})
	if err == nil {
		for q, j := range free {
			x[j] = lb[q].value(res.zl[0][q])
		}
	}
	sse := make([]float64, ny)
	sys.simulate(sim, x, u, d, n, t)
	for k := 0; k < n; k++ {
		for o := 0; o < ny; o++ {
			if yv := y[k][o]; finite(yv) {
				e := (t.Yh[k*ny+o] - yv) / m.OutStd[o]
				if k >= t.fail {
					e = failPenalty
				}
				sse[o] += e * e
			}
		}
	}
	return x, sse
}

// InitialState estimates the initial state of a stretch from its first
// nInit measured rows (see [Model]); sim must carry the model's
// parameters.
func (m *Model) InitialState(sim *physics.Sim, u, d, y [][]float64, nInit int) []float64 {
	nInit = min(nInit, len(y), len(u))
	var d0, y0 []float64
	if d != nil {
		d0 = d[0]
	}
	if nInit >= 1 {
		y0 = y[0]
	}
	x, free := m.priorState(sim, u[0], d0, y0)
	if nInit < 2 || len(free) == 0 || m.X0Weight < 0 {
		return x
	}
	x, _ = m.fitFree(sim, x, free, u, d, y, nInit, m.X0Weight)
	return x
}

// Simulate predicts a stretch: u (controls, one row per step), d
// (disturbances: nil for the defaults, or one row per step) and the first
// nInit rows of y (measured outputs) initialise the state; every row is
// then simulated from the inputs only (rows before nInit are simulated
// too). sim must carry the model's parameters (see [Model.NewSim]).
func (m *Model) Simulate(sim *physics.Sim, u, d, y [][]float64, nInit int) (*Prediction, error) {
	T := len(u)
	if T == 0 {
		return &Prediction{}, nil
	}
	if d != nil && len(d) < T {
		return nil, fmt.Errorf("hybrid: %d disturbance rows for %d steps", len(d), T)
	}
	x0 := m.InitialState(sim, u, d, y, nInit)
	t := m.Sys.newTraj(T)
	m.Sys.simulate(sim, x0, u, d, T, t)
	if t.fail == 0 {
		return nil, fmt.Errorf("hybrid: the physics simulation fails at its first step (initial state %v)", x0)
	}
	ny := m.Sys.ny
	p := &Prediction{X0: x0, Fail: t.fail, Y: make([][]float64, T), Phys: make([][]float64, T), Spread: make([][]float64, T)}
	buf := make([]float64, 3*T*ny)
	for k := 0; k < T; k++ {
		p.Y[k] = buf[k*ny : (k+1)*ny : (k+1)*ny]
		p.Phys[k] = buf[(T+k)*ny : (T+k+1)*ny : (T+k+1)*ny]
		p.Spread[k] = buf[(2*T+k)*ny : (2*T+k+1)*ny : (2*T+k+1)*ny]
		copy(p.Phys[k], t.Yh[k*ny:(k+1)*ny])
		copy(p.Y[k], p.Phys[k])
	}
	if m.Residual != nil && len(m.Residual.Members) > 0 {
		feat := m.Residual.Features(m.Sys, t, u, T)
		mean, spread := m.Residual.Predict(feat, T)
		for k := 0; k < T; k++ {
			for o := 0; o < ny; o++ {
				p.Y[k][o] += m.OutStd[o] * mean[k*ny+o]
				p.Spread[k][o] = m.OutStd[o] * spread[k*ny+o]
			}
		}
	}
	return p, nil
}
