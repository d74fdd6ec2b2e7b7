package hybrid

import (
	"fmt"
	"math"
	"strings"

	"github.com/aml-project/aml/internal/physics"
)

// Segment is one NaN-free stretch of a run: per step the model's controls
// (U, [Model.ControlNames] order), its disturbances (D: nil for the
// declared defaults, else one row per step in [Model.DisturbanceNames]
// order) and the measured outputs (Y, [System.Outputs] order). Start is the
// segment's first step in its run: a segment with Start 0 begins at the
// run's start, where the initial state is the process's initial condition.
type Segment struct {
	Run   string
	Start int
	U     [][]float64
	D     [][]float64
	Y     [][]float64
}

// Len is the number of steps.
func (s *Segment) Len() int { return len(s.U) }

func (s *Segment) d(k int) []float64 {
	if s.D == nil {
		return nil
	}
	return s.D[k]
}

// System is a physics model, the quantities of it that are measured and the
// step length: what calibration, the residual network and prediction share.
type System struct {
	Model *physics.Model
	// Outputs are the measured model quantities (obs, guard or state
	// names), the columns of every Segment.Y.
	Outputs []string
	// Dt is the step length in seconds (the dataset beat).
	Dt float64

	nx, nu, nd, nout, ny int
	outIdx               []int // per output: index in Step's out, or -1
	stIdx                []int // per output: state index, or -1
	// ObservedBy is, per state, the output column that measures it
	// directly (an output that is the state itself or an obs/guard whose
	// expression is just the state's name), or -1.
	ObservedBy []int
	// Lo and Hi are the states' declared ranges (±Inf without one).
	Lo, Hi []float64
}

// NewSystem checks outputs against the model and finds the directly
// observed states.
func NewSystem(m *physics.Model, outputs []string, dt float64) (*System, error) {
	if m == nil {
		return nil, fmt.Errorf("hybrid: no physics model")
	}
	if len(outputs) == 0 {
		return nil, fmt.Errorf("hybrid: no measured outputs")
	}
	if m.FixedDt > 0 {
		if math.Abs(dt-m.FixedDt) > 1e-9*m.FixedDt {
			return nil, fmt.Errorf("hybrid: model %s declares dt %g s, the data's step is %g s", m.Name, m.FixedDt, dt)
		}
	}
	if !(dt > 0) || math.IsInf(dt, 0) {
		return nil, fmt.Errorf("hybrid: step %g s must be positive", dt)
	}
	s := &System{Model: m, Outputs: append([]string(nil), outputs...), Dt: dt,
		nx: len(m.States), nu: len(m.Controls), nd: len(m.Disturbances), nout: len(m.Obs) + len(m.Guards), ny: len(outputs)}
	outN := map[string]int{}
	for i, n := range m.OutputNames() {
		outN[n] = i
	}
	stN := map[string]int{}
	for i, n := range m.StateNames() {
		stN[n] = i
	}
	s.ObservedBy = make([]int, s.nx)
	for i := range s.ObservedBy {
		s.ObservedBy[i] = -1
	}
	exprOf := map[string]string{}
	for _, d := range append(append([]physics.Decl(nil), m.Obs...), m.Guards...) {
		exprOf[d.Name] = strings.TrimSpace(d.Expr)
	}
	seen := map[string]bool{}
	for o, n := range outputs {
		if seen[n] {
			return nil, fmt.Errorf("hybrid: output %s listed twice", n)
		}
		seen[n] = true
		if i, ok := outN[n]; ok {
			s.outIdx = append(s.outIdx, i)
			s.stIdx = append(s.stIdx, -1)
			if j, ok := stN[exprOf[n]]; ok && s.ObservedBy[j] < 0 {
				s.ObservedBy[j] = o
			}
			continue
		}
		if j, ok := stN[n]; ok {
			s.outIdx = append(s.outIdx, -1)
			s.stIdx = append(s.stIdx, j)
			if s.ObservedBy[j] < 0 {
				s.ObservedBy[j] = o
			}
			continue
		}
		return nil, fmt.Errorf("hybrid: %s is not an obs, guard or state of model %s (outputs %v, states %v)", n, m.Name, m.OutputNames(), m.StateNames())
	}
	s.Lo, s.Hi = make([]float64, s.nx), make([]float64, s.nx)
	for j, d := range m.States {
		s.Lo[j], s.Hi[j] = d.Lo, d.Hi
		if !d.HasRange {
			s.Lo[j], s.Hi[j] = math.Inf(-1), math.Inf(1)
		}
	}
	return s, nil
}

