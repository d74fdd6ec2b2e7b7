package physics

import (
	"fmt"
	"math"
)

// ival is a closed interval [lo, hi] of possible values (±Inf allowed).
// unranged marks intervals that depend on a state, control or disturbance
// declared without a range: a domain problem found in such an interval is a
// warning (declare the range to settle it) rather than an error.
//
// Endpoints are computed in ordinary floating point, without outward
// rounding; the analysis is conservative about everything except rounding
// of the endpoints themselves.
type ival struct {
	lo, hi   float64
	unranged bool
}

var everything = ival{lo: math.Inf(-1), hi: math.Inf(1)}

func point(v float64) ival { return ival{lo: v, hi: v} }

func (a ival) String() string {
	return fmt.Sprintf("[%s, %s]", fmtG(a.lo), fmtG(a.hi))
}

func fmtG(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return fmt.Sprintf("%.6g", v)
}

func (a ival) contains(v float64) bool { return a.lo <= v && v <= a.hi }

// fix replaces NaN endpoints (from inf-inf and the like) by the whole line.
func fix(r ival) ival {
	if math.IsNaN(r.lo) {
		r.lo = math.Inf(-1)
	}
	if math.IsNaN(r.hi) {
		r.hi = math.Inf(1)
	}
	if r.lo > r.hi {
		r.lo, r.hi = math.Inf(-1), math.Inf(1)
	}
	return r
}

func join(a, b ival) ival {
	return ival{lo: math.Min(a.lo, b.lo), hi: math.Max(a.hi, b.hi), unranged: a.unranged || b.unranged}
}

func iadd(a, b ival) ival {
	return fix(ival{lo: a.lo + b.lo, hi: a.hi + b.hi, unranged: a.unranged || b.unranged})
}

func ineg(a ival) ival { return ival{lo: -a.hi, hi: -a.lo, unranged: a.unranged} }

func isub(a, b ival) ival { return iadd(a, ineg(b)) }

// mulEnd multiplies endpoints with 0*inf = 0.
func mulEnd(x, y float64) float64 {
	if x == 0 || y == 0 {
		return 0
	}
	return x * y
}

func imul(a, b ival) ival {
	p1, p2, p3, p4 := mulEnd(a.lo, b.lo), mulEnd(a.lo, b.hi), mulEnd(a.hi, b.lo), mulEnd(a.hi, b.hi)
	return fix(ival{
		lo:       math.Min(math.Min(p1, p2), math.Min(p3, p4)),
		hi:       math.Max(math.Max(p1, p2), math.Max(p3, p4)),
		unranged: a.unranged || b.unranged,
	})
}

// idiv divides; ok is false when the denominator may be zero (the result is
// then the whole line).
func idiv(a, b ival) (ival, bool) {
	u := a.unranged || b.unranged
	if b.contains(0) {
		return ival{lo: math.Inf(-1), hi: math.Inf(1), unranged: u}, false
	}
	inv := ival{lo: 1 / b.hi, hi: 1 / b.lo, unranged: b.unranged}
	return imul(a, inv), true
}

func iabs(a ival) ival {
	switch {
	case a.lo >= 0:
		return a
	case a.hi <= 0:
		return ineg(a)
	}
	return ival{lo: 0, hi: math.Max(-a.lo, a.hi), unranged: a.unranged}
}

func imin(a, b ival) ival {
	return ival{lo: math.Min(a.lo, b.lo), hi: math.Min(a.hi, b.hi), unranged: a.unranged || b.unranged}
}

func imax(a, b ival) ival {
	return ival{lo: math.Max(a.lo, b.lo), hi: math.Max(a.hi, b.hi), unranged: a.unranged || b.unranged}
}

// iclamp follows the runtime: x<lo → lo, x>hi → hi, else x.
func iclamp(x, lo, hi ival) ival {
	r := imin(imax(x, lo), hi)
	// When lo may exceed hi the runtime returns lo for x < lo.
	if lo.hi > hi.lo {
		r = join(r, lo)
	}
	r.unranged = x.unranged || lo.unranged || hi.unranged
	return r
}

