package plot

import (
	"math"
	"strconv"
)

// TickSet is a set of evenly spaced, "nice" tick values (steps of 1, 2 or
// 5 times a power of ten) covering [Lo, Hi].
type TickSet struct {
	Lo, Hi, Step float64
	Values       []float64
	// decimals is the number of decimals a label needs to tell ticks apart.
	decimals int
}

// Ticks returns about n nice ticks covering [lo, hi] (Heckbert's
// algorithm). A degenerate range (lo == hi) is widened around the value;
// non-finite input gives the ticks of [0, 1].
func Ticks(lo, hi float64, n int) TickSet {
	if !finite(lo) || !finite(hi) {
		lo, hi = 0, 1
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	if lo == hi {
		d := math.Abs(lo) * 0.05
		if d == 0 {
			d = 1
		}
		lo, hi = lo-d, hi+d
	}
	n = max(n, 2)
	step := niceNum((hi-lo)/float64(n-1), true)
	if step == 0 || !finite(step) {
		step = 1
	}
	first := math.Floor(lo/step) * step
	last := math.Ceil(hi/step) * step
	ts := TickSet{Lo: first, Hi: last, Step: step}
	ts.decimals = max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	count := int(math.Round((last-first)/step)) + 1
	for i := 0; i < count && i < 1000; i++ {
		v := first + float64(i)*step
		// Snap to the step's decimals so 0.30000000000000004 is 0.3.
		v = roundTo(v, ts.decimals)
		if v == 0 {
			v = 0 // no negative zero
		}
		ts.Values = append(ts.Values, v)
	}
	return ts
}

// Label formats a tick value with just enough decimals; very large or
// very small magnitudes use exponent notation.
func (t TickSet) Label(v float64) string {
	a := math.Max(math.Abs(t.Lo), math.Abs(t.Hi))
	if a >= 1e6 || (a > 0 && a < 1e-4) {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', t.decimals, 64)
}

// niceNum is a nice number close to x: rounded when round, else the
// ceiling.
func niceNum(x float64, round bool) float64 {
	if x <= 0 {
		return 0
	}
	exp := math.Floor(math.Log10(x))
	fr := x / math.Pow(10, exp)
	var nf float64
	if round {
		switch {
		case fr < 1.5:
			nf = 1
		case fr < 3:
			nf = 2
		case fr < 7:
			nf = 5
		default:
			nf = 10
		}
	} else {
		switch {
		case fr <= 1:
			nf = 1
		case fr <= 2:
			nf = 2
		case fr <= 5:
			nf = 5
		default:
			nf = 10
		}
	}
	return nf * math.Pow(10, exp)
}

func roundTo(v float64, decimals int) float64 {
	p := math.Pow(10, float64(min(decimals, 12)))
	return math.Round(v*p) / p
}
