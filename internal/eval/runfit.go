package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/analysis"
	"github.com/aml-project/aml/internal/model"
)

// Validation view: how well a model reproduces one run, the figure a
// control engineer compares models by (MATLAB's compare): the fit
//
//	fit % = 100 · (1 − ‖y − ŷ‖ / ‖y − ȳ‖)
//
// per target, of the free run (the model simulated from the run's first
// nInit rows of each NaN-free segment, re-initialised after every gap) and
// of the k-step-ahead prediction (k = the dataset's horizon F: from every
// window of H measured rows, the prediction F steps later with the run's
// own controls). 100 % is a perfect fit; 0 % is no better than the run's
// mean; a fit can be negative.

// TargetFit is one target's fit on a run.
type TargetFit struct {
	Target string  `json:"target"`
	FitPct float64 `json:"fitPct"`
	RMSE   float64 `json:"rmse"`
	// Samples is the number of values compared.
	Samples int `json:"samples"`
}

// MarshalJSON writes a non-finite fit or RMSE (no samples) as null.
func (t TargetFit) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Target  string `json:"target"`
		FitPct  jf     `json:"fitPct"`
		RMSE    jf     `json:"rmse"`
		Samples int    `json:"samples"`
	}{t.Target, jf(t.FitPct), jf(t.RMSE), t.Samples})
}

// RunFit is a model's validation view on one run.
type RunFit struct {
	RunID string `json:"runId"`
	// FreeRun per target (empty when the model cannot simulate a run);
	// Segments free-run segments were simulated, Skipped were shorter than
	// nInit+1 rows.
	FreeRun  []TargetFit `json:"freeRun"`
	Segments int         `json:"segments"`
	Skipped  int         `json:"skipped"`
	// KStep per target, K steps ahead.
	KStep []TargetFit `json:"kStep"`
	K     int         `json:"k"`
	// Measured and Simulated are the run's targets and the free run's
	// prediction per grid step ([target][step], NaN where not simulated),
	// StartUs (epoch µs) and BeatUs (µs) the grid: the series a plot
	// overlays (NaN is written as null).
	Measured  [][]float64 `json:"-"`
	Simulated [][]float64 `json:"-"`
	StartUs   int64       `json:"startUs"`
	BeatUs    int64       `json:"beatUs"`
	// Residuals is the analysis of the one-step-ahead residuals (measured
	// − predicted one step ahead) per target: whiteness and independence
	// from each control, at 99 % (internal/ident/analysis).
	Residuals []ResidualView `json:"residuals,omitempty"`
	// Steps are the model's step responses from the run's first operating
	// point, per target × control, and Gains the gain matrix [target][control].
	Steps []StepView  `json:"steps,omitempty"`
	Gains [][]float64 `json:"-"`
}

// ResidualView is one target's residual analysis.
type ResidualView struct {
	Target string `json:"target"`
	N      int    `json:"n"`
	// AutoOutside is the share of autocorrelation lags 1..MaxLag outside
	// the 99 % bound; White says the residuals pass as white.
	AutoOutside float64 `json:"autoOutside"`
	White       bool    `json:"white"`
	MaxLag      int     `json:"maxLag"`
	// CrossOutside[i] is the share of cross-correlation lags with control i
	// outside the bound; Independent[i] says they pass.
	CrossOutside []float64 `json:"crossOutside"`
	Independent  []bool    `json:"independent"`
}

// StepView is one control → target step response.
type StepView struct {
	Target  string `json:"target"`
	Control string `json:"control"`
	// Gain per unit step; DeadTime, TimeConstant and SettlingTime in
	// seconds (null when there is no response).
	Gain         float64 `json:"-"`
	DeadTime     float64 `json:"-"`
	TimeConstant float64 `json:"-"`
	SettlingTime float64 `json:"-"`
}

// MarshalJSON writes undefined figures as null.
func (v StepView) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Target       string `json:"target"`
		Control      string `json:"control"`
		Gain         jf     `json:"gain"`
		DeadTime     jf     `json:"deadTimeSec"`
		TimeConstant jf     `json:"timeConstantSec"`
		SettlingTime jf     `json:"settlingTimeSec"`
	}{v.Target, v.Control, jf(v.Gain), jf(v.DeadTime), jf(v.TimeConstant), jf(v.SettlingTime)})
}

