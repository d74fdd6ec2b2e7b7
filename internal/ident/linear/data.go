package linear

import (
	"errors"
	"fmt"
	"math"
)

// Scaling selects how signals are normalised before fitting. Statistics are
// always computed on the training data passed to the Fit function and stored
// in the model, so that prediction and simulation on new data use the
// training statistics.
type Scaling int

const (
	// Standardize subtracts the training mean and divides by the training
	// standard deviation (population std, ddof=0) of every channel. A channel
	// with zero variance is only centred. This is the default.
	Standardize Scaling = iota
	// CenterOnly subtracts the training mean of every channel.
	CenterOnly
	// NoScaling uses the data as given.
	NoScaling
)

func (s Scaling) String() string {
	switch s {
	case Standardize:
		return "standardize"
	case CenterOnly:
		return "center"
	case NoScaling:
		return "none"
	}
	return fmt.Sprintf("Scaling(%d)", int(s))
}

// checkSignals verifies that x is a non-empty rectangular [T][n] array with
// finite entries and returns its width.
func checkSignals(name string, x [][]float64) (int, error) {
	if len(x) == 0 {
		return 0, fmt.Errorf("linear: %s has no samples", name)
	}
	w := len(x[0])
	if w == 0 {
		return 0, fmt.Errorf("linear: %s has zero channels", name)
	}
	for k, row := range x {
		if len(row) != w {
			return 0, fmt.Errorf("linear: %s row %d has %d channels, want %d", name, k, len(row), w)
		}
		for _, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("linear: %s row %d contains a non-finite value", name, k)
			}
		}
	}
	return w, nil
}

// checkPair checks y and u and that they have the same number of samples.
func checkPair(y, u [][]float64) (ny, nu int, err error) {
	if ny, err = checkSignals("y", y); err != nil {
		return
	}
	if nu, err = checkSignals("u", u); err != nil {
		return
	}
	if len(y) != len(u) {
		err = fmt.Errorf("linear: y has %d samples but u has %d", len(y), len(u))
	}
	return
}

var errShortData = errors.New("linear: not enough samples for the requested orders")

// channelStats returns per-channel mean and scale according to s.
func channelStats(x [][]float64, s Scaling) (mean, scale []float64) {
	w := len(x[0])
	mean = make([]float64, w)
	scale = make([]float64, w)
	for i := range scale {
		scale[i] = 1
	}
	if s == NoScaling {
		return
	}
	n := float64(len(x))
	for _, row := range x {
		for i, v := range row {
			mean[i] += v
		}
	}
	for i := range mean {
		mean[i] /= n
	}
	if s == CenterOnly {
		return
	}
	for _, row := range x {
		for i, v := range row {
			d := v - mean[i]
			scale[i] += d * d
		}
	}
	for i := range scale {
		// scale[i] started at 1; remove it.
		v := (scale[i] - 1) / n
		if v > 0 && v > 1e-300 {
			scale[i] = math.Sqrt(v)
		} else {
			scale[i] = 1
		}
	}
	return
}

// normalize returns (x-mean)/scale as one flat row-major slice [T*w].
func normalize(x [][]float64, mean, scale []float64) []float64 {
	w := len(mean)
	out := make([]float64, len(x)*w)
	for k, row := range x {
		o := out[k*w : (k+1)*w]
		for i := range o {
			o[i] = (row[i] - mean[i]) / scale[i]
		}
	}
	return out
}

// denormalize converts a flat scaled [T*w] slice back to [][]float64.
func denormalize(z []float64, T int, mean, scale []float64) [][]float64 {
	w := len(mean)
	out := make([][]float64, T)
	buf := make([]float64, T*w)
	for k := 0; k < T; k++ {
		row := buf[k*w : (k+1)*w]
		for i := range row {
			row[i] = z[k*w+i]*scale[i] + mean[i]
		}
		out[k] = row
	}
	return out
}

// nanRows returns a [T][w] array filled with NaN.
func nanRows(T, w int) [][]float64 {
	out := make([][]float64, T)
	buf := make([]float64, T*w)
	for i := range buf {
		buf[i] = math.NaN()
	}
	for k := range out {
		out[k] = buf[k*w : (k+1)*w]
	}
	return out
}

// Column converts a single series into a [T][1] array.
func Column(x []float64) [][]float64 {
	out := make([][]float64, len(x))
	for k, v := range x {
		out[k] = []float64{v}
	}
	return out
}
