package linear

import "math"

// RMSE returns the root-mean-square error of every output channel over the
// samples k >= start. Rows in which a prediction is NaN are an error in the
// model, not in the data, so they propagate: the result is then NaN.
func RMSE(yTrue, yPred [][]float64, start int) []float64 {
	if len(yTrue) == 0 {
		return nil
	}
	w := len(yTrue[0])
	out := make([]float64, w)
	n := 0
	for k := start; k < len(yTrue) && k < len(yPred); k++ {
		for i := 0; i < w; i++ {
			d := yTrue[k][i] - yPred[k][i]
			out[i] += d * d
		}
		n++
	}
	for i := range out {
		if n == 0 {
			out[i] = math.NaN()
			continue
		}
		out[i] = math.Sqrt(out[i] / float64(n))
	}
	return out
}

// Std returns the population standard deviation (ddof=0) of every channel
// over the samples k >= start.
func Std(y [][]float64, start int) []float64 {
	if len(y) == 0 {
		return nil
	}
	w := len(y[0])
	mean := make([]float64, w)
	out := make([]float64, w)
	n := 0
	for k := start; k < len(y); k++ {
		for i := 0; i < w; i++ {
			mean[i] += y[k][i]
		}
		n++
	}
	if n == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	for i := range mean {
		mean[i] /= float64(n)
	}
	for k := start; k < len(y); k++ {
		for i := 0; i < w; i++ {
			d := y[k][i] - mean[i]
			out[i] += d * d
		}
	}
	for i := range out {
		out[i] = math.Sqrt(out[i] / float64(n))
	}
	return out
}

// NRMSE returns RMSE/std(yTrue) per output over the samples k >= start (the
// std is taken over the same samples).
func NRMSE(yTrue, yPred [][]float64, start int) []float64 {
	r := RMSE(yTrue, yPred, start)
	s := Std(yTrue, start)
	for i := range r {
		r[i] /= s[i]
	}
	return r
}

// Mean returns the arithmetic mean of v (NaN for an empty slice).
func Mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// finiteOr returns v, or +Inf when v is NaN or infinite; used so that a
// diverging model always loses a comparison.
func finiteOr(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return math.Inf(1)
	}
	return v
}
