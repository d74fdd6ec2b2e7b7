package analysis

import (
	"errors"
	"fmt"
	"math"
)

// Verdicts of ResidualAnalysis.
const (
	White    = "white"
	NotWhite = "not white"
)

// Bound99 is the two-sided 99 % quantile of the standard normal: a white
// sequence's sample correlations lie within ±Bound99/√N with about 99 %
// probability.
const Bound99 = 2.58

// DefaultMaxOutside is the share of lags outside the bounds up to which
// residuals still count as white.
const DefaultMaxOutside = 0.05

// Correlation is a normalised correlation function at Lags.
type Correlation struct {
	Lags   []int
	Values []float64
	// Outside is the share of lags (lag 0 of an autocorrelation excluded)
	// whose value lies outside ±Bound.
	Outside float64
}

// OutputResiduals is the analysis of one output's residuals.
type OutputResiduals struct {
	N     int     // finite residuals
	Bound float64 // Bound99/√N
	Auto  Correlation
	// Cross[i] is the correlation of the residuals with input i: value at
	// lag τ is corr(e(k+τ), u_i(k)) (τ > 0: the input leads).
	Cross []Correlation
	// Verdict is White when Auto.Outside ≤ the allowed share, else
	// NotWhite; Independent[i] likewise for Cross[i].
	Verdict     string
	Independent []bool
}

// ResidualReport is the result of ResidualAnalysis.
type ResidualReport struct {
	MaxLag     int
	MaxOutside float64
	Outputs    []OutputResiduals
}

// ResidualAnalysis analyses residuals e ([N][ny]) against inputs u ([N][nu],
// or nil for none) up to lag maxLag (≥ 1). Rows where a residual is not
// finite are left out of that output's sums (and the input rows paired
// with them); both are centred first. maxOutside (0: DefaultMaxOutside) is
// the share of lags allowed outside the bounds for the verdicts.
func ResidualAnalysis(e, u [][]float64, maxLag int, maxOutside float64) (*ResidualReport, error) {
	if maxLag < 1 {
		return nil, fmt.Errorf("analysis: maxLag %d must be ≥ 1", maxLag)
	}
	if len(e) == 0 || len(e[0]) == 0 {
		return nil, errors.New("analysis: no residuals")
	}
	if u != nil && len(u) != len(e) {
		return nil, fmt.Errorf("analysis: %d residual rows, %d input rows", len(e), len(u))
	}
	if maxOutside <= 0 {
		maxOutside = DefaultMaxOutside
	}
	ny := len(e[0])
	nu := 0
	if len(u) > 0 {
		nu = len(u[0])
	}
	for k := range e {
		if len(e[k]) != ny || (u != nil && len(u[k]) != nu) {
			return nil, fmt.Errorf("analysis: row %d has %d residuals and %d inputs, want %d and %d", k, len(e[k]), len(u[k]), ny, nu)
		}
	}
	rep := &ResidualReport{MaxLag: maxLag, MaxOutside: maxOutside}
	T := len(e)
	for o := 0; o < ny; o++ {
		ok := make([]bool, T)
		x := make([]float64, T)
		n := 0
		mean := 0.0
		for k := range e {
			if v := e[k][o]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				ok[k], x[k] = true, v
				n++
				mean += v
			}
		}
		if n <= maxLag+1 {
			return nil, fmt.Errorf("analysis: output %d has %d finite residuals for %d lags", o, n, maxLag)
		}
		mean /= float64(n)
		for k := range x {
			if ok[k] {
				x[k] -= mean
			}
		}
		or := OutputResiduals{N: n, Bound: Bound99 / math.Sqrt(float64(n))}
		or.Auto = correlation(x, x, ok, 0, maxLag, or.Bound)
		or.Verdict = White
		if or.Auto.Outside > maxOutside {
			or.Verdict = NotWhite
		}
		for i := 0; i < nu; i++ {
			w := make([]float64, T)
			m := 0.0
			for k := range u {
				if ok[k] {
					m += u[k][i]
				}
			}
			m /= float64(n)
			for k := range u {
				if ok[k] {
					w[k] = u[k][i] - m
				}
			}
			c := correlation(x, w, ok, -maxLag, maxLag, or.Bound)
			or.Cross = append(or.Cross, c)
			or.Independent = append(or.Independent, c.Outside <= maxOutside)
		}
		rep.Outputs = append(rep.Outputs, or)
	}
	return rep, nil
}

// correlation is Σ_k a(k+τ)·b(k) / √(Σa² Σb²) over the rows where both
// are valid, for τ = lo..hi; lag 0 of an autocorrelation (lo = 0) is not
// counted in Outside.
func correlation(a, b []float64, ok []bool, lo, hi int, bound float64) Correlation {
	saa, sbb := 0.0, 0.0
	for k := range a {
		if ok[k] {
			saa += a[k] * a[k]
			sbb += b[k] * b[k]
		}
	}
	den := math.Sqrt(saa * sbb)
	c := Correlation{}
	out, counted := 0, 0
	for tau := lo; tau <= hi; tau++ {
		s := 0.0
		for k := range b {
			j := k + tau
			if j < 0 || j >= len(a) || !ok[k] || !ok[j] {
				continue
			}
			s += a[j] * b[k]
		}
		v := 0.0
		if den > 0 {
			v = s / den
		}
		c.Lags = append(c.Lags, tau)
		c.Values = append(c.Values, v)
		if lo == 0 && tau == 0 {
			continue
		}
		counted++
		if math.Abs(v) > bound {
			out++
		}
	}
	if counted > 0 {
		c.Outside = float64(out) / float64(counted)
	}
	return c
}
