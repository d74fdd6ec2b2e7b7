package trainers

// Detrending of the linear trainers (param detrend: none, mean, linear):
// the trend of every input and output is estimated on the train runs,
// removed before the fit, stored in the artifact ("detrend") and added
// back at prediction, so predictions are in engineering units.
//
// The trend of channel c at step t of a run is level_c + slope_c·t (mean:
// the channel's mean, slope 0), fitted by least squares over the finite
// values of the train runs, t counted from each run's first grid row. A
// window or run predicted later does not say where it lies in its run, so
// its position τ (the step of its first row) is estimated from the values
// it carries — every input row and the measured output rows — by weighted
// least squares on the stored lines,
//
//	τ = Σ_c w_c s_c Σ_j (x_c(j) − level_c − s_c j) / Σ_c w_c s_c² n_c,
//
// w_c the inverse variance of channel c about its trend on the train runs
// (τ = 0 without any slope). On a sequence at the train runs' operating
// point its error is about a channel's spread divided by slope·√rows
// (TestDetrendPlacement: a 20-row window within 100 steps, a whole run
// within 10); a sequence whose levels are off the lines (another
// operating point) is misplaced by about the level difference over the
// slope, and every channel is then shifted along its line by s_c·δτ — the
// limit of detrend linear while the predictor interfaces do not carry
// the step. The model then sees x − trend(τ + j) and its outputs get
// trend(τ + j) back.

import (
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/model"
)

// Detrend methods.
const (
	detrendNone   = "none"
	detrendMean   = "mean"
	detrendLinear = "linear"
)

// linTrend is the stored trend of a model's inputs (model input order)
// and outputs (model output order): level + slope·t, t the step in the
// run; Var the variance about the trend (the weights placing a sequence).
type linTrend struct {
	Method string    `json:"method"`
	ULevel []float64 `json:"uLevel"`
	USlope []float64 `json:"uSlope"`
	UVar   []float64 `json:"uVar"`
	YLevel []float64 `json:"yLevel"`
	YSlope []float64 `json:"ySlope"`
	YVar   []float64 `json:"yVar"`
}

// linCheckDetrend checks the detrend param ("" is none).
func linCheckDetrend(method string) error {
	switch method {
	case "", detrendNone, detrendMean, detrendLinear:
		return nil
	}
	return fmt.Errorf("params: detrend %q: none, mean or linear", method)
}

// linDetrendRuns estimates the trend of method on the train runs and
// removes it from them and from every run of others (in place). It returns
// nil for none.
func linDetrendRuns(method string, train []linRun, others ...[]linRun) (*linTrend, error) {
	if err := linCheckDetrend(method); err != nil {
		return nil, err
	}
	if method == "" || method == detrendNone || len(train) == 0 {
		return nil, nil
	}
	nu, ny := len(train[0].u[0]), len(train[0].y[0])
	t := &linTrend{Method: method}
	fit := func(col func(r linRun, k int) float64) (level, slope, v float64) {
		var n, st, sx, stt, stx float64
		for _, r := range train {
			for k := range r.u {
				if x := col(r, k); !math.IsNaN(x) && !math.IsInf(x, 0) {
					tk := float64(k)
					n, st, sx, stt, stx = n+1, st+tk, sx+x, stt+tk*tk, stx+tk*x
				}
			}
		}
		if n == 0 {
			return 0, 0, 1
		}
		level = sx / n
		if d := stt - st*st/n; method == detrendLinear && d > 0 {
			slope = (stx - st*sx/n) / d
			level = (sx - slope*st) / n
		}
		ss := 0.0
		for _, r := range train {
			for k := range r.u {
				if x := col(r, k); !math.IsNaN(x) && !math.IsInf(x, 0) {
					e := x - level - slope*float64(k)
					ss += e * e
				}
			}
		}
		return level, slope, ss / n
	}
	for i := 0; i < nu; i++ {
		l, s, v := fit(func(r linRun, k int) float64 { return r.u[k][i] })
		t.ULevel, t.USlope, t.UVar = append(t.ULevel, l), append(t.USlope, s), append(t.UVar, v)
	}
	for o := 0; o < ny; o++ {
		l, s, v := fit(func(r linRun, k int) float64 { return r.y[k][o] })
		t.YLevel, t.YSlope, t.YVar = append(t.YLevel, l), append(t.YSlope, s), append(t.YVar, v)
	}
	t.removeRuns(train)
	for _, runs := range others {
		t.removeRuns(runs)
	}
	return t, nil
}

