package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
)

// RunReplay is a model's prediction of one run the way the platform
// evaluated it: consecutive windows of the run (stride F, so their futures
// tile the run), each predicted from its H measured history rows and its
// future controls, beside what the line did, with the split-conformal
// band ŷ ± W[f][k] of each window's horizon step f. That is the band
// whose coverage the evaluation measured on the test split, so the replay
// shows the calibrated claim, not a free-run extrapolation (FitRun is the
// free run).
type RunReplay struct {
	RunID   string   `json:"runId"`
	Targets []string `json:"targets"`
	// Units are the targets' model units.
	Units []string `json:"units"`
	H     int      `json:"h"`
	F     int      `json:"f"`
	// Windows is the number of windows predicted (windows with a missing
	// value in their history or future are skipped).
	Windows int `json:"windows"`
	// Level is the conformal band's nominal coverage (NaN, written null,
	// without a band).
	Level float64 `json:"-"`
	// Coverage per target: the share of the compared steps whose actual
	// value lies in the band (NaN without a band or steps).
	Coverage []float64 `json:"-"`
	// StartUs (epoch µs) and BeatUs (µs) are the run's grid.
	StartUs int64 `json:"startUs"`
	BeatUs  int64 `json:"beatUs"`
	// Actual, Predicted, Lower and Upper are [target][grid step] (NaN,
	// written null, where a step was not predicted or not measured).
	Actual    [][]float64 `json:"-"`
	Predicted [][]float64 `json:"-"`
	Lower     [][]float64 `json:"-"`
	Upper     [][]float64 `json:"-"`
	Method    string      `json:"method"`
}

// MarshalJSON writes missing values as null.
func (r RunReplay) MarshalJSON() ([]byte, error) {
	type plain RunReplay
	cov := make([]jf, len(r.Coverage))
	for k, v := range r.Coverage {
		cov[k] = jf(v)
	}
	return json.Marshal(struct {
		plain
		Level     jf     `json:"level"`
		Coverage  []jf   `json:"coverage"`
		Actual    [][]jf `json:"actual"`
		Predicted [][]jf `json:"predicted"`
		Lower     [][]jf `json:"lower"`
		Upper     [][]jf `json:"upper"`
	}{plain(r), jf(r.Level), cov, jfSeries(r.Actual), jfSeries(r.Predicted), jfSeries(r.Lower), jfSeries(r.Upper)})
}