// NumStates, NumControls, NumModelOutputs and NumOutputs are the sizes of
// the state, control, model output (obs and guards) and measured output
// vectors.
func (s *System) NumStates() int       { return s.nx }
func (s *System) NumControls() int     { return s.nu }
func (s *System) NumModelOutputs() int { return s.nout }
func (s *System) NumOutputs() int      { return s.ny }

// CheckSegment checks a segment's shapes.
func (s *System) CheckSegment(g *Segment) error {
	if len(g.Y) != len(g.U) {
		return fmt.Errorf("segment %s@%d: %d input rows, %d output rows", g.Run, g.Start, len(g.U), len(g.Y))
	}
	if g.D != nil && len(g.D) != len(g.U) {
		return fmt.Errorf("segment %s@%d: %d disturbance rows, want %d", g.Run, g.Start, len(g.D), len(g.U))
	}
	for k := range g.U {
		if len(g.U[k]) != s.nu || len(g.Y[k]) != s.ny || (g.D != nil && g.D[k] != nil && len(g.D[k]) != s.nd) {
			return fmt.Errorf("segment %s@%d step %d: row widths u %d y %d, want %d and %d", g.Run, g.Start, k, len(g.U[k]), len(g.Y[k]), s.nu, s.ny)
		}
	}
	return nil
}

// traj is a simulated trajectory: per step k the state at the step's
// start X[k·nx:], the model outputs O[k·nout:] (obs then guards, computed
// from X[k]) and the measured quantities Yh[k·ny:].
type traj struct {
	T         int
	X, O, Yh  []float64
	fail      int // first step whose Step failed (rows from there on are held), or T
	xn, xc, o []float64
}

func (s *System) newTraj(T int) *traj {
	return &traj{T: T, X: make([]float64, T*s.nx), O: make([]float64, T*s.nout), Yh: make([]float64, T*s.ny),
		xn: make([]float64, s.nx), xc: make([]float64, s.nx), o: make([]float64, s.nout)}
}

func (t *traj) resize(s *System, T int) {
	if cap(t.X) < T*s.nx || cap(t.O) < T*s.nout || cap(t.Yh) < T*s.ny {
		*t = *s.newTraj(T)
		return
	}
	t.T = T
	t.X, t.O, t.Yh = t.X[:T*s.nx], t.O[:T*s.nout], t.Yh[:T*s.ny]
}

// simulate runs sim (its parameters already set) from x0 over the first T
// steps of u/d (d may be nil: defaults). When a step fails (non-finite), the
// rows from that step on repeat the last good row and fail is that step.
// This is the one update rule of prediction, training and evaluation:
// physics.Sim.Step, with y_k = h(x_k, u_k, d_k).
func (s *System) simulate(sim *physics.Sim, x0 []float64, u, d [][]float64, T int, t *traj) {
	t.resize(s, T)
	t.fail = T
	copy(t.xc, x0)
	nx, nout, ny := s.nx, s.nout, s.ny
	for k := 0; k < T; k++ {
		var dk []float64
		if d != nil {
			dk = d[k]
		}
		err := sim.Step(t.xc, u[k], dk, s.Dt, t.xn, t.o)
		if err == nil {
			for _, v := range t.xc {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					err = fmt.Errorf("non-finite state")
					break
				}
			}
		}
		if err != nil {
			t.fail = k
			if k == 0 {
				for _, b := range [][]float64{t.X, t.O, t.Yh} {
					for i := range b {
						b[i] = math.NaN()
					}
				}
				return
			}
			for kk := k; kk < T; kk++ {
				copy(t.X[kk*nx:(kk+1)*nx], t.X[(k-1)*nx:k*nx])
				copy(t.O[kk*nout:(kk+1)*nout], t.O[(k-1)*nout:k*nout])
				copy(t.Yh[kk*ny:(kk+1)*ny], t.Yh[(k-1)*ny:k*ny])
			}
			return
		}
		copy(t.X[k*nx:(k+1)*nx], t.xc)
		copy(t.O[k*nout:(k+1)*nout], t.o)
		for o := 0; o < ny; o++ {
			if i := s.outIdx[o]; i >= 0 {
				t.Yh[k*ny+o] = t.o[i]
			} else {
				t.Yh[k*ny+o] = t.xc[s.stIdx[o]]
			}
		}
		t.xc, t.xn = t.xn, t.xc
	}
}

// baseInit is the initial state of a segment before estimation: the init
// clauses (with the sim's parameters and the first controls and
// disturbances), the directly observed states taken from the first
// measured row where it is finite.
func (s *System) baseInit(sim *physics.Sim, u0, d0, y0 []float64) []float64 {
	x := sim.Init(nil, u0, d0)
	for j, o := range s.ObservedBy {
		if o >= 0 && y0 != nil && finite(y0[o]) {
			x[j] = y0[o]
		}
	}
	return x
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