// FitRun computes the validation view of predictor p (of dataset manifest
// man) on run grid g (dataset.BuildServeGrid with the dataset's spec).
// nInit ≤ 0 means the dataset's history length H.
func FitRun(ctx context.Context, p model.Predictor, man *dataset.Manifest, g *dataset.ServeGrid, nInit int) (*RunFit, error) {
	if man.Kind != dataset.KindDynamic {
		return nil, fmt.Errorf("a run fit needs a dynamic dataset")
	}
	d := man.Dims()
	nAll, nT, H, F := d.NAll, d.YCols, d.H, d.F
	if nInit <= 0 {
		nInit = H
	}
	col := map[string]int{}
	for j, n := range g.Nodes {
		col[n] = j
	}
	ci, ti := make([]int, len(man.Controls)), make([]int, nT)
	for i, c := range man.Controls {
		j, ok := col[c]
		if !ok {
			return nil, fmt.Errorf("the run grid has no column %s", c)
		}
		ci[i] = j
	}
	for k, t := range man.Targets {
		j, ok := col[t]
		if !ok {
			return nil, fmt.Errorf("the run grid has no column %s", t)
		}
		ti[k] = j
	}
	val := func(step, j int) float64 { return float64(g.Vals[step*nAll+j]) }
	r := &RunFit{RunID: g.RunID, K: F, StartUs: g.StartUs, BeatUs: g.BeatUs, Measured: make([][]float64, nT), Simulated: make([][]float64, nT)}
	for k := range r.Measured {
		r.Measured[k], r.Simulated[k] = make([]float64, g.Steps), make([]float64, g.Steps)
		for s := 0; s < g.Steps; s++ {
			r.Measured[k][s], r.Simulated[k][s] = val(s, ti[k]), math.NaN()
		}
	}
	rowOK := make([]bool, g.Steps)
	for s := range rowOK {
		ok := true
		for _, j := range append(append([]int{}, ci...), ti...) {
			ok = ok && !math.IsNaN(val(s, j))
		}
		rowOK[s] = ok
	}
	// free run over every NaN-free segment
	if sim, ok := p.(RunSimulator); ok {
		for lo := 0; lo < g.Steps; {
			if !rowOK[lo] {
				lo++
				continue
			}
			hi := lo
			for hi < g.Steps && rowOK[hi] {
				hi++
			}
			if hi-lo < nInit+1 {
				r.Skipped++
				lo = hi
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			in, out := make([][]float64, hi-lo), make([][]float64, hi-lo)
			for s := lo; s < hi; s++ {
				in[s-lo], out[s-lo] = make([]float64, len(ci)), make([]float64, nT)
				for i, j := range ci {
					in[s-lo][i] = val(s, j)
				}
				for k, j := range ti {
					out[s-lo][k] = val(s, j)
				}
			}
			pred, err := sim.SimulateRun(in, out, nInit)
			if err != nil {
				return nil, fmt.Errorf("free run of rows %d…%d: %w", lo, hi-1, err)
			}
			for s := nInit; s < len(pred) && s < hi-lo; s++ { // the initialising rows are not scored
				for k := 0; k < nT; k++ {
					r.Simulated[k][lo+s] = pred[s][k]
				}
			}
			r.Segments++
			lo = hi
		}
		r.FreeRun = fits(man.Targets, r.Measured, r.Simulated)
	}
	// k-step ahead: every window of H rows followed by F rows, all valid
	kstep, one := make([][]float64, nT), make([][]float64, nT)
	for k := range kstep {
		kstep[k], one[k] = make([]float64, g.Steps), make([]float64, g.Steps)
		for s := range kstep[k] {
			kstep[k][s], one[k][s] = math.NaN(), math.NaN()
		}
	}
	var starts []int
	run := 0
	for s := 0; s < g.Steps; s++ {
		if rowOK[s] {
			run++
		} else {
			run = 0
		}
		if run >= H+F { // window rows s−H−F+1 … s
			starts = append(starts, s-H-F+1)
		}
	}
	const batch = 512
	uc := d.UCols
	for b := 0; b < len(starts); b += batch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ws := starts[b:min(b+batch, len(starts))]
		x := make([]float32, 0, len(ws)*H*nAll)
		u := make([]float32, 0, len(ws)*F*uc)
		for _, w := range ws {
			x = append(x, g.Vals[w*nAll:(w+H)*nAll]...)
			for f := 0; f < F; f++ {
				row := (w + H + f) * nAll
				for _, j := range ci {
					u = append(u, g.Vals[row+j])
				}
				for c := len(ci); c < uc; c++ {
					u = append(u, 0)
				}
			}
		}
		y, err := p.PredictBatch(ctx, x, u, len(ws))
		if err != nil {
			return nil, fmt.Errorf("k-step prediction: %w", err)
		}
		for i, w := range ws {
			for k := 0; k < nT; k++ {
				kstep[k][w+H+F-1] = float64(y[(i*F+F-1)*nT+k])
				one[k][w+H] = float64(y[(i*F)*nT+k])
			}
		}
	}
	r.KStep = fits(man.Targets, r.Measured, kstep)
	r.residuals(man, one, g, ci)
	if sim, ok := p.(RunSimulator); ok {
		r.steps(man, sim, g, ci, ti, H)
	}
	return r, nil
}

// residuals analyses the one-step-ahead residuals against the controls.
func (r *RunFit) residuals(man *dataset.Manifest, one [][]float64, g *dataset.ServeGrid, ci []int) {
	nT, n := len(man.Targets), g.Steps
	e, u := make([][]float64, n), make([][]float64, n)
	for s := 0; s < n; s++ {
		e[s], u[s] = make([]float64, nT), make([]float64, len(ci))
		for k := 0; k < nT; k++ {
			e[s][k] = r.Measured[k][s] - one[k][s]
		}
		for i, j := range ci {
			u[s][i] = float64(g.Vals[s*len(g.Nodes)+j])
		}
	}
	const maxLag = 25
	rep, err := analysis.ResidualAnalysis(e, u, maxLag, 0)
	if err != nil {
		return
	}
	for k, o := range rep.Outputs {
		v := ResidualView{Target: man.Targets[k], N: o.N, AutoOutside: o.Auto.Outside, White: o.Verdict == analysis.White, MaxLag: maxLag, Independent: o.Independent}
		for _, c := range o.Cross {
			v.CrossOutside = append(v.CrossOutside, c.Outside)
		}
		r.Residuals = append(r.Residuals, v)
	}
}

