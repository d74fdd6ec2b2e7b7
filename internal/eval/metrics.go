package eval

import (
	"context"
	"encoding/json"
	"math"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
)

// BatchSize is the largest number of windows passed to one PredictBatch.
const BatchSize = 4096

// TargetMetrics are one target's metrics over one split (see the package
// documentation for the definitions).
type TargetMetrics struct {
	Target       string
	RMSE         float64
	NRMSE        float64
	OneStepRMSE  float64
	OneStepNRMSE float64
	MAE          float64
	R2           float64
	N            int // values compared: windows × F
}

// SplitMetrics are the metrics of one split.
type SplitMetrics struct {
	Split            string
	Windows          int
	Targets          []TargetMetrics
	MeanNRMSE        float64
	MeanOneStepNRMSE float64
	MeanR2           float64
}

// Metrics are a model's platform-computed metrics on a dataset.
type Metrics struct {
	Val, Test        SplitMetrics
	ValTestGap       float64 // |test − val| / val of MeanNRMSE
	TrainUniqueSteps int
	TrainRuns        int
	Format           string // the model's artifact format
}

// jf is a float64 that encodes non-finite values as null and decodes null
// as NaN.
type jf float64

func (v jf) MarshalJSON() ([]byte, error) {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

func (v *jf) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = jf(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*v = jf(f)
	return nil
}

type targetJSON struct {
	Target       string `json:"target"`
	RMSE         jf     `json:"rmse"`
	NRMSE        jf     `json:"nrmse"`
	OneStepRMSE  jf     `json:"oneStepRmse"`
	OneStepNRMSE jf     `json:"oneStepNrmse"`
	MAE          jf     `json:"mae"`
	R2           jf     `json:"r2"`
	N            int    `json:"n"`
}

// MarshalJSON writes non-finite values as null.
func (t TargetMetrics) MarshalJSON() ([]byte, error) {
	return json.Marshal(targetJSON{t.Target, jf(t.RMSE), jf(t.NRMSE), jf(t.OneStepRMSE), jf(t.OneStepNRMSE), jf(t.MAE), jf(t.R2), t.N})
}

// UnmarshalJSON reads null as NaN.
func (t *TargetMetrics) UnmarshalJSON(b []byte) error {
	var j targetJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*t = TargetMetrics{j.Target, float64(j.RMSE), float64(j.NRMSE), float64(j.OneStepRMSE), float64(j.OneStepNRMSE), float64(j.MAE), float64(j.R2), j.N}
	return nil
}

type splitJSON struct {
	Split            string          `json:"split"`
	Windows          int             `json:"windows"`
	Targets          []TargetMetrics `json:"targets"`
	MeanNRMSE        jf              `json:"meanNrmse"`
	MeanOneStepNRMSE jf              `json:"meanOneStepNrmse"`
	MeanR2           jf              `json:"meanR2"`
}

// MarshalJSON writes non-finite values as null.
func (s SplitMetrics) MarshalJSON() ([]byte, error) {
	t := s.Targets
	if t == nil {
		t = []TargetMetrics{}
	}
	return json.Marshal(splitJSON{s.Split, s.Windows, t, jf(s.MeanNRMSE), jf(s.MeanOneStepNRMSE), jf(s.MeanR2)})
}

// UnmarshalJSON reads null as NaN.
func (s *SplitMetrics) UnmarshalJSON(b []byte) error {
	var j splitJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = SplitMetrics{j.Split, j.Windows, j.Targets, float64(j.MeanNRMSE), float64(j.MeanOneStepNRMSE), float64(j.MeanR2)}
	return nil
}

type metricsJSON struct {
	Val              SplitMetrics `json:"val"`
	Test             SplitMetrics `json:"test"`
	ValTestGap       jf           `json:"valTestGap"`
	TrainUniqueSteps int          `json:"trainUniqueSteps"`
	TrainRuns        int          `json:"trainRuns"`
	Format           string       `json:"format"`
}

// MarshalJSON writes non-finite values as null.
func (m Metrics) MarshalJSON() ([]byte, error) {
	return json.Marshal(metricsJSON{m.Val, m.Test, jf(m.ValTestGap), m.TrainUniqueSteps, m.TrainRuns, m.Format})
}

// UnmarshalJSON reads null as NaN.
func (m *Metrics) UnmarshalJSON(b []byte) error {
	var j metricsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = Metrics{j.Val, j.Test, float64(j.ValTestGap), j.TrainUniqueSteps, j.TrainRuns, j.Format}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Evaluate computes p's metrics on the val and test splits of b, and the
// train-split coverage counts (see the package documentation).
func Evaluate(ctx context.Context, b *dataset.Bundle, p model.Predictor) (*Metrics, error) {
	if b == nil || p == nil {
		return nil, core.Errorf(core.CodeInternal, "eval.Evaluate: nil bundle or predictor")
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	d := b.Dims()
	if p.Horizon() != d.F {
		return nil, model.Invalidf("horizon", "the model predicts %d step(s), the dataset has horizon %d", p.Horizon(), d.F)
	}
	m := &Metrics{Format: p.Format(), TrainRuns: len(b.Manifest.Split.Train.RunIDs)}
	var err error
	if m.Val, err = evalSplit(ctx, b, p, dataset.SplitVal); err != nil {
		return nil, err
	}
	if m.Test, err = evalSplit(ctx, b, p, dataset.SplitTest); err != nil {
		return nil, err
	}
	m.ValTestGap = gap(m.Val.MeanNRMSE, m.Test.MeanNRMSE)
	m.TrainUniqueSteps = trainUniqueSteps(b)
	return m, nil
}

// gap is |test − val| / val.
func gap(val, test float64) float64 {
	switch {
	case !finite(val) || !finite(test):
		return math.NaN()
	case val == 0 && test == 0:
		return 0
	case val == 0:
		return math.Inf(1)
	}
	return math.Abs(test-val) / val
}

func evalSplit(ctx context.Context, b *dataset.Bundle, p model.Predictor, split string) (SplitMetrics, error) {
	d := b.Dims()
	lo, hi := b.Split(split)
	W, F, nT := hi-lo, d.F, d.YCols
	xl, ul, yl := d.XLen(), d.ULen(), d.YLen()
	sm := SplitMetrics{Split: split, Windows: W}
	targets := b.Manifest.Targets
	// Pass 1: each target's mean over the split.
	mean := make([]float64, nT)
	for i, v := range b.Y[lo*yl : hi*yl] {
		y := float64(v)
		if !finite(y) {
			w := lo + i/yl
			return sm, core.Errorf(core.CodeDatasetTampered, "dataset y of %s window %d, step %d, target %s is not finite", split, w, (i%yl)/nT, targets[i%nT])
		}
		mean[i%nT] += y
	}
	n := float64(W * F)
	for k := range mean {
		mean[k] /= n
	}
	// Pass 2: predict in batches and accumulate.
	sse, sse0, sae, sst := make([]float64, nT), make([]float64, nT), make([]float64, nT), make([]float64, nT)
	for start := lo; start < hi; start += BatchSize {
		if err := ctx.Err(); err != nil {
			return sm, core.Wrap(core.CodeInternal, err, "evaluation cancelled")
		}
		end := min(hi, start+BatchSize)
		bn := end - start
		var u []float32
		if ul > 0 {
			u = b.U[start*ul : end*ul : end*ul]
		}
		pred, err := p.PredictBatch(ctx, b.X[start*xl:end*xl:end*xl], u, bn)
		if err != nil {
			return sm, err
		}
		if len(pred) != bn*yl {
			return sm, model.Invalidf("prediction", "the model returned %d values for %d windows, need %d ([n,F,nTgt] = [%d,%d,%d])", len(pred), bn, bn*yl, bn, F, nT)
		}
		ys := b.Y[start*yl : end*yl]
		for i, pv := range pred {
			yp := float64(pv)
			if !finite(yp) {
				return sm, model.Invalidf("prediction", "the model predicted %v for %s window %d, step %d, target %s", yp, split, start+i/yl, (i%yl)/nT, targets[i%nT])
			}
			k := i % nT
			yt := float64(ys[i])
			e := yp - yt
			sse[k] += e * e
			sae[k] += math.Abs(e)
			if (i%yl)/nT == 0 {
				sse0[k] += e * e
			}
			dy := yt - mean[k]
			sst[k] += dy * dy
		}
	}
	nan := math.NaN()
	sumN, sumN1, sumR2 := 0.0, 0.0, 0.0
	for k := 0; k < nT; k++ {
		tm := TargetMetrics{Target: targets[k], N: W * F}
		if W == 0 {
			tm.RMSE, tm.NRMSE, tm.OneStepRMSE, tm.OneStepNRMSE, tm.MAE, tm.R2 = nan, nan, nan, nan, nan, nan
		} else {
			tm.RMSE = math.Sqrt(sse[k] / n)
			tm.OneStepRMSE = math.Sqrt(sse0[k] / float64(W))
			tm.MAE = sae[k] / n
			std := math.Sqrt(sst[k] / n)
			tm.NRMSE = ratio(tm.RMSE, std)
			tm.OneStepNRMSE = ratio(tm.OneStepRMSE, std)
			switch {
			case sst[k] > 0:
				tm.R2 = 1 - sse[k]/sst[k]
			case sse[k] == 0:
				tm.R2 = 1
			default:
				tm.R2 = math.Inf(-1)
			}
		}
		sumN += tm.NRMSE
		sumN1 += tm.OneStepNRMSE
		sumR2 += tm.R2
		sm.Targets = append(sm.Targets, tm)
	}
	sm.MeanNRMSE, sm.MeanOneStepNRMSE, sm.MeanR2 = sumN/float64(nT), sumN1/float64(nT), sumR2/float64(nT)
	return sm, nil
}

// ratio is rmse/std with 0/0 = 0 and x/0 = +Inf.
func ratio(rmse, std float64) float64 {
	if std > 0 {
		return rmse / std
	}
	if rmse == 0 {
		return 0
	}
	return math.Inf(1)
}

// trainUniqueSteps counts the distinct grid steps the train windows cover.
func trainUniqueSteps(b *dataset.Bundle) int {
	d := b.Dims()
	lo, hi := b.Split(dataset.SplitTrain)
	if d.Static {
		return hi - lo
	}
	type step struct {
		run string
		ts  float64
	}
	seen := map[step]struct{}{}
	covered := make([]bool, hi-lo)
	add := func(run string, w int) {
		for _, ts := range b.WindowTS(w) {
			seen[step{run, ts}] = struct{}{}
		}
	}
	for _, bw := range b.Manifest.Split.Blocks {
		for w := max(lo, bw.WindowOffset); w < min(hi, bw.WindowOffset+bw.WindowCount); w++ {
			if !covered[w-lo] {
				covered[w-lo] = true
				add(bw.RunID, w)
			}
		}
	}
	for w := lo; w < hi; w++ {
		if !covered[w-lo] {
			add("", w)
		}
	}
	return len(seen)
}
