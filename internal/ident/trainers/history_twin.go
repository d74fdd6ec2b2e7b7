package trainers

import (
	"fmt"

	"github.com/aml-project/aml/internal/model"
)

// What the digital twin (internal/twin/engine) needs from a loaded neural
// dynamic model that starts from a window's history — narx_mlp@1
// (aml.narx/1), whose state is the window's last outputs and inputs, and
// neural_state_space@1 (aml.nss/1), whose encoder maps the same rows to a
// state (every member's; the ensemble's mean is the prediction, its
// members' spread widens the tube). As for
// LinearTwin: the columns of its inputs (dataset controls) and outputs
// (dataset targets), a start made once from a measured window, and
// rollouts continuing it exactly as PredictBatch predicts a dataset window
// (the path the conformal widths were measured on).
//
// A new class plugs in by implementing HistoryTwin on its predictor —
// embedding historyCols with its simulator (a StartFrom and runners with
// a Continue, shaped like narx.Model's) gives all of it but Members — and
// naming its format in engine.TwinFormats and registry.TwinFormats.

// HistoryTwin is implemented by the predictors of narx_mlp@1 and
// neural_state_space@1.
type HistoryTwin interface {
	model.Predictor
	// LinearLayout returns the model's inputs (model input order: dataset
	// controls) and outputs (dataset target order) with their columns.
	LinearLayout() (inputs, outputs []HybridColumnRef)
	// StartHistory makes the start of a measured window from its H rows:
	// u [H][inputs] and y [H][outputs], both finite, in the orders of
	// LinearLayout.
	StartHistory(u, y [][]float64) (*HistoryStart, error)
	// NewHistoryRoller returns one goroutine's rollout buffers.
	NewHistoryRoller() HistoryRoller
	// Members is the size of the model's ensemble (1 without one).
	Members() int
	// WindowEstimator names how StartHistory estimates the state.
	WindowEstimator() string
}

// HistoryStart is a history-started model's state at the end of a
// measured window. It is immutable once made.
type HistoryStart struct {
	// States names the model's abstract states (none for NARX, whose
	// state is the window's rows) and Last their values at the window's
	// last row.
	States []string
	Last   []float64
	// Fitted is the model's output at the window's last row (the measured
	// one for NARX), LinearLayout's output order.
	Fitted []float64
	// Impl is the class's own start (*narx.Start, *nss.Start).
	Impl any
}

// HistoryRoller continues starts with its own buffers: one goroutine's.
type HistoryRoller interface {
	// Roll predicts the outputs over the steps of u ([T][inputs]) after
	// the window s was started from into y and spread ([T*outputs],
	// row-major, LinearLayout's output order; spread the ensemble's
	// standard deviation, 0 without one). It returns the first step whose
	// prediction is not finite (T when none); an error means the rollout
	// could not start at all. s is only read.
	Roll(s *HistoryStart, u [][]float64, y, spread []float64) (fail int, err error)
}

// AsHistoryTwin returns p as a HistoryTwin when it is a model of a class
// started from a window's history (narx_mlp@1, neural_state_space@1).
func AsHistoryTwin(p model.Predictor) (HistoryTwin, bool) {
	h, ok := p.(HistoryTwin)
	return h, ok
}

// historyModel is the simulator shape of a history-started neural model
// (narx.Model, nss.Ensemble): a start from a window's rows (model input and output
// order) and runners continuing it, one per goroutine, with their own
// buffers; the model is only read.
type historyModel[S any, R historyRunner[S]] interface {
	StartFrom(u, y [][]float64) (S, error)
	NewRunner() R
}

// historyRunner continues a start over inputs u into dst ([T*outputs],
// model output order), returning the first step that is not finite (T
// when none). A runner of an ensemble also implements spreadRunner.
type historyRunner[S any] interface {
	Continue(s S, u [][]float64, dst []float64) (int, error)
}

// spreadRunner is a runner of an ensemble: the members' mean into dst and
// their standard deviation into spread.
type spreadRunner[S any] interface {
	ContinueSpread(s S, u [][]float64, dst, spread []float64) (int, error)
}

// historyCols implements HistoryTwin (but Members and model.Predictor)
// for a model whose inputs and outputs are a linear predictor's columns:
// a new history-started class embeds it with its simulator and its
// estimator's name.
type historyCols[S any, R historyRunner[S]] struct {
	cols      *linearPredictor
	sim       historyModel[S, R] // only read
	estimator string
}

// LinearLayout returns the columns of the model's inputs and outputs.
func (h *historyCols[S, R]) LinearLayout() (inputs, outputs []HybridColumnRef) {
	return h.cols.LinearLayout()
}

// WindowEstimator names the window state estimator.
func (h *historyCols[S, R]) WindowEstimator() string { return h.estimator }

// StartHistory starts the model from the window's rows as PredictBatch
// does.
func (h *historyCols[S, R]) StartHistory(u, y [][]float64) (*HistoryStart, error) {
	c := h.cols
	H := len(u)
	if H == 0 || len(y) != H {
		return nil, fmt.Errorf("a window start needs as many input as output rows (%d, %d), at least one", H, len(y))
	}
	if err := c.checkRows("input", u, len(c.xIn)); err != nil {
		return nil, err
	}
	if err := c.checkRows("output", y, len(c.tgtOut)); err != nil {
		return nil, err
	}
	st, err := h.sim.StartFrom(u, c.toModel(y))
	if err != nil {
		return nil, err
	}
	return &HistoryStart{Fitted: append([]float64(nil), y[H-1]...), Impl: st}, nil
}

// NewHistoryRoller returns a roller with its own runner.
func (h *historyCols[S, R]) NewHistoryRoller() HistoryRoller {
	return &historyRoller[S, R]{h: h, r: h.sim.NewRunner()}
}

type historyRoller[S any, R historyRunner[S]] struct {
	h        *historyCols[S, R]
	r        R
	buf, spr []float64 // model output order
}

func (r *historyRoller[S, R]) Roll(s *HistoryStart, u [][]float64, y, spread []float64) (int, error) {
	c := r.h.cols
	T, ny := len(u), len(c.tgtOut)
	st, ok := s.Impl.(S)
	if !ok {
		return 0, fmt.Errorf("the start is not this model's")
	}
	if len(y) < T*ny || len(spread) < T*ny {
		return 0, fmt.Errorf("the output buffers hold %d and %d values, %d needed", len(y), len(spread), T*ny)
	}
	if err := c.checkRows("input", u, len(c.xIn)); err != nil {
		return 0, err
	}
	nOut := len(c.xOut)
	if cap(r.buf) < T*nOut {
		r.buf, r.spr = make([]float64, T*nOut), make([]float64, T*nOut)
	}
	r.buf, r.spr = r.buf[:T*nOut], r.spr[:T*nOut]
	var fail int
	var err error
	if e, ok := any(r.r).(spreadRunner[S]); ok {
		fail, err = e.ContinueSpread(st, u, r.buf, r.spr)
	} else {
		clear(r.spr)
		fail, err = r.r.Continue(st, u, r.buf)
	}
	if err != nil {
		return 0, err
	}
	for k := 0; k < T; k++ {
		for t, o := range c.tgtOut {
			y[k*ny+t], spread[k*ny+t] = r.buf[k*nOut+o], r.spr[k*nOut+o]
		}
	}
	return fail, nil
}

// narx_mlp@1: the window's last outputs and inputs are the state.

var _ HistoryTwin = (*narxPredictor)(nil)

// Members: a NARX model is one network.
func (p *narxPredictor) Members() int { return 1 }
