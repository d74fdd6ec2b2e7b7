package engine

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/model"
)

// ---- static quality models: aml.static-response/1, aml.static-forest/1

// StaticFormats are the artifact formats of static quality models the twin
// runs (static_response@1, static_forest@1): models of a static_response
// dataset (one row per beat of the process settings → its quality).
var StaticFormats = []string{trainers.FormatStatic, trainers.FormatForest}

// StaticEstimator names a static model's "state estimate": the window's
// last row of inputs, nothing else (a static model has no state).
const StaticEstimator = "static-row/1"

// TubeMethodStatic documents the tube of a static model's trial.
const TubeMethodStatic = "mean ± conformal half-width W of the model's one-row prediction, the same at every step: each step is predicted from that step's inputs alone (steady state), the path W was calibrated on"

// staticDyn runs a static model: every horizon step's targets are the
// model's prediction from that step's inputs — the candidate's controls
// and every other input held at its last value in the window — through
// the predictor's PredictBatch, the path its conformal widths were
// measured on (one row in, one prediction out). It has no state and no
// ensemble (spread 0).
type staticDyn struct {
	p    model.Predictor
	nIn  int
	inOf []staticInput // per model input (manifest Inputs order)
	ny   int
}

// staticInput says where a static model's input comes from in a rollout:
// a control (u) or a held input (d), by index.
type staticInput struct {
	ctrl bool
	idx  int
}

// initStatic lays out a static model: its inputs that are dataset
// controls are the twin's controls, its other inputs (disturbances,
// features) are held at their last value, its targets are its outputs.
// The OOD envelope reads the input row (eval.OODFeaturesRow).
func (t *Twin) initStatic(p model.Predictor) error {
	man := t.man
	if !slices.Contains(StaticFormats, p.Format()) {
		return errf(CodeModelUnsupported, "format", "model %s is %s on a static dataset; the twin runs static models of %v", t.modelID, p.Format(), StaticFormats)
	}
	sd := staticDyn{p: p, nIn: len(man.Inputs), ny: len(man.Targets)}
	for _, n := range man.Inputs {
		col, ok := t.colOf[n]
		if !ok {
			return errf(CodeModelUnsupported, "inputs", "model %s has input %s without a dataset column", t.modelID, n)
		}
		t.oodCols = append(t.oodCols, col)
		if slices.Contains(man.Controls, n) {
			sd.inOf = append(sd.inOf, staticInput{true, len(t.ctrl)})
			t.ctrl = append(t.ctrl, qcol{n, col, math.NaN()})
		} else {
			sd.inOf = append(sd.inOf, staticInput{false, len(t.dist)})
			t.dist = append(t.dist, qcol{n, col, math.NaN()})
		}
	}
	if len(t.ctrl) == 0 {
		return errf(CodeModelUnsupported, "inputs", "static model %s has no control among its inputs: there is nothing to move", t.modelID)
	}
	for _, n := range man.Targets {
		col, ok := t.colOf[n]
		if !ok {
			return errf(CodeModelUnsupported, "outputs", "model %s has target %s without a dataset column", t.modelID, n)
		}
		t.outs = append(t.outs, qcol{n, col, math.NaN()})
		t.modelOuts = append(t.modelOuts, n)
	}
	t.dyn, t.estimator, t.hideStates, t.static = sd, StaticEstimator, true, true
	return nil
}

// isStatic says whether a manifest is a static dataset's.
func isStatic(man *dataset.Manifest) bool { return man.Kind == dataset.KindStatic }

// predict predicts the rows of u and d ([T][controls], [T][held inputs];
// d nil without held inputs) into y ([T*targets]) through x, a float32
// buffer of T rows of the model's inputs. It returns the first step whose
// input or prediction is not finite (T when none).
func (s staticDyn) predict(u, d [][]float64, x []float32, y []float64) (int, error) {
	T := len(u)
	fail := T
	for k := 0; k < T; k++ {
		for i, in := range s.inOf {
			v := math.NaN()
			if in.ctrl {
				v = u[k][in.idx]
			} else if d != nil && k < len(d) {
				v = d[k][in.idx]
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				fail = min(fail, k)
				v = 0
			}
			x[k*s.nIn+i] = float32(v)
		}
	}
	out, err := s.p.PredictBatch(context.Background(), x, nil, T)
	if err != nil {
		return 0, err
	}
	if len(out) != T*s.ny {
		return 0, fmt.Errorf("the model predicted %d values for %d rows of %d targets", len(out), T, s.ny)
	}
	for i, v := range out {
		y[i] = float64(v)
		if math.IsNaN(y[i]) || math.IsInf(y[i], 0) {
			fail = min(fail, i/s.ny)
		}
	}
	return fail, nil
}

// start predicts the window's own rows (histY: a declared unmeasured
// disturbance is estimated from their errors); a held input without any
// value in the window cannot be predicted from.
func (s staticDyn) start(u, d, _, _ [][]float64) (*dynStart, error) {
	H := len(u)
	y := make([]float64, H*s.ny)
	fail, err := s.predict(u, d, make([]float32, H*s.nIn), y)
	if err != nil {
		return nil, err
	}
	if fail < H {
		return nil, fmt.Errorf("the window's row %d has an input without a value: a static model predicts from every input", fail)
	}
	hist := make([][]float64, H)
	for k := range hist {
		hist[k] = y[k*s.ny : (k+1)*s.ny]
	}
	last := hist[H-1]
	return &dynStart{lastOut: last, lastY: last, histY: hist}, nil
}

func (s staticDyn) newRoller() roller { return &staticRoller{s: s} }

type staticRoller struct {
	s   staticDyn
	x   []float32
	out rollout
}

func (r *staticRoller) roll(_ *dynStart, u, d [][]float64) (*rollout, error) {
	T, ny := len(u), r.s.ny
	if cap(r.out.Y) < T*ny {
		r.out.Y, r.out.Spread = make([]float64, T*ny), make([]float64, T*ny)
	}
	if cap(r.x) < T*r.s.nIn {
		r.x = make([]float32, T*r.s.nIn)
	}
	r.out.Y, r.out.Spread, r.x = r.out.Y[:T*ny], r.out.Spread[:T*ny], r.x[:T*r.s.nIn]
	fail, err := r.s.predict(u, d, r.x, r.out.Y)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.s.p.Format(), err)
	}
	r.out.Out, r.out.Fail = r.out.Y, fail
	return &r.out, nil
}
