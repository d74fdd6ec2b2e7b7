package trainers

import (
	"math"

	"github.com/aml-project/aml/internal/ident/hybrid"
	"github.com/aml-project/aml/internal/model"
)

// What the digital twin (internal/twin/engine) needs from a loaded
// aml.hybrid/1 model beyond model.Predictor: the hybrid model itself and
// how its physics quantities are tied to the dataset's columns.

// HybridColumnRef ties one model quantity to a dataset column.
type HybridColumnRef struct {
	// Model is the physics name (control, disturbance, or the obs, guard
	// or state an output is).
	Model string
	// Col is the column's index in the dataset manifest's AllNodes, -1
	// when the quantity has no column (it then takes Fallback).
	Col int
	// Fallback is the value used where no column value exists: a
	// control's declared default, a disturbance's declared default or
	// training mean; NaN for controls and outputs with a column.
	Fallback float64
}

// HybridLayout is the column layout of a loaded hybrid model.
type HybridLayout struct {
	// Controls and Disturbances are in the physics model's order (the
	// order of hybrid.Model's u and d rows); Outputs in the dataset's
	// target order (the columns of the model's y rows).
	Controls, Disturbances, Outputs []HybridColumnRef
	// NInit is the run simulator's default number of measured rows for the
	// initial state (windows use all H history rows).
	NInit int
}

// HybridPredictor is implemented by the predictor of aml.hybrid/1.
type HybridPredictor interface {
	model.Predictor
	// Model is the hybrid model with the run prior weight.
	Model() *hybrid.Model
	// WindowModel is the model PredictBatch uses: the window prior weight
	// (hybrid.Model.ForWindows).
	WindowModel() *hybrid.Model
	// Layout is the column layout.
	Layout() HybridLayout
}

// AsHybrid returns p as a HybridPredictor when it is an aml.hybrid/1
// model.
func AsHybrid(p model.Predictor) (HybridPredictor, bool) {
	h, ok := p.(HybridPredictor)
	return h, ok
}

// WindowModel returns the model windows are predicted with.
func (p *hybridPredictor) WindowModel() *hybrid.Model { return p.win }

// Layout returns the column layout (a fresh copy).
func (p *hybridPredictor) Layout() HybridLayout {
	c := p.cols
	pm := p.m.Sys.Model
	l := HybridLayout{NInit: p.nInit}
	for q, d := range pm.Controls {
		l.Controls = append(l.Controls, HybridColumnRef{Model: d.Name, Col: c.ctrlX[q], Fallback: c.ctrlFB[q]})
	}
	for q, d := range pm.Disturbances {
		l.Disturbances = append(l.Disturbances, HybridColumnRef{Model: d.Name, Col: c.distX[q], Fallback: c.distFB[q]})
	}
	for o, n := range c.outNames {
		l.Outputs = append(l.Outputs, HybridColumnRef{Model: n, Col: c.outX[o], Fallback: math.NaN()})
	}
	return l
}