// removeRuns removes the trend from runs (in place; t nil: nothing).
func (t *linTrend) removeRuns(runs []linRun) {
	if t == nil {
		return
	}
	for _, r := range runs {
		t.remove(r.u, r.y, 0)
	}
}

// check validates a loaded trend for nu inputs and ny outputs.
func (t *linTrend) check(nu, ny int) error {
	if t.Method != detrendMean && t.Method != detrendLinear {
		return model.Invalid("detrend", "unknown method %q (mean or linear)", t.Method)
	}
	for _, c := range []struct {
		name string
		n, w int
	}{{"uLevel", len(t.ULevel), nu}, {"uSlope", len(t.USlope), nu}, {"uVar", len(t.UVar), nu},
		{"yLevel", len(t.YLevel), ny}, {"ySlope", len(t.YSlope), ny}, {"yVar", len(t.YVar), ny}} {
		if c.n != c.w {
			return model.Invalid("detrend", "%s has %d values for %d channels", c.name, c.n, c.w)
		}
	}
	return nil
}

// forOutputs returns the trend with its outputs taken in the order idx
// (idx[k]: the stored output of the k-th).
func (t *linTrend) forOutputs(idx []int) *linTrend {
	c := *t
	c.YLevel, c.YSlope, c.YVar = make([]float64, len(idx)), make([]float64, len(idx)), make([]float64, len(idx))
	for k, o := range idx {
		c.YLevel[k], c.YSlope[k], c.YVar[k] = t.YLevel[o], t.YSlope[o], t.YVar[o]
	}
	return &c
}

// place estimates the step τ of the first row of a sequence whose inputs
// are u and measured outputs y (rows 0 … len(y)−1), 0 for a mean trend.
func (t *linTrend) place(u, y [][]float64) float64 {
	if t.Method != detrendLinear {
		return 0
	}
	num, den := 0.0, 0.0
	add := func(rows [][]float64, level, slope, v []float64) {
		for c := range level {
			if slope[c] == 0 {
				continue
			}
			w := 1 / math.Max(v[c], 1e-12*(1+level[c]*level[c]))
			for j, row := range rows {
				if x := row[c]; !math.IsNaN(x) && !math.IsInf(x, 0) {
					num += w * slope[c] * (x - level[c] - slope[c]*float64(j))
					den += w * slope[c] * slope[c]
				}
			}
		}
	}
	add(u, t.ULevel, t.USlope, t.UVar)
	add(y, t.YLevel, t.YSlope, t.YVar)
	if !(den > 0) {
		return 0
	}
	return num / den
}

// remove subtracts the trend at steps τ, τ+1, … from the rows of u and y
// (in place).
func (t *linTrend) remove(u, y [][]float64, tau float64) {
	shift(u, t.ULevel, t.USlope, tau, -1)
	shift(y, t.YLevel, t.YSlope, tau, -1)
}

// restore adds the outputs' trend at steps τ, τ+1, … to the rows of y.
func (t *linTrend) restore(y [][]float64, tau float64) { shift(y, t.YLevel, t.YSlope, tau, 1) }

// restoreOutput adds output o's trend at steps τ, τ+1, … to y.
func (t *linTrend) restoreOutput(o int, y []float64, tau float64) {
	for j := range y {
		y[j] += t.YLevel[o] + t.YSlope[o]*(tau+float64(j))
	}
}

func shift(rows [][]float64, level, slope []float64, tau, sign float64) {
	for j, row := range rows {
		for c := range level {
			row[c] += sign * (level[c] + slope[c]*(tau+float64(j)))
		}
	}
}

// detrended places a sequence (inputs u, measured outputs y, both copied)
// on the trend t and removes it: the model's data, and τ to restore its
// outputs. Without a trend it returns u and y themselves.
func (t *linTrend) detrended(u, y [][]float64) (ud, yd [][]float64, tau float64) {
	if t == nil {
		return u, y, 0
	}
	tau = t.place(u, y)
	ud, yd = linCopyRows(u), linCopyRows(y)
	t.remove(ud, yd, tau)
	return ud, yd, tau
}

func linCopyRows(x [][]float64) [][]float64 {
	out := make([][]float64, len(x))
	for k, r := range x {
		out[k] = append([]float64(nil), r...)
	}
	return out
}
