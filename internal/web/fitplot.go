package web

import (
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/web/plot"
)

// FitCharts draws a validation view (model.compare with a run): one chart
// per target with the measured run and every model's free run overlaid,
// each model named by its trainer with its fit %. Models without a fit are left out.
func FitCharts(r app.ModelCompareResponse) []*plot.Chart {
	var out []*plot.Chart
	for _, v := range r.Validation {
		f := v.Fit
		if f == nil {
			continue
		}
		for k, tf := range f.FreeRun {
			for len(out) <= k {
				out = append(out, nil)
			}
			if out[k] == nil {
				x := make([]float64, len(f.Measured[k]))
				for s := range x {
					x[s] = float64(s) * float64(f.BeatUs) / 6e7
				}
				out[k] = &plot.Chart{Title: fmt.Sprintf("%s on run %s: free run of each model", tf.Target, f.RunID),
					XLabel: "time since run start", XUnit: "min", YLabel: tf.Target, Width: 900, Height: 360,
					Series: []plot.Series{{Name: "measured", X: x, Y: f.Measured[k], Color: "#000000"}}}
			}
			c := out[k]
			name := v.Trainer // the legend is short: the ids are in the table
			if !math.IsNaN(tf.FitPct) {
				name += fmt.Sprintf(" fit %.1f %%", tf.FitPct)
			}
			c.Series = append(c.Series, plot.Series{Name: name, X: c.Series[0].X, Y: f.Simulated[k]})
		}
	}
	return out
}

// ReplayCharts draws a replay (model.replay): one chart per target with
// the run's actual values, the windows' predictions and the conformal
// band, against minutes since the run's start.
func ReplayCharts(resp app.ModelReplayResponse) []*plot.Chart {
	r := &resp.Replay
	steps := 0
	if len(r.Actual) > 0 {
		steps = len(r.Actual[0])
	}
	xs := make([]float64, steps)
	for st := range xs {
		xs[st] = float64(r.StartUs+int64(st)*r.BeatUs-resp.RunStartedMs*1000) / 6e7
	}
	var out []*plot.Chart
	for k, t := range r.Targets {
		unit := ""
		if k < len(r.Units) {
			unit = r.Units[k]
		}
		c := &plot.Chart{Title: fmt.Sprintf("%s on run %s: predicted vs actual", t, r.RunID), XLabel: "time since run start", XUnit: "min", YLabel: t, YUnit: unit,
			Series: []plot.Series{{Name: "actual", X: xs, Y: r.Actual[k], Color: "#000000"}, {Name: "predicted", X: xs, Y: r.Predicted[k], Color: "#0072b2"}}}
		if !math.IsNaN(r.Level) {
			c.Bands = []plot.Band{{Name: fmt.Sprintf("%.0f%% conformal band", 100*r.Level), X: xs, Lo: r.Lower[k], Hi: r.Upper[k], Color: "#0072b2"}}
		}
		out = append(out, c)
	}
	return out
}
