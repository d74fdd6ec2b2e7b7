package engine

import (
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/ident/hybrid"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/physics"
)

// dynamics is one model class as the twin runs it: a state estimate from
// a window's H rows and rollouts that continue from it. Every class
// predicts windows along the path its conformal widths were measured on
// (the predictor's PredictBatch), so the tube means what the evaluation
// measured.
type dynamics interface {
	// start estimates the state from the window's H rows: u controls and
	// d disturbances (nil without) with gaps held, y the targets with
	// gaps as NaN and yFilled with gaps held.
	start(u, d, y, yFilled [][]float64) (*dynStart, error)
	// newRoller returns one goroutine's rollout buffers.
	newRoller() roller
}

// dynStart is a window's start: immutable once made.
type dynStart struct {
	last    []float64 // states at the window's last row (Twin.states order)
	lastOut []float64 // model outputs at the last row (Twin.modelOuts order)
	lastY   []float64 // predicted targets at the last row (dataset target order)
	names   []string  // abstract states' names (Twin.hideStates)
	// histY is the class's prediction of the window's own target rows
	// ([H][targets], NaN where it predicts none): what the disturbance
	// estimator compares the measured rows with.
	histY [][]float64
	impl  any // the class's own start
}

// rollout is one rollout's result, overwritten by the roller's next call:
// T×targets Y (mean) and Spread (ensemble std, 0 without an ensemble),
// T×modelOuts Out, T×states X and the first failing step Fail (T none).
type rollout struct {
	Y, Spread, Out, X []float64
	Fail              int
}

type roller interface {
	// roll continues from s with controls u and disturbances d ([T] rows;
	// d nil without disturbances). An error means the rollout could not
	// start at all.
	roll(s *dynStart, u, d [][]float64) (*rollout, error)
}

// ---- aml.hybrid/1: physics + residual ensemble

type hybridDyn struct{ m *hybrid.Model }

func (h hybridDyn) start(u, d, y, _ [][]float64) (*dynStart, error) {
	sim, err := h.m.NewSim()
	if err != nil {
		return nil, err
	}
	st, err := h.m.StartFrom(sim, u, d, y, len(u))
	if err != nil {
		return nil, err
	}
	T := st.T
	return &dynStart{last: st.Last, lastOut: st.HistOut[T-1], lastY: st.Hist.Y[T-1], histY: st.Hist.Y, impl: st}, nil
}

func (h hybridDyn) newRoller() roller {
	sim, _ := h.m.NewSim() // parameters were accepted when the model loaded
	return &hybridRoller{m: h.m, sim: sim, r: h.m.NewRollout()}
}

type hybridRoller struct {
	m    *hybrid.Model
	sim  *physics.Sim
	r    *hybrid.Rollout
	out  rollout
	phys physRollout
}

func (h *hybridRoller) roll(s *dynStart, u, d [][]float64) (*rollout, error) {
	if err := h.m.Roll(h.sim, s.impl.(*hybrid.Start), u, d, h.r); err != nil {
		return nil, err
	}
	r := h.r
	h.out = rollout{Y: r.Y, Spread: r.Spread, Out: r.Out, X: r.X, Fail: r.Fail}
	return &h.out, nil
}

// physicsRoller is implemented by the rollers of the classes whose states
// are physical quantities (the hybrid): besides the model's own rollout
// they run the calibrated physics alone from a given state — the twin's
// measurement-consistent path for the quantities no target calibrates
// (plan.go, measuredStart).
type physicsRoller interface {
	// rollPhysics steps the physics from state x0 over the rows of u and d
	// (d nil without disturbances). The result is overwritten by the next
	// call.
	rollPhysics(x0 []float64, u, d [][]float64) *physRollout
}

// physRollout is a physics-only rollout: T×states X (the state at each
// step's start), T×modelOuts Out (the step's outputs: obs and guards),
// Next the state after the last step and Fail the first step that is not
// finite (T none; the rows from there on repeat the last good row).
type physRollout struct {
	X, Out, Next []float64
	Fail         int
	xn           []float64
}

