package static

import (
	"fmt"
	"math"
)

// FoldResult is one outer fold of CrossValidate.
type FoldResult struct {
	Test   []int   `json:"test"`
	Kind   string  `json:"kind"`   // model chosen by the fold's inner selection
	Degree int     `json:"degree"` // poly only
	Lambda float64 `json:"lambda"` // poly only
	// Per output, on the fold's test rows: R² = 1 − SSE/SST with SST about
	// the mean of the fold's true values; RMSE; NRMSE = RMSE / std(y_true
	// of the fold), population std.
	R2    []float64 `json:"r2"`
	RMSE  []float64 `json:"rmse"`
	NRMSE []float64 `json:"nrmse"`
	// Selection is the fold's inner selection (training rows only).
	Selection *Selection `json:"selection,omitempty"`
}

// CVResult is the outcome of CrossValidate. Fold figures are averaged over
// folds (Mean*); pooled figures use every out-of-fold prediction together
// (Pooled*): PooledRMSE over all tested rows, PooledNRMSE = PooledRMSE /
// std(all tested y_true), PooledR2 = 1 − SSE/SST with SST about the mean of
// all tested y_true, so PooledR2 = 1 − PooledNRMSE². The pooled figures are
// the convention of the in-house Lego baselines.
type CVResult struct {
	Folds       []FoldResult `json:"folds"`
	MeanR2      []float64    `json:"mean_r2"`
	MeanRMSE    []float64    `json:"mean_rmse"`
	MeanNRMSE   []float64    `json:"mean_nrmse"`
	PooledR2    []float64    `json:"pooled_r2"`
	PooledRMSE  []float64    `json:"pooled_rmse"`
	PooledNRMSE []float64    `json:"pooled_nrmse"`
	// OOF[i] is row i's out-of-fold prediction (NaN for a row in no test
	// set; the last fold wins if a row is in several).
	OOF [][]float64 `json:"oof"`
}

// Scores returns, per output, R², RMSE and NRMSE of pred against y:
// R² = 1 − SSE/SST with SST about the mean of y (sklearn's r2_score(y, pred)),
// NRMSE = RMSE / std(y) with the population std. A constant y gives R² = 1
// and NRMSE = 0 if the predictions are exact, −Inf and +Inf otherwise.
func Scores(y, pred [][]float64) (r2, rmse, nrmse []float64) {
	n := len(y)
	if n == 0 {
		return nil, nil, nil
	}
	m := len(y[0])
	r2, rmse, nrmse = make([]float64, m), make([]float64, m), make([]float64, m)
	for o := 0; o < m; o++ {
		mu := 0.0
		for i := range y {
			mu += y[i][o]
		}
		mu /= float64(n)
		sse, sst := 0.0, 0.0
		for i := range y {
			e := pred[i][o] - y[i][o]
			sse += e * e
			t := y[i][o] - mu
			sst += t * t
		}
		rmse[o] = math.Sqrt(sse / float64(n))
		if sst == 0 {
			if sse == 0 {
				r2[o], nrmse[o] = 1, 0
			} else {
				r2[o], nrmse[o] = math.Inf(-1), math.Inf(1)
			}
			continue
		}
		r2[o] = 1 - sse/sst
		nrmse[o] = rmse[o] / math.Sqrt(sst/float64(n))
	}
	return r2, rmse, nrmse
}

// CrossValidate runs an outer cross-validation for reporting: for each
// test index set in folds it calls Fit (with its own inner selection) on
// the remaining rows only, predicts the test rows and scores them.
func CrossValidate(X, Y [][]float64, folds [][]int, opt Options) (CVResult, error) {
	n, _, m, err := checkData(X, Y)
	if err != nil {
		return CVResult{}, err
	}
	if len(folds) == 0 {
		return CVResult{}, fmt.Errorf("static: no folds")
	}
	res := CVResult{OOF: make([][]float64, n)}
	for i := range res.OOF {
		res.OOF[i] = make([]float64, m)
		for o := range res.OOF[i] {
			res.OOF[i][o] = math.NaN()
		}
	}
	tested := make([]bool, n)
	for f, test := range folds {
		if len(test) == 0 {
			return CVResult{}, fmt.Errorf("static: fold %d has no test rows", f)
		}
		for _, i := range test {
			if i < 0 || i >= n {
				return CVResult{}, fmt.Errorf("static: fold %d: row %d out of range", f, i)
			}
		}
		train := complement(n, test)
		if len(train) == 0 {
			return CVResult{}, fmt.Errorf("static: fold %d leaves no training rows", f)
		}
		model, sel, err := Fit(pick(X, train), pick(Y, train), opt)
		if err != nil {
			return CVResult{}, fmt.Errorf("static: fold %d: %w", f, err)
		}
		Yte := pick(Y, test)
		pred := model.Predict(pick(X, test))
		fr := FoldResult{Test: append([]int(nil), test...), Kind: model.Kind, Degree: model.Degree, Lambda: model.Lambda, Selection: sel}
		fr.R2, fr.RMSE, fr.NRMSE = Scores(Yte, pred)
		res.Folds = append(res.Folds, fr)
		for k, i := range test {
			copy(res.OOF[i], pred[k])
			tested[i] = true
		}
	}
	res.MeanR2, res.MeanRMSE, res.MeanNRMSE = make([]float64, m), make([]float64, m), make([]float64, m)
	for _, fr := range res.Folds {
		for o := 0; o < m; o++ {
			k := float64(len(res.Folds))
			res.MeanR2[o] += fr.R2[o] / k
			res.MeanRMSE[o] += fr.RMSE[o] / k
			res.MeanNRMSE[o] += fr.NRMSE[o] / k
		}
	}
	var yt, pt [][]float64
	for i := 0; i < n; i++ {
		if tested[i] {
			yt = append(yt, Y[i])
			pt = append(pt, res.OOF[i])
		}
	}
	res.PooledR2, res.PooledRMSE, res.PooledNRMSE = Scores(yt, pt)
	return res, nil
}

// ModFolds returns k test index sets with row i in fold i mod k (the
// in-house Lego protocol, rows in file order).
func ModFolds(n, k int) [][]int {
	f := make([][]int, k)
	for i := 0; i < n; i++ {
		f[i%k] = append(f[i%k], i)
	}
	return f
}
