package trainers

// What the polynomial trainers (output_error@1, armax@1, box_jenkins@1)
// share: their columns and training data (those of the linear trainers,
// the top of linear.go), one model per target, and one predictor.

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// polyDelays resolves the nk param (nil: 1 for every control) for the
// dataset's controls.
func polyDelays(nk []int, c linColumns) ([]int, error) {
	if nk == nil {
		nk = make([]int, len(c.inputs))
		for i := range nk {
			nk[i] = 1
		}
	}
	if len(nk) != len(c.inputs) {
		return nil, fmt.Errorf("params: nk has %d delays for %d controls (%v)", len(nk), len(c.inputs), c.inputs)
	}
	return nk, nil
}

// polyFit fits one target's model to its output segments ys ([seg][T])
// and the input segments us.
type polyFit func(ctx context.Context, output string, ys [][]float64, us [][][]float64) error

// polyTrain reads the train runs' NaN-free segments of at least lag+10
// rows (lag: the largest lag of the model, at most the dataset's history),
// removes the trend of detrend (returned; nil for none) and fits every
// target with fit.
func polyTrain(ctx context.Context, tc *trainer.TrainContext, c linColumns, lag int, detrend string, fit polyFit) (*linTrend, error) {
	b := tc.Dataset
	if H := b.Manifest.HistorySteps; lag > H {
		return nil, fmt.Errorf("params: the model needs %d past steps, the dataset's history is %d (a window could not start it)", lag, H)
	}
	linProgress(tc, 0.05, "reading runs")
	runs, err := linReadRuns(b, c, b.Manifest.Split.Train.RunIDs)
	if err != nil {
		return nil, err
	}
	trend, err := linDetrendRuns(detrend, runs)
	if err != nil {
		return nil, err
	}
	var segs linSegments
	for _, r := range runs {
		segs.add(r, 0, len(r.y), lag+10)
	}
	if len(segs.y) == 0 {
		return nil, errors.New("no NaN-free train segment is long enough")
	}
	for k, name := range c.outputs {
		linProgress(tc, 0.1+0.8*float64(k)/float64(len(c.outputs)), "fitting "+name)
		ys := make([][]float64, len(segs.y))
		for s, seg := range segs.y {
			ys[s] = make([]float64, len(seg))
			for t, row := range seg {
				ys[s][t] = row[k]
			}
		}
		if err := fit(ctx, name, ys, segs.u); err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
	}
	linProgress(tc, 0.95, "writing")
	return trend, nil
}

// polyCov is a covariance matrix as rows (nil without one).
func polyCov(cov *mat.SymDense) [][]float64 {
	if cov == nil {
		return nil
	}
	n := cov.SymmetricDim()
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, n)
		for j := range out[i] {
			out[i][j] = cov.At(i, j)
		}
	}
	return out
}

// polyParams lists the named parameters with their standard errors and
// 95 % intervals (value ± 1.96 standard errors; null without a
// covariance).
func polyParams(names []string, values []float64, cov *mat.SymDense) []procParamJSON {
	out := make([]procParamJSON, len(names))
	for i, n := range names {
		se := math.NaN()
		if cov != nil && cov.At(i, i) >= 0 {
			se = math.Sqrt(cov.At(i, i))
		}
		out[i] = procParamJSON{Name: n, Value: values[i], StdErr: linNum(se), CI95: [2]linNum{linNum(values[i] - 1.96*se), linNum(values[i] + 1.96*se)}}
	}
	return out
}

// polyNames are the names of polynomial coefficients: prefix1 … prefixN
// (first = 1) or prefix0 … (first = 0), per input "b[u]0" ….
func polyNames(prefix string, first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, first+i)
	}
	return out
}

// polyModel is one target's polynomial model: Predict gives its outputs
// over u from the first len(y0) measured outputs (the k-step-ahead
// predictions after them), Poles its dynamics' poles.
type polyModel interface {
	Predict(y0 []float64, u [][]float64) []float64
	Poles() []complex128
}

// polyPredictor predicts windows and runs with one polynomial model per
// target.
type polyPredictor struct {
	format string
	d      dataset.Dims
	models []polyModel // dataset target order
	xIn    []int       // AllNodes column of each input
	uIn    []int       // controls column of each input
	xOut   []int       // AllNodes column of each target
	trend  *linTrend   // removed from the data the models see, outputs in target order (nil: none)
}

