package engine

import (
	"math"

	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/disturb"
)

// Unmeasured disturbances (scene schema 2, contract.UnmeasuredDisturbance).
//
// A declared disturbance is an additive output disturbance b on one
// target: y[k] = ŷ[k] + b[k] + v[k], ŷ the model's prediction (every class
// predicts the window's own rows: dynStart.histY), v the prediction error
// the model has without the disturbance (variance R) and b either a
// constant bias or a random walk (b[k+1] = b[k] + w, Var w = q). A scalar
// Kalman filter per target (internal/twin/disturb: outliers gated, steps
// taken) from the prior N(0, priorSd²), solved jointly with the model's
// own state estimate (see disturbances), gives b̂ at the window's last
// row; it is carried over the horizon: the prediction is ŷ + b̂ at every
// step, with variance P + (k+1)·q at horizon step k.
//
// This lives at the level of the start and the rollout, not in a model
// class: it needs only the class's prediction of the window, so it applies
// to hybrid, state-space and ARX models alike.

// DisturbanceEstimate is one declared disturbance's estimate from a
// snapshot window, reported in a trial's detail.
type DisturbanceEstimate struct {
	ID     string `json:"id"`
	Target string `json:"target"`
	Model  string `json:"model"`
	// Estimate is b̂ at the window's last row and SD its standard
	// deviation (target unit).
	Estimate float64 `json:"estimate"`
	SD       float64 `json:"sd"`
	// Rows is the number of window rows the filter used, Rejected the
	// rows its innovation gate left out.
	Rows     int `json:"rows"`
	Rejected int `json:"rejected"`
	// Limit is the scene's maxAbs (omitted: none); beyond it the trial is
	// out of distribution (OOD_DISTURBANCE).
	Limit *float64 `json:"limit,omitempty"`
}

// distEst is a plan's estimate of target o's disturbance.
type distEst struct {
	decl       *contract.UnmeasuredDisturbance
	o          int
	b, P, q, R float64
	rows, rej  int
}

// varAt is the disturbance's variance at horizon step k.
func (d *distEst) varAt(k int) float64 { return d.P + float64(k+1)*d.q }

// disturbances estimates the scene's declared disturbances from the
// window of s jointly with the model's state, and returns them (nil when
// the scene declares none: the plan is exactly as without them) with the
// start the rollouts continue from. zq converts a conformal half-width to
// a standard deviation.
//
// Every class's state estimate fits the window's measured targets, so it
// takes up part of an output offset (a hybrid's initial-state fit moves a
// state, a state-space model's window estimate a slow mode). The errors
// of the plain start are r0; a start from the targets shifted by a probe
// δ gives the share alpha[k] of an offset the state absorbs at each row;
// disturb.Joint solves for the disturbance b, and the rollouts continue
// from the start estimated from the targets less b, with b added to the
// prediction: the state carries what it absorbs, b the rest.
func (t *Twin) disturbances(scene *contract.SceneContract, s *snapStart, zq float64) ([]*distEst, *dynStart, error) {
	if len(scene.UnmeasuredDisturbances) == 0 {
		return nil, s.start, nil
	}
	out := make([]*distEst, len(t.outs))
	hist := s.start.histY
	H := len(s.yRaw)
	shift := func(b []float64) (*dynStart, error) {
		y := make([][]float64, H)
		yf := make([][]float64, H)
		for k := range y {
			y[k] = append([]float64(nil), s.yRaw[k]...)
			yf[k] = append([]float64(nil), s.inYf[k]...)
			for o, v := range b {
				y[k][o] -= v
				yf[k][o] -= v
			}
		}
		st, err := t.dyn.start(s.inU, s.inD, y, yf)
		if err != nil {
			return nil, errf(CodeWindowInvalid, "window", "the disturbance-corrected start fails: %v", err)
		}
		if st.histY == nil || len(st.histY) != H {
			return nil, errf(CodeSceneMismatch, "unmeasuredDisturbances", "model %s does not predict its window's rows: a disturbance cannot be estimated", t.modelID)
		}
		return st, nil
	}
	for i := range scene.UnmeasuredDisturbances {
		d := &scene.UnmeasuredDisturbances[i]
		o := -1
		for j, c := range t.outs {
			if c.name == d.Target {
				o = j
			}
		}
		if o < 0 {
			return nil, nil, errf(CodeSceneMismatch, "unmeasuredDisturbances", "disturbance %s acts on %s, which model %s does not predict", d.ID, d.Target, t.modelID)
		}
		if hist == nil {
			return nil, nil, errf(CodeSceneMismatch, "unmeasuredDisturbances", "model %s does not predict its window's rows: disturbance %s cannot be estimated", t.modelID, d.ID)
		}
		R := 0.0
		if d.MeasurementSD != nil {
			R = *d.MeasurementSD * *d.MeasurementSD
		} else {
			sd := t.confWidth(0, o) / zq
			R = sd * sd
		}
		prior, q := d.PriorSD*d.PriorSD, d.ProcessVar()
		r0 := make([]float64, H)
		for k := range r0 {
			r0[k] = s.yRaw[k][o] - hist[k][o]
		}
		mask := disturb.Mask(r0, prior, q, R)
		probe := make([]float64, len(t.outs))
		probe[o] = d.PriorSD
		ps, err := shift(probe)
		if err != nil {
			return nil, nil, err
		}
		alpha := make([]float64, H)
		for k := range alpha {
			alpha[k] = (hist[k][o] - ps.histY[k][o]) / d.PriorSD
			if math.IsNaN(alpha[k]) || math.IsInf(alpha[k], 0) {
				alpha[k] = 0
			}
		}
		de := &distEst{decl: d, o: o, q: q, R: R}
		de.b, de.P = disturb.Joint(r0, alpha, mask, prior, q, R)
		for _, m := range mask {
			if m {
				de.rows++
			}
		}
		for k, m := range mask {
			if !m && !math.IsNaN(r0[k]) {
				de.rej++
			}
		}
		out[o] = de
	}
	b := make([]float64, len(t.outs))
	for o, d := range out {
		if d != nil {
			b[o] = d.b
		}
	}
	st, err := shift(b)
	if err != nil {
		return nil, nil, err
	}
	return out, st, nil
}

// report lists the plan's disturbance estimates (nil without).
func (p *plan) disturbanceReport() []DisturbanceEstimate {
	var out []DisturbanceEstimate
	for _, d := range p.dist {
		if d == nil {
			continue
		}
		out = append(out, DisturbanceEstimate{ID: d.decl.ID, Target: d.decl.Target, Model: string(d.decl.Model),
			Estimate: d.b, SD: math.Sqrt(d.P), Rows: d.rows, Rejected: d.rej, Limit: d.decl.MaxAbs})
	}
	return out
}

// distBeyond names the first disturbance estimate beyond its scene limit.
func (p *plan) distBeyond() bool {
	for _, d := range p.dist {
		if d != nil && math.Abs(d.b) > d.decl.Limit() {
			return true
		}
	}
	return false
}

// oodHistory is the window's rows as the OOD envelope sees them: with a
// declared disturbance its estimate is taken off the target's column, so
// the envelope judges the process the model knows, not the drift the
// estimator explains; without one the rows themselves.
func (p *plan) oodHistory() [][]float64 {
	if p.dist == nil {
		return p.s.rows
	}
	rows := make([][]float64, len(p.s.rows))
	for k, r := range p.s.rows {
		rows[k] = append([]float64(nil), r...)
		for o, d := range p.dist {
			if d != nil {
				rows[k][p.t.outs[o].col] -= d.b
			}
		}
	}
	return rows
}