// stepRows is the longest step response read (grid steps after the step).
const stepRows = 720

// steps reads the model's step responses from the run's first valid
// operating point: the controls of its first NaN-free row held, the model
// started from that row's targets repeated over H rows.
func (r *RunFit) steps(man *dataset.Manifest, sim RunSimulator, g *dataset.ServeGrid, ci, ti []int, H int) {
	nAll := len(g.Nodes)
	row := -1
	for s := 0; s < g.Steps && row < 0; s++ {
		ok := true
		for _, j := range append(append([]int{}, ci...), ti...) {
			ok = ok && !math.IsNaN(float64(g.Vals[s*nAll+j]))
		}
		if ok {
			row = s
		}
	}
	if row < 0 {
		return
	}
	u0, y0 := make([]float64, len(ci)), make([]float64, len(ti))
	for i, j := range ci {
		u0[i] = float64(g.Vals[row*nAll+j])
	}
	for k, j := range ti {
		y0[k] = float64(g.Vals[row*nAll+j])
	}
	steps := make([]float64, len(ci)) // 5 % of each control's range on the run, 1 if it never moved
	for i, j := range ci {
		lo, hi := math.Inf(1), math.Inf(-1)
		for s := 0; s < g.Steps; s++ {
			if v := float64(g.Vals[s*nAll+j]); !math.IsNaN(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		steps[i] = 1
		if hi > lo {
			steps[i] = 0.05 * (hi - lo)
		}
	}
	simulate := func(u [][]float64) [][]float64 {
		outs := make([][]float64, H)
		for k := range outs {
			outs[k] = y0
		}
		y, err := sim.SimulateRun(u, outs, H)
		if err != nil {
			return nil
		}
		return y
	}
	rep, err := analysis.StepResponses(simulate, analysis.StepOptions{U0: u0, Steps: steps, Pre: H, N: stepRows, Dt: float64(g.BeatUs) / 1e6})
	if err != nil {
		return
	}
	r.Gains = rep.Gains
	for cv, pairs := range rep.Pairs {
		for mv, p := range pairs {
			r.Steps = append(r.Steps, StepView{Target: man.Targets[cv], Control: man.Controls[mv], Gain: p.Gain, DeadTime: p.DeadTime, TimeConstant: p.TimeConstant, SettlingTime: p.SettlingTime})
		}
	}
}

// fits is the fit of pred against meas per target, over the steps where
// both are finite.
func fits(names []string, meas, pred [][]float64) []TargetFit {
	out := make([]TargetFit, len(names))
	for k, n := range names {
		var sum float64
		var cnt int
		for s, v := range pred[k] {
			if !math.IsNaN(v) && !math.IsNaN(meas[k][s]) {
				sum += meas[k][s]
				cnt++
			}
		}
		tf := TargetFit{Target: n, FitPct: math.NaN(), RMSE: math.NaN(), Samples: cnt}
		if cnt > 0 {
			mean := sum / float64(cnt)
			var se, sv float64
			for s, v := range pred[k] {
				if !math.IsNaN(v) && !math.IsNaN(meas[k][s]) {
					e := meas[k][s] - v
					se += e * e
					dv := meas[k][s] - mean
					sv += dv * dv
				}
			}
			tf.RMSE = math.Sqrt(se / float64(cnt))
			if sv > 0 {
				tf.FitPct = 100 * (1 - math.Sqrt(se/sv))
			}
		}
		out[k] = tf
	}
	return out
}

// MarshalJSON writes the series with null for missing values.
func (r RunFit) MarshalJSON() ([]byte, error) {
	type plain RunFit
	var gains [][]jf
	if r.Gains != nil {
		gains = jfSeries(r.Gains)
	}
	return json.Marshal(struct {
		plain
		Measured  [][]jf `json:"measured"`
		Simulated [][]jf `json:"simulated"`
		Gains     [][]jf `json:"gains,omitempty"`
	}{plain(r), jfSeries(r.Measured), jfSeries(r.Simulated), gains})
}

// jfSeries and floatSeries convert [target][step] series for JSON, NaN
// written and read as null.
func jfSeries(x [][]float64) [][]jf {
	out := make([][]jf, len(x))
	for k, row := range x {
		out[k] = make([]jf, len(row))
		for s, v := range row {
			out[k][s] = jf(v)
		}
	}
	return out
}

func floatSeries(x [][]jf) [][]float64 {
	if x == nil {
		return nil
	}
	out := make([][]float64, len(x))
	for k, row := range x {
		out[k] = make([]float64, len(row))
		for s, f := range row {
			out[k][s] = float64(f)
		}
	}
	return out
}