func mono(a ival, f func(float64) float64) ival {
	return fix(ival{lo: f(a.lo), hi: f(a.hi), unranged: a.unranged})
}

func isign(a ival) ival {
	lo, hi := -1.0, 1.0
	if a.lo > 0 {
		lo = 1
	} else if a.lo == 0 {
		lo = 0
	}
	if a.hi < 0 {
		hi = -1
	} else if a.hi == 0 {
		hi = 0
	}
	return ival{lo: lo, hi: hi, unranged: a.unranged}
}

// ipowInt raises to an integer power.
func ipowInt(a ival, n int64) ival {
	f := func(x float64) float64 { return math.Pow(x, float64(n)) }
	if n == 0 {
		return point(1)
	}
	if n%2 == 0 && n > 0 {
		if a.contains(0) {
			return fix(ival{lo: 0, hi: math.Max(f(a.lo), f(a.hi)), unranged: a.unranged})
		}
		x, y := f(a.lo), f(a.hi)
		return fix(ival{lo: math.Min(x, y), hi: math.Max(x, y), unranged: a.unranged})
	}
	if n > 0 { // odd: increasing
		return mono(a, f)
	}
	// negative: 1 / a^|n|, caller checked that a does not contain 0.
	r, _ := idiv(point(1), ipowInt(a, -n))
	r.unranged = a.unranged
	return r
}

// bools: an interval over {0, 1}.
func ibool(canFalse, canTrue bool, unranged bool) ival {
	lo, hi := 0.0, 1.0
	if !canFalse {
		lo = 1
	}
	if !canTrue {
		hi = 0
	}
	return ival{lo: lo, hi: hi, unranged: unranged}
}

func icompare(op opKind, a, b ival) ival {
	u := a.unranged || b.unranged
	switch op {
	case opLT:
		return ibool(!(a.hi < b.lo), a.lo < b.hi, u)
	case opLE:
		return ibool(!(a.hi <= b.lo), a.lo <= b.hi, u)
	case opGT:
		return ibool(!(a.lo > b.hi), a.hi > b.lo, u)
	case opGE:
		return ibool(!(a.lo >= b.hi), a.hi >= b.lo, u)
	case opEQ:
		single := a.lo == a.hi && b.lo == b.hi && a.lo == b.lo
		overlap := a.lo <= b.hi && b.lo <= a.hi
		return ibool(!single, overlap, u)
	case opNE:
		single := a.lo == a.hi && b.lo == b.hi && a.lo == b.lo
		overlap := a.lo <= b.hi && b.lo <= a.hi
		return ibool(overlap, !single, u)
	}
	return ibool(true, true, u)
}

// narrow restricts x (the interval of a name) given that "x op v" holds.
func narrow(x ival, op opKind, v ival) ival {
	r := x
	switch op {
	case opLT:
		r.hi = math.Min(r.hi, math.Nextafter(v.hi, math.Inf(-1)))
	case opLE:
		r.hi = math.Min(r.hi, v.hi)
	case opGT:
		r.lo = math.Max(r.lo, math.Nextafter(v.lo, math.Inf(1)))
	case opGE:
		r.lo = math.Max(r.lo, v.lo)
	case opEQ:
		r.lo = math.Max(r.lo, v.lo)
		r.hi = math.Min(r.hi, v.hi)
	}
	if r.lo > r.hi { // the branch is dead; keep a harmless point
		return ival{lo: x.lo, hi: x.lo, unranged: x.unranged}
	}
	return r
}

// negateCmp returns the comparison that holds when "op" does not.
func negateCmp(op opKind) opKind {
	switch op {
	case opLT:
		return opGE
	case opLE:
		return opGT
	case opGT:
		return opLE
	case opGE:
		return opLT
	case opEQ:
		return opNE
	case opNE:
		return opEQ
	}
	return opNone
}

// flipCmp returns op with its operands swapped (a < b ⇔ b > a).
func flipCmp(op opKind) opKind {
	switch op {
	case opLT:
		return opGT
	case opLE:
		return opGE
	case opGT:
		return opLT
	case opGE:
		return opLE
	}
	return op
}
