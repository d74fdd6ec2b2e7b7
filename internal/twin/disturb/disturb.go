// Package disturb estimates unmeasured output disturbances: the scalar
// Kalman filter the twin (internal/twin/engine, per snapshot window) and
// the shadow evidence (internal/twin/shadow, across a run's windows) run
// for every target a scene declares one on
// (contract.UnmeasuredDisturbance).
//
// # Model
//
// y[k] = ŷ[k] + b[k] + v[k]: ŷ the model's prediction, v its error
// without the disturbance (variance R), b the disturbance — a constant
// bias (output_bias: b[k+1] = b[k]) or a random walk (integrated white
// noise: b[k+1] = b[k] + w[k], Var w = Q per step). The filter starts
// from the prior N(0, prior) and, per row, predicts (P += Q) and updates
// with the row's error e = y − ŷ (K = P/(P+R), b += K(e − b),
// P = (1 − K)P). Its estimate carried n steps ahead has variance P + n·Q.
//
// An innovation beyond GateSigmas standard deviations (an outlier the
// cleaning let through) is not used, unless GateRun rows in a row are:
// then it is a step of the disturbance, and the filter opens its variance
// to the innovation and takes it.
//
// # Limits
//
// The filter is as good as the model's prediction ŷ: a disturbance that
// the model's own state estimate absorbs (an initial-state fit that moves
// a state to explain an offset) is only partly seen; an error the model
// makes for another reason (a wrong gain after a large move) is taken for
// a disturbance. An additive output disturbance does not model a drift of
// a gain or a time constant. Hand-written, not a library's: a scalar
// filter is four lines, and gonum has no Kalman filter.
package disturb

import "math"

// Innovation gate.
const (
	// GateSigmas is how many innovation standard deviations an error may
	// be from the estimate before it is gated out.
	GateSigmas = 5.0
	// GateRun is the number of consecutive gated rows after which the
	// filter takes the innovation as a step.
	GateRun = 3
)

// Filter is one target's disturbance filter.
type Filter struct {
	B, P, Q, R float64
	// Used and Rejected count the rows the filter took and gated out.
	Used, Rejected int
	run            int
}

// New returns a filter at the prior N(0, prior) with walk variance q per
// step and error variance r.
func New(prior, q, r float64) *Filter { return &Filter{P: prior, Q: q, R: r} }

// Predict carries the estimate n steps ahead.
func (f *Filter) Predict(n int) {
	if n > 0 {
		f.P += float64(n) * f.Q
	}
}

// VarAhead is the estimate's variance n steps ahead.
func (f *Filter) VarAhead(n int) float64 { return f.P + float64(max(n, 0))*f.Q }

// Update takes one error e = y − ŷ (NaN or ±Inf: no measurement) and
// reports whether it was used.
func (f *Filter) Update(e float64) bool {
	if math.IsNaN(e) || math.IsInf(e, 0) {
		return false
	}
	S := f.P + f.R
	if in := e - f.B; in*in > GateSigmas*GateSigmas*S {
		if f.run++; f.run < GateRun {
			f.Rejected++
			return false
		}
		f.P = math.Max(f.P, in*in)
		S = f.P + f.R
	}
	f.run = 0
	K := f.P / S
	f.B += K * (e - f.B)
	f.P = (1 - K) * f.P
	f.Used++
	return true
}

// Run filters the errors e of consecutive rows (the first row after the
// prior, one step between rows) and returns the estimate and its variance
// at the last row, and the rows used and gated out.
func Run(e []float64, prior, q, r float64) (b, P float64, used, rejected int) {
	f := New(prior, q, r)
	for k, v := range e {
		if k > 0 {
			f.Predict(1)
		}
		f.Update(v)
	}
	return f.B, f.P, f.Used, f.Rejected
}

// Mask runs the filter over e as [Run] does and reports which rows it
// used (gaps and gated outliers are false).
func Mask(e []float64, prior, q, r float64) []bool {
	f := New(prior, q, r)
	m := make([]bool, len(e))
	for k, v := range e {
		if k > 0 {
			f.Predict(1)
		}
		m[k] = f.Update(v)
	}
	return m
}

// Weights writes the filter's estimate over the rows of mask as a linear
// function of their errors: b̂ = Σ c[k]·e[k] + c0·(prior mean 0), with
// Σ c + c0 = 1, and returns the variance P at the last row.
func Weights(mask []bool, prior, q, r float64) (c []float64, c0, P float64) {
	K := make([]float64, len(mask))
	P = prior
	for k, used := range mask {
		if k > 0 {
			P += q
		}
		if !used {
			continue
		}
		K[k] = P / (P + r)
		P = (1 - K[k]) * P
	}
	c = make([]float64, len(mask))
	acc := 1.0
	for k := len(mask) - 1; k >= 0; k-- {
		if mask[k] {
			c[k] = K[k] * acc
			acc *= 1 - K[k]
		}
	}
	return c, acc, P
}

// Joint estimates the disturbance jointly with the model's state when the
// state estimate absorbs part of it: r0 are the errors with the state
// estimated from the measured rows, and alpha[k] the share of a unit shift
// of the measured rows that the state estimate takes up at row k (0: the
// state ignores an offset; 1: it explains it entirely). With the state
// estimated from the rows shifted by −b, the error is r0 − b·(1 − alpha);
// Joint returns the b that minimises the filter-weighted squares of that
// error with the prior's weight, Σ c·(r0 − b(1−α))² + c0·b², and its
// variance P/(Σ c·(1−α)² + c0): the filter's variance where the state
// absorbs nothing, at most the prior's walked over the rows where it
// absorbs everything (the
// disturbance is then not observable in the window, and the state
// carries the offset itself).
func Joint(r0, alpha []float64, mask []bool, prior, q, r float64) (b, P float64) {
	c, c0, P := Weights(mask, prior, q, r)
	num, den := 0.0, c0
	for k, ck := range c {
		if ck == 0 {
			continue
		}
		g := 1 - alpha[k]
		num += ck * r0[k] * g
		den += ck * g * g
	}
	// never less certain than knowing nothing: the prior walked over the
	// rows (where the prior is forgotten, c0 vanishes)
	if n := len(mask); n > 0 {
		den = math.Max(den, P/(prior+float64(n-1)*q))
	}
	if !(den > 0) {
		return 0, prior
	}
	return num / den, P / den
}