func (h *hybridRoller) rollPhysics(x0 []float64, u, d [][]float64) *physRollout {
	sys := h.m.Sys
	nx, nout, T := sys.NumStates(), sys.NumModelOutputs(), len(u)
	p := &h.phys
	p.X, p.Out = growF(p.X, T*nx), growF(p.Out, T*nout)
	p.Next, p.xn = growF(p.Next, nx), growF(p.xn, nx)
	copy(p.Next, x0)
	p.Fail = T
	for k := 0; k < T; k++ {
		var dk []float64
		if d != nil {
			dk = d[k]
		}
		out := p.Out[k*nout : (k+1)*nout]
		err := h.sim.Step(p.Next, u[k], dk, sys.Dt, p.xn, out)
		if err == nil && !allFinite(p.Next) {
			err = fmt.Errorf("non-finite state")
		}
		if err != nil {
			p.Fail = k
			for kk := k; kk < T; kk++ {
				if k == 0 {
					fillNaN(p.X[kk*nx : (kk+1)*nx])
					fillNaN(p.Out[kk*nout : (kk+1)*nout])
					continue
				}
				copy(p.X[kk*nx:(kk+1)*nx], p.X[(k-1)*nx:k*nx])
				copy(p.Out[kk*nout:(kk+1)*nout], p.Out[(k-1)*nout:k*nout])
			}
			return p
		}
		copy(p.X[k*nx:(k+1)*nx], p.Next)
		p.Next, p.xn = p.xn, p.Next
	}
	return p
}

func growF(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}

func allFinite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

func fillNaN(v []float64) {
	for i := range v {
		v[i] = math.NaN()
	}
}

// ---- aml.arx/1 and aml.statespace/1: linear models

// linearDyn runs a linear model: no ensemble (spread 0), the targets are
// its model outputs, and its states (a state-space model's x1 … xn) are
// reported by EstimateState but are no trial quantities (they have no
// physical meaning a constraint could name).
type linearDyn struct {
	lt trainers.LinearTwin
	ny int
}

func (l linearDyn) start(u, _, _, yFilled [][]float64) (*dynStart, error) {
	s, err := l.lt.StartWindow(u, yFilled)
	if err != nil {
		return nil, err
	}
	return &dynStart{last: s.Last, lastOut: s.Fitted, lastY: s.Fitted, names: s.States, histY: s.Hist, impl: s}, nil
}

func (l linearDyn) newRoller() roller { return &linearRoller{l: l} }

type linearRoller struct {
	l   linearDyn
	out rollout
}

func (r *linearRoller) roll(s *dynStart, u, _ [][]float64) (*rollout, error) {
	T, ny := len(u), r.l.ny
	if cap(r.out.Y) < T*ny {
		r.out.Y, r.out.Spread = make([]float64, T*ny), make([]float64, T*ny)
	}
	r.out.Y, r.out.Spread = r.out.Y[:T*ny], r.out.Spread[:T*ny]
	if err := r.l.lt.Continue(s.impl.(*trainers.LinearStart), u, r.out.Y); err != nil {
		return nil, fmt.Errorf("%s: %w", r.l.lt.Format(), err)
	}
	r.out.Out, r.out.Fail = r.out.Y, T
	return &r.out, nil
}

// ---- history-started neural models: aml.narx/1, aml.nss/1 (trainers.HistoryTwin)

// neuralDyn runs a neural model started from the window's history: like a
// linear model its quantities are dataset columns and its states (if any)
// abstract; its ensemble (if any) reports its members' spread. A new
// class plugs in by implementing trainers.HistoryTwin.
type neuralDyn struct {
	ht trainers.HistoryTwin
	ny int
}

func (n neuralDyn) start(u, _, _, yFilled [][]float64) (*dynStart, error) {
	s, err := n.ht.StartHistory(u, yFilled)
	if err != nil {
		return nil, err
	}
	return &dynStart{last: s.Last, lastOut: s.Fitted, lastY: s.Fitted, names: s.States, impl: s}, nil
}

func (n neuralDyn) newRoller() roller { return &neuralRoller{n: n, r: n.ht.NewHistoryRoller()} }

type neuralRoller struct {
	n   neuralDyn
	r   trainers.HistoryRoller
	out rollout
}

func (r *neuralRoller) roll(s *dynStart, u, _ [][]float64) (*rollout, error) {
	T, ny := len(u), r.n.ny
	if cap(r.out.Y) < T*ny {
		r.out.Y, r.out.Spread = make([]float64, T*ny), make([]float64, T*ny)
	}
	r.out.Y, r.out.Spread = r.out.Y[:T*ny], r.out.Spread[:T*ny]
	fail, err := r.r.Roll(s.impl.(*trainers.HistoryStart), u, r.out.Y, r.out.Spread)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.n.ht.Format(), err)
	}
	r.out.Out, r.out.Fail = r.out.Y, fail
	return &r.out, nil
}
