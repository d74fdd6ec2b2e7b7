package trainers

import (
	"fmt"
	"math"
	"strconv"

	"github.com/aml-project/aml/internal/model"
)

// What the digital twin (internal/twin/engine) needs from a loaded
// aml.arx/1 or aml.statespace/1 model beyond model.Predictor: the columns
// of its inputs and outputs and a rollout that continues from a measured
// window exactly as PredictBatch predicts a dataset window (the path the
// conformal widths were measured on).

// LinearTwin is implemented by the predictors of one_step@1 (aml.arx/1)
// and linear_state_space@1 (aml.statespace/1).
type LinearTwin interface {
	model.Predictor
	// LinearLayout returns the model's inputs (model input order: dataset
	// controls) and outputs (dataset target order) with their columns.
	LinearLayout() (inputs, outputs []HybridColumnRef)
	// StartWindow estimates the state from the H rows of a measured
	// window: u [H][inputs] and y [H][outputs], both finite, in the orders
	// of LinearLayout.
	StartWindow(u, y [][]float64) (*LinearStart, error)
	// Continue predicts the outputs over the steps of u ([T][inputs],
	// finite) after the window s was started from, into dst ([T*outputs],
	// row-major, LinearLayout's output order). s is only read.
	Continue(s *LinearStart, u [][]float64, dst []float64) error
	// WindowEstimator names how StartWindow estimates the state.
	WindowEstimator() string
}

// LinearStart is a linear model's state at the end of a measured window.
// It is immutable once made.
type LinearStart struct {
	// States names the model's states (x1 … xn for a state-space model,
	// none for ARX, whose state is the window's history itself) and Last
	// their values at the window's last row (scaled coordinates).
	States []string
	Last   []float64
	// Fitted is the model's output at the window's last row (the measured
	// one for ARX, whose history rows are given), LinearLayout's order.
	Fitted []float64
	// Hist is the model's prediction of the window's own target rows
	// ([H][targets], LinearLayout's order; NaN where the model does not
	// predict a row: an ARX model's first rows, which initialise it): a
	// state-space model's output along the estimated state, an ARX
	// model's free run from the window's first rows. The twin's
	// disturbance estimator compares it with the measured rows.
	Hist       [][]float64
	next       []float64   // state-space: the state after the last row
	uWin, yWin [][]float64 // ARX: the window's rows in model order (state space with delays: uWin)
}

// AsLinearTwin returns p as a LinearTwin when it is an ARX or state-space
// model.
func AsLinearTwin(p model.Predictor) (LinearTwin, bool) {
	l, ok := p.(LinearTwin)
	return l, ok
}

// LinearLayout returns the columns of the model's inputs and outputs.
func (p *linearPredictor) LinearLayout() (inputs, outputs []HybridColumnRef) {
	for i := range p.xIn {
		inputs = append(inputs, HybridColumnRef{Col: p.xIn[i], Fallback: math.NaN()})
	}
	for _, o := range p.tgtOut {
		outputs = append(outputs, HybridColumnRef{Col: p.xOut[o], Fallback: math.NaN()})
	}
	return inputs, outputs
}

// toModel reorders rows of dataset target order into model output order.
func (p *linearPredictor) toModel(y [][]float64) [][]float64 {
	out := make([][]float64, len(y))
	for k, row := range y {
		out[k] = make([]float64, len(p.xOut))
		for t, o := range p.tgtOut {
			out[k][o] = row[t]
		}
	}
	return out
}

func (p *linearPredictor) checkRows(name string, x [][]float64, w int) error {
	for k, row := range x {
		if len(row) != w {
			return fmt.Errorf("%s row %d has %d values, the model has %d", name, k, len(row), w)
		}
		if !linFiniteRow(row) {
			return fmt.Errorf("%s row %d is not finite", name, k)
		}
	}
	return nil
}