// newPolyPredictor checks the model's inputs against the dataset's
// controls and takes one model per target from byTarget; trend (nil:
// none) is the stored trend of inputs and outputs.
func newPolyPredictor(format string, man *dataset.Manifest, inputs, outputs []string, byTarget map[string]polyModel, trend *linTrend) (*polyPredictor, error) {
	if man.Kind != dataset.KindDynamic {
		return nil, model.Invalid("format", "%s predicts windows of a dynamic dataset", format)
	}
	p := &polyPredictor{format: format, d: man.Dims()}
	ctrl, all := map[string]int{}, map[string]int{}
	for i, n := range man.Controls {
		ctrl[n] = i
	}
	for j, n := range man.AllNodes {
		all[n] = j
	}
	for _, n := range inputs {
		i, ok := ctrl[n]
		if !ok {
			return nil, model.Invalid("inputs", "model input %s is not a control of the dataset", n)
		}
		p.uIn, p.xIn = append(p.uIn, i), append(p.xIn, all[n])
	}
	for _, t := range man.Targets {
		m, ok := byTarget[t]
		if !ok {
			return nil, model.Invalid("models", "no model of target %s", t)
		}
		p.models = append(p.models, m)
		p.xOut = append(p.xOut, all[t])
	}
	if trend != nil {
		if err := trend.check(len(inputs), len(outputs)); err != nil {
			return nil, err
		}
		out := map[string]int{}
		for o, n := range outputs {
			out[n] = o
		}
		idx := make([]int, len(man.Targets))
		for k, t := range man.Targets {
			o, ok := out[t]
			if !ok {
				return nil, model.Invalid("detrend", "no trend of target %s", t)
			}
			idx[k] = o
		}
		p.trend = trend.forOutputs(idx)
	}
	return p, nil
}

func (p *polyPredictor) Format() string { return p.format }
func (p *polyPredictor) Horizon() int   { return p.d.F }

// Poles are every target model's poles (eval.PoleReporter: the stability
// gate G7b).
func (p *polyPredictor) Poles() []complex128 {
	var out []complex128
	for _, m := range p.models {
		out = append(out, m.Poles()...)
	}
	return out
}

// PredictBatch starts each model from the window's H measured outputs and
// predicts the F future steps with the window's controls (OE: its free
// run; ARMAX, BJ: the k-step-ahead predictions, the noise estimated over
// the history).
func (p *polyPredictor) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	if err := model.CheckBatch(p.d, x, u, n); err != nil {
		return nil, err
	}
	H, F, nT := p.d.H, p.d.F, p.d.YCols
	out := make([]float32, 0, n*F*nT)
	us, ys := make([][]float64, H+F), make([][]float64, H)
	for k := range us {
		us[k] = make([]float64, len(p.xIn))
	}
	for k := range ys {
		ys[k] = make([]float64, nT)
	}
	y0 := make([]float64, H)
	sims := make([][]float64, nT)
	for w := 0; w < n; w++ {
		if w%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		windowRows(p.d, x, u, w, p.xIn, p.xOut, p.uIn, us, ys)
		uw, yw, tau := p.trend.detrended(us, ys)
		for t, m := range p.models {
			for k := range y0 {
				y0[k] = yw[k][t]
			}
			sims[t] = m.Predict(y0, uw)
			if p.trend != nil {
				p.trend.restoreOutput(t, sims[t], tau)
			}
		}
		for f := 0; f < F; f++ {
			for t := range p.models {
				out = append(out, float32(sims[t][H+f]))
			}
		}
	}
	return out, nil
}

// SimulateRun implements eval.RunSimulator: each model started from the
// first nInit measured outputs and predicted over the run from them and
// the run's controls alone.
func (p *polyPredictor) SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error) {
	if nInit < 1 {
		return nil, fmt.Errorf("SimulateRun: nInit %d: a polynomial model starts from at least one measured output", nInit)
	}
	tgt := make([]int, len(p.models))
	for t := range tgt {
		tgt[t] = t
	}
	u, y, err := runRows(inputs, outputs, nInit, p.d.NCtrl, p.d.YCols, p.uIn, tgt)
	if err != nil {
		return nil, err
	}
	u, y, tau := p.trend.detrended(u, y)
	res := make([][]float64, len(inputs))
	for k := range res {
		res[k] = make([]float64, len(p.models))
	}
	for t, m := range p.models {
		y0 := make([]float64, nInit)
		for k := range y0 {
			y0[k] = y[k][t]
		}
		pred := m.Predict(y0, u)
		if p.trend != nil {
			p.trend.restoreOutput(t, pred, tau)
		}
		for k, v := range pred {
			res[k][t] = v
		}
	}
	return res, nil
}