// UnmarshalJSON reads what MarshalJSON writes (null is NaN).
func (r *RunReplay) UnmarshalJSON(b []byte) error {
	type plain RunReplay
	var v struct {
		plain
		Level     jf     `json:"level"`
		Coverage  []jf   `json:"coverage"`
		Actual    [][]jf `json:"actual"`
		Predicted [][]jf `json:"predicted"`
		Lower     [][]jf `json:"lower"`
		Upper     [][]jf `json:"upper"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = RunReplay(v.plain)
	r.Level = float64(v.Level)
	for _, c := range v.Coverage {
		r.Coverage = append(r.Coverage, float64(c))
	}
	r.Actual, r.Predicted, r.Lower, r.Upper = floatSeries(v.Actual), floatSeries(v.Predicted), floatSeries(v.Lower), floatSeries(v.Upper)
	return nil
}

// ReplayRun predicts run grid g (dataset.BuildServeGrid with the model's
// dataset spec) with predictor p of dataset manifest man; conf, when not
// nil, is the model's split-conformal band.
func ReplayRun(ctx context.Context, p model.Predictor, man *dataset.Manifest, conf *Conformal, g *dataset.ServeGrid) (*RunReplay, error) {
	if man.Kind != dataset.KindDynamic {
		return nil, core.Errorf(core.CodeInvalidArgument, "a run replay needs a model of a dynamic dataset")
	}
	dm := man.Dims()
	H, F, nAll, nT := dm.H, dm.F, dm.NAll, dm.YCols
	col := map[string]int{}
	for j, n := range g.Nodes {
		col[n] = j
	}
	ci, ti := make([]int, len(man.Controls)), make([]int, nT)
	for i, n := range man.Controls {
		j, ok := col[n]
		if !ok {
			return nil, core.Errorf(core.CodeInvalidArgument, "the run's grid lacks control %s", n)
		}
		ci[i] = j
	}
	for i, n := range man.Targets {
		j, ok := col[n]
		if !ok {
			return nil, core.Errorf(core.CodeInvalidArgument, "the run's grid lacks target %s", n)
		}
		ti[i] = j
	}
	if conf != nil && (len(conf.Widths) < F || func() bool {
		for _, w := range conf.Widths[:F] {
			if len(w) < nT {
				return true
			}
		}
		return false
	}()) {
		return nil, core.Errorf(core.CodeModelInvalid, "the model's conformal band has %d horizon steps, the dataset %d", len(conf.Widths), F)
	}
	// bad[k] counts the grid rows before k holding a missing value.
	bad := make([]int, g.Steps+1)
	for k := 0; k < g.Steps; k++ {
		bad[k+1] = bad[k]
		for _, v := range g.Vals[k*nAll : (k+1)*nAll] {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				bad[k+1]++
				break
			}
		}
	}
	var starts []int
	for k := H; k+F <= g.Steps; k += F {
		if bad[k+F]-bad[k-H] == 0 {
			starts = append(starts, k)
		}
	}
	units := map[string]string{}
	for _, n := range man.Nodes {
		units[n.NodeID] = n.ModelUnit
	}
	out := &RunReplay{RunID: g.RunID, Targets: man.Targets, H: H, F: F, Windows: len(starts), Level: math.NaN(),
		StartUs: g.StartUs, BeatUs: g.BeatUs,
		Method: fmt.Sprintf("windows of H=%d measured steps predict the next F=%d steps from their controls; consecutive windows tile the run", H, F)}
	nan := func() []float64 {
		v := make([]float64, g.Steps)
		for i := range v {
			v[i] = math.NaN()
		}
		return v
	}
	for k, t := range man.Targets {
		out.Units = append(out.Units, units[t])
		out.Predicted, out.Lower, out.Upper = append(out.Predicted, nan()), append(out.Lower, nan()), append(out.Upper, nan())
		a := make([]float64, g.Steps)
		for st := range a {
			a[st] = float64(g.Vals[st*nAll+ti[k]])
		}
		out.Actual = append(out.Actual, a)
	}
	const batch = 256
	for b0 := 0; b0 < len(starts); b0 += batch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b1 := min(len(starts), b0+batch)
		n := b1 - b0
		x := make([]float32, 0, n*H*nAll)
		u := make([]float32, 0, n*F*max(1, len(ci)))
		for _, st := range starts[b0:b1] {
			x = append(x, g.Vals[(st-H)*nAll:st*nAll]...)
			for f := 0; f < F; f++ {
				row := g.Vals[(st+f)*nAll : (st+f+1)*nAll]
				if len(ci) == 0 {
					u = append(u, 0)
				}
				for _, j := range ci {
					u = append(u, row[j])
				}
			}
		}
		yp, err := p.PredictBatch(ctx, x, u, n)
		if err != nil {
			return nil, err
		}
		if len(yp) != n*F*nT {
			return nil, core.Errorf(core.CodeModelInvalid, "the model returned %d values for %d windows, need %d", len(yp), n, n*F*nT)
		}
		for wi, st := range starts[b0:b1] {
			for f := 0; f < F; f++ {
				for k := 0; k < nT; k++ {
					v := float64(yp[(wi*F+f)*nT+k])
					out.Predicted[k][st+f] = v
					if conf != nil {
						wd := conf.Widths[f][k]
						out.Lower[k][st+f], out.Upper[k][st+f] = v-wd, v+wd
					}
				}
			}
		}
	}
	if conf != nil {
		out.Level = conf.Coverage
	}
	for k := range man.Targets {
		in, cnt := 0, 0
		for st := 0; st < g.Steps; st++ {
			a, lo, hi := out.Actual[k][st], out.Lower[k][st], out.Upper[k][st]
			if !math.IsNaN(a) && !math.IsInf(a, 0) && !math.IsNaN(out.Predicted[k][st]) && !math.IsNaN(lo) {
				cnt++
				if a >= lo && a <= hi {
					in++
				}
			}
		}
		cov := math.NaN()
		if cnt > 0 {
			cov = float64(in) / float64(cnt)
		}
		out.Coverage = append(out.Coverage, cov)
	}
	return out, nil
}