// StartWindow estimates the state from a window's rows. State space: the
// initial state of the window's first row is estimated from all its rows
// as PredictBatch does (the MAP estimate under the training-state prior,
// or least squares when the model was trained with windowX0 ls) and
// propagated to the window's end; with the prior this is the Kalman
// filter's estimate at the last row for output noise NoiseVar and no
// process noise. ARX: the window's rows are the state.
func (p *linearPredictor) StartWindow(u, y [][]float64) (*LinearStart, error) {
	if p.trend != nil {
		return nil, fmt.Errorf("the twin does not run a detrended model yet (detrend %s): train it with detrend none", p.trend.Method)
	}
	H := len(u)
	if H == 0 || len(y) != H {
		return nil, fmt.Errorf("a window start needs as many input as output rows (%d, %d), at least one", H, len(y))
	}
	if err := p.checkRows("input", u, len(p.xIn)); err != nil {
		return nil, err
	}
	if err := p.checkRows("output", y, len(p.xOut)); err != nil {
		return nil, err
	}
	ym := p.toModel(y)
	s := &LinearStart{Fitted: make([]float64, len(p.tgtOut))}
	if p.ss != nil {
		uw := delayInputs(u, p.delays)
		x0 := p.ss.EstimateX0(ym, uw, H)
		if p.windowLS {
			x0 = p.ss.EstimateX0LS(ym, uw, H)
		}
		yh, xs := p.ss.SimulateStates(uw, x0)
		if p.delays != nil {
			s.uWin = u // the delayed inputs of the continuation reach back into the window
		}
		s.Last, s.next = append([]float64(nil), xs[H-1]...), append([]float64(nil), xs[H]...)
		for j := range s.Last {
			s.States = append(s.States, "x"+strconv.Itoa(j+1))
		}
		for t, o := range p.tgtOut {
			s.Fitted[t] = yh[H-1][o]
		}
		s.Hist = make([][]float64, H)
		for k := range s.Hist {
			s.Hist[k] = make([]float64, len(p.tgtOut))
			for t, o := range p.tgtOut {
				s.Hist[k][t] = yh[k][o]
			}
		}
		for _, v := range s.next {
			if !hybFinite(v) {
				return nil, fmt.Errorf("the state estimated from the window is not finite")
			}
		}
		return s, nil
	}
	s.uWin, s.yWin = u, ym
	copy(s.Fitted, y[H-1])
	s.Hist = make([][]float64, H)
	n0 := min(H, max(1, p.arx.Orders.MaxLag()))
	sim := p.simulate(u, ym, n0)
	for k := range s.Hist {
		s.Hist[k] = make([]float64, len(p.tgtOut))
		for t, o := range p.tgtOut {
			s.Hist[k][t] = math.NaN()
			if k >= n0 && k < len(sim) {
				s.Hist[k][t] = sim[k][o]
			}
		}
	}
	return s, nil
}

// WindowEstimator names the window state estimator: statespace-kalman/1
// (the prior's MAP initial state propagated: the Kalman filter without
// process noise), statespace-x0ls/1 (least-squares initial state) or
// arx-history/1 (the window's rows are the state).
func (p *linearPredictor) WindowEstimator() string {
	switch {
	case p.ss == nil:
		return "arx-history/1"
	case p.windowLS:
		return "statespace-x0ls/1"
	}
	return "statespace-kalman/1"
}

// Continue predicts the steps after the window.
func (p *linearPredictor) Continue(s *LinearStart, u [][]float64, dst []float64) error {
	T, ny := len(u), len(p.tgtOut)
	if T == 0 {
		return fmt.Errorf("a rollout needs at least one step")
	}
	if len(dst) < T*ny {
		return fmt.Errorf("the output buffer holds %d values, %d needed", len(dst), T*ny)
	}
	if err := p.checkRows("input", u, len(p.xIn)); err != nil {
		return err
	}
	var sim [][]float64
	off := 0
	if p.ss != nil {
		uc := u
		if p.delays != nil {
			// delay the window's inputs and the continuation's together, as
			// PredictBatch delays the history and future rows of a window
			all := make([][]float64, 0, len(s.uWin)+T)
			uc = delayInputs(append(append(all, s.uWin...), u...), p.delays)[len(s.uWin):]
		}
		sim, _ = p.ss.SimulateStates(uc, s.next)
	} else {
		all := make([][]float64, 0, len(s.uWin)+T)
		all = append(append(all, s.uWin...), u...)
		sim, off = p.simulate(all, s.yWin, len(s.yWin)), len(s.uWin)
	}
	for k := 0; k < T; k++ {
		row := sim[off+k]
		for t, o := range p.tgtOut {
			v := row[o]
			if !hybFinite(v) {
				return fmt.Errorf("the prediction is not finite at horizon step %d", k)
			}
			dst[k*ny+t] = v
		}
	}
	return nil
}
