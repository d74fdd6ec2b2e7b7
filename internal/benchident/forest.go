package benchident

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ident/forest"
	"github.com/aml-project/aml/internal/ident/trainers"
)

// runForestCV is the static cross-validation of static_forest@1: per group,
// per fold, a forest fitted on the other folds with the trainer's own
// params (trainers.ForestParams) and the config's seed predicts the fold.
// With metric accuracy a classifier's labels are compared as they are, a
// regression forest's rounded.
func runForestCV(c *Config, tc TrainerConfig, names []string, groups map[string][2][][]float64, rep *Report, progress func(string)) error {
	var p trainers.ForestParams
	if len(tc.Params) > 0 {
		if err := json.Unmarshal(tc.Params, &p); err != nil {
			return core.FieldErrorf(core.CodeSpecInvalid, "trainers.params", "trainer %s: %v", tc.Ref, err)
		}
	}
	k := c.StaticCV.Folds
	var sum float64
	for _, g := range names {
		t0 := time.Now()
		X, Y := groups[g][0], groups[g][1]
		y := make([]float64, len(Y))
		for i := range Y {
			y[i] = Y[i][0]
		}
		opt := p.Options(y, uint64(c.Seed))
		pred := make([]float64, len(X))
		oob, oobFolds := 0.0, 0
		var chosen []string
		for f := 0; f < k; f++ {
			var xt [][]float64
			var yt []float64
			for i := range X {
				if i%k != f {
					xt, yt = append(xt, X[i]), append(yt, y[i])
				}
			}
			if len(xt) == 0 {
				return core.FieldErrorf(core.CodeSpecInvalid, "staticCV.folds", "group %s: fold %d leaves no training rows", g, f)
			}
			fr, err := p.Fit(xt, yt, opt.Seed)
			if err != nil {
				return core.Wrap(core.CodeInvalidArgument, err, "group %s fold %d", g, f)
			}
			if p.Tune != "" && p.Tune != "none" {
				chosen = append(chosen, fr.Knobs())
			}
			// a blend or a model without out-of-bag rows has no
			// estimate: the mean is over the folds that have one
			if e := oobScore(fr, yt, c.StaticCV.Metric == "accuracy"); !math.IsNaN(e) {
				oob += e
				oobFolds++
			}
			for i := range X {
				if i%k == f {
					pred[i] = fr.Predict(X[i])
				}
			}
		}
		res := Result{Trainer: tc.Ref, Output: c.Outputs[0] + "@" + g, Seconds: time.Since(t0).Seconds(), Chosen: chosen}
		var v float64
		if c.StaticCV.Metric == "accuracy" {
			ok := 0
			for i := range y {
				if math.Round(pred[i]) == y[i] {
					ok++
				}
			}
			v = float64(ok) / float64(len(y))
			res.Accuracy = &v
		} else {
			mu, sse, sst := 0.0, 0.0, 0.0
			for _, t := range y {
				mu += t / float64(len(y))
			}
			for i, t := range y {
				sse += (pred[i] - t) * (pred[i] - t)
				sst += (t - mu) * (t - mu)
			}
			v = 1 - sse/sst
			nrmse := math.Sqrt(sse / sst)
			res.R2, res.FreeRunNRMSE = &v, &nrmse
		}
		switch {
		case p.Method == "boost":
			opt.Task = "boosted " + opt.Task
		case p.Task == forest.Ordinal:
			opt.Task = "ordinal forest, trees per class cut"
		case p.Method == "extra":
			opt.Task = "extremely randomised " + opt.Task
		}
		est := fmt.Sprintf("mean out-of-bag %s of the folds %.4f", metricName(c.StaticCV.Metric), oob/float64(max(oobFolds, 1)))
		switch {
		case oobFolds == 0:
			est = "no out-of-bag estimate (the cross-validation is the estimate)"
		case oobFolds < k:
			est = fmt.Sprintf("mean out-of-bag %s of the %d of %d folds with one %.4f", metricName(c.StaticCV.Metric), oobFolds, k, oob/float64(oobFolds))
		}
		if len(chosen) > 0 {
			est += fmt.Sprintf(", tuned per fold on its training rows: %s", strings.Join(chosen, "; "))
		}
		progress(fmt.Sprintf("%s: %s, %d-fold CV (%s, %d trees, seed %d): %.4f, %s, %.1f s", tc.Ref, g, k, opt.Task, opt.Trees, opt.Seed, v, est, res.Seconds))
		sum += v
		rep.Results = append(rep.Results, res)
	}
	mean := sum / float64(len(names))
	res := Result{Trainer: tc.Ref, Output: c.Outputs[0] + "@mean"}
	if c.StaticCV.Metric == "accuracy" {
		res.Accuracy = &mean
	} else {
		res.R2 = &mean
	}
	rep.Results = append(rep.Results, res)
	return nil
}

// oobScore is a fold forest's out-of-bag figure in the benchmark's metric:
// accuracy of the (rounded) OOB predictions, or R².
func oobScore(f *forest.Forest, y []float64, accuracy bool) float64 {
	if !accuracy {
		if f.OOB.R2 == nil {
			return math.NaN()
		}
		return *f.OOB.R2
	}
	ok, n := 0, 0
	for i, p := range f.OOBPredictions() {
		if math.IsNaN(p) {
			continue
		}
		n++
		if math.Round(p) == y[i] {
			ok++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(ok) / float64(n)
}

func metricName(m string) string {
	if m == "accuracy" {
		return "accuracy"
	}
	return "R²"
}
