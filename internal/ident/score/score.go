// Package score holds the fit scores the identification trainers use to
// choose among their own candidates (epochs, starts) on held-out blocks of
// the training record — never the platform's evaluation, which is
// internal/eval's.
//
// NRMSE accumulates a free run's errors output by output and reports the
// mean over outputs of RMSE / standard deviation of the measured output.
package score

import "math"

// NRMSE accumulates squared errors and the measured outputs' moments for
// ny outputs. The zero value is not usable; make one with NewNRMSE.
type NRMSE struct {
	sse, sum, sum2 []float64
	n              int
}

// NewNRMSE is an empty accumulator for ny outputs.
func NewNRMSE(ny int) *NRMSE {
	return &NRMSE{sse: make([]float64, ny), sum: make([]float64, ny), sum2: make([]float64, ny)}
}

// Add scores one step: pred and meas hold one value per output.
func (a *NRMSE) Add(pred, meas []float64) {
	for o := range a.sse {
		e := pred[o] - meas[o]
		a.sse[o] += e * e
		a.sum[o] += meas[o]
		a.sum2[o] += meas[o] * meas[o]
	}
	a.n++
}

// Steps is how many steps were added.
func (a *NRMSE) Steps() int { return a.n }

// Mean is the mean over outputs of each output's RMSE over its measured
// standard deviation (a constant output's deviation is taken as 1e-150,
// so any error on it is very large); a NaN output (no steps, or a NaN
// prediction) counts as +Inf, so a diverged candidate never wins.
func (a *NRMSE) Mean() float64 {
	total := 0.0
	cnt := float64(a.n)
	for o := range a.sse {
		mean := a.sum[o] / cnt
		v := a.sum2[o]/cnt - mean*mean
		nr := math.Sqrt(a.sse[o]/cnt) / math.Sqrt(math.Max(v, 1e-300))
		if math.IsNaN(nr) {
			nr = math.Inf(1)
		}
		total += nr
	}
	return total / float64(len(a.sse))
}
