package web

import (
	"encoding/json"
	"math"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/contract"
)

// The trial page's interactive tube: every trace of the recomputed trial
// as JSON in the page (a data attribute), drawn by static/tube.js with the
// vendored uPlot — candidate mean with its tube, the baseline of holding,
// the scene's limits and the objective's target, with zoom and hover
// values in the quantity's unit. The server-drawn SVG stays for a browser
// without scripts.

type tubeTrace struct {
	ID         string     `json:"id"`
	Kind       string     `json:"kind"`
	Unit       string     `json:"unit"`
	Calibrated bool       `json:"calibrated"`
	X          []float64  `json:"x"`
	Mean       []*float64 `json:"mean"`
	Lower      []*float64 `json:"lower,omitempty"`
	Upper      []*float64 `json:"upper,omitempty"`
	Baseline   []*float64 `json:"baseline,omitempty"`
	Limits     []tubeLine `json:"limits,omitempty"`
}

type tubeLine struct {
	Name string  `json:"name"`
	Y    float64 `json:"y"`
}

// nullable turns NaN and ±Inf into null (JSON has no NaN).
func nullable(v []float64) []*float64 {
	out := make([]*float64, len(v))
	for i, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			out[i] = &v[i]
		}
	}
	return out
}

// tubeDoc is the trial's traces for static/tube.js: outputs first, then
// controls, as detailCharts orders them.
func tubeDoc(d *app.TrialDetail, scene *contract.SceneContract, obj *contract.ObjectiveProfile) string {
	if d == nil {
		return ""
	}
	var outputs, controls []tubeTrace
	for _, tr := range d.Traces {
		x := make([]float64, len(tr.Mean))
		for k := range x {
			x[k] = float64(int64(k+1)*d.BeatMs) / 1000
		}
		t := tubeTrace{ID: tr.ID, Kind: tr.Kind, Unit: unitOf(scene, tr.ID), Calibrated: tr.Calibrated, X: x, Mean: nullable(tr.Mean), Baseline: nullable(tr.Baseline)}
		if hasWidth(tr.Lower, tr.Upper) {
			t.Lower, t.Upper = nullable(tr.Lower), nullable(tr.Upper)
		}
		for _, l := range limitsOf(scene, tr.ID) {
			t.Limits = append(t.Limits, tubeLine{Name: l.Name, Y: l.Y})
		}
		if sp, ok := objectiveTarget(obj, tr.ID); ok {
			t.Limits = append(t.Limits, tubeLine{Name: "objective target", Y: sp})
		}
		if tr.Kind == "control" {
			controls = append(controls, t)
		} else {
			outputs = append(outputs, t)
		}
	}
	b, err := json.Marshal(map[string]any{"traces": append(outputs, controls...)})
	if err != nil {
		return ""
	}
	return string(b)
}
