package physics

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// rat is a small rational number num/den with den > 0 and gcd 1. Unit
// exponents are rationals so that sqrt(m) = m^(1/2) is exact. Magnitudes are
// capped at ratLimit; an operation that exceeds it fails (the checker
// reports "unit exponent too complex") instead of overflowing.
type rat struct{ n, d int64 }

const ratLimit = 1 << 20

func gcd(a, b int64) int64 {
	if a < 0 {
		a = -a
	}
	if b < 0 {
		b = -b
	}
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func mkRat(n, d int64) (rat, bool) {
	if d == 0 {
		return rat{}, false
	}
	if d < 0 {
		n, d = -n, -d
	}
	g := gcd(n, d)
	if g > 1 {
		n /= g
		d /= g
	}
	if n > ratLimit || n < -ratLimit || d > ratLimit {
		return rat{}, false
	}
	if n == 0 {
		d = 1
	}
	return rat{n, d}, true
}

func ratInt(n int64) rat { return rat{n, 1} }

func (a rat) isZero() bool { return a.n == 0 }

func (a rat) add(b rat) (rat, bool) { return mkRat(a.n*b.d+b.n*a.d, a.d*b.d) }
func (a rat) mul(b rat) (rat, bool) { return mkRat(a.n*b.n, a.d*b.d) }
func (a rat) neg() rat              { return rat{-a.n, a.d} }
func (a rat) float() float64        { return float64(a.n) / float64(a.d) }

func (a rat) String() string {
	if a.d == 1 {
		return strconv.FormatInt(a.n, 10)
	}
	return strconv.FormatInt(a.n, 10) + "/" + strconv.FormatInt(a.d, 10)
}

// ratFromFloat finds p/q with q <= 1000 equal to x within 1e-9 (relative),
// e.g. 0.5 -> 1/2 and 0.3333333333 -> 1/3.
func ratFromFloat(x float64) (rat, bool) {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > ratLimit {
		return rat{}, false
	}
	for q := int64(1); q <= 1000; q++ {
		p := math.Round(x * float64(q))
		if math.Abs(p/float64(q)-x) <= 1e-9*math.Max(1, math.Abs(x)) {
			return mkRat(int64(p), q)
		}
	}
	return rat{}, false
}

// Base dimensions: mass, length, time, electric current, temperature,
// amount of substance.
const nDim = 6

var dimNames = [nDim]string{"M", "L", "T", "I", "Θ", "N"}

type dims [nDim]rat

// unit is a physical unit: a scale factor relative to SI base units, the
// dimension exponents and the symbolic product of named units it was built
// from (kept for messages: g/bar * bar prints as "g"). Offsets (degC versus
// K) are ignored: degC is a temperature with scale 1.
type unit struct {
	scale float64
	dim   dims
	syms  []usym // sorted by name, exponents non-zero
}

type usym struct {
	name string
	exp  rat
}

var one = unit{scale: 1, dim: zeroDims()}

func zeroDims() dims {
	var d dims
	for i := range d {
		d[i] = rat{0, 1}
	}
	return d
}

type unitDef struct {
	scale float64
	dim   [nDim]int64
}

// unitTable is the closed list of unit names. Prefixes are not general:
// only the listed prefixed names exist.
var unitTable = map[string]unitDef{
	// dimensionless
	"%":   {0.01, [nDim]int64{}},
	"ppm": {1e-6, [nDim]int64{}},
	"rad": {1, [nDim]int64{}},
	// mass
	"kg": {1, [nDim]int64{1}},
	"g":  {1e-3, [nDim]int64{1}},
	"mg": {1e-6, [nDim]int64{1}},
	// length
	"m":  {1, [nDim]int64{0, 1}},
	"km": {1e3, [nDim]int64{0, 1}},
	"cm": {1e-2, [nDim]int64{0, 1}},
	"mm": {1e-3, [nDim]int64{0, 1}},
	"um": {1e-6, [nDim]int64{0, 1}},
	// time
	"s":   {1, [nDim]int64{0, 0, 1}},
	"ms":  {1e-3, [nDim]int64{0, 0, 1}},
	"min": {60, [nDim]int64{0, 0, 1}},
	"h":   {3600, [nDim]int64{0, 0, 1}},
	"Hz":  {1, [nDim]int64{0, 0, -1}},
	// current
	"A":  {1, [nDim]int64{0, 0, 0, 1}},
	"mA": {1e-3, [nDim]int64{0, 0, 0, 1}},
	// temperature (offsets ignored)
	"K":    {1, [nDim]int64{0, 0, 0, 0, 1}},
	"degC": {1, [nDim]int64{0, 0, 0, 0, 1}},
	"degF": {5.0 / 9.0, [nDim]int64{0, 0, 0, 0, 1}},
	// amount
	"mol": {1, [nDim]int64{0, 0, 0, 0, 0, 1}},
	// force
	"N":  {1, [nDim]int64{1, 1, -2}},
	"kN": {1e3, [nDim]int64{1, 1, -2}},
	// pressure
	"Pa":   {1, [nDim]int64{1, -1, -2}},
	"kPa":  {1e3, [nDim]int64{1, -1, -2}},
	"MPa":  {1e6, [nDim]int64{1, -1, -2}},
	"bar":  {1e5, [nDim]int64{1, -1, -2}},
	"mbar": {1e2, [nDim]int64{1, -1, -2}},
	"psi":  {6894.757293168361, [nDim]int64{1, -1, -2}},
	// energy, power
	"J":  {1, [nDim]int64{1, 2, -2}},
	"kJ": {1e3, [nDim]int64{1, 2, -2}},
	"Wh": {3600, [nDim]int64{1, 2, -2}},
	"W":  {1, [nDim]int64{1, 2, -3}},
	"kW": {1e3, [nDim]int64{1, 2, -3}},
	// electrical
	"V":   {1, [nDim]int64{1, 2, -3, -1}},
	"mV":  {1e-3, [nDim]int64{1, 2, -3, -1}},
	"kV":  {1e3, [nDim]int64{1, 2, -3, -1}},
	"Ohm": {1, [nDim]int64{1, 2, -3, -2}},
	// volume
	"L":  {1e-3, [nDim]int64{0, 3}},
	"mL": {1e-6, [nDim]int64{0, 3}},
}

// UnitNames lists the unit names the language knows, sorted.
func UnitNames() []string {
	out := make([]string, 0, len(unitTable)+1)
	out = append(out, "1")
	for k := range unitTable {
		out = append(out, k)
	}
	sort.Strings(out[1:])
	return out
}

func namedUnit(name string) (unit, bool) {
	def, ok := unitTable[name]
	if !ok {
		return unit{}, false
	}
	u := unit{scale: def.scale, dim: zeroDims(), syms: []usym{{name, ratInt(1)}}}
	for i, e := range def.dim {
		u.dim[i] = ratInt(e)
	}
	return u, true
}

// mul returns a*b^sign (sign is +1 or -1).
func (a unit) mulPow(b unit, sign int64) (unit, bool) {
	r := unit{scale: a.scale, dim: a.dim}
	if sign > 0 {
		r.scale *= b.scale
	} else {
		r.scale /= b.scale
	}
	for i := range r.dim {
		e := b.dim[i]
		if sign < 0 {
			e = e.neg()
		}
		var ok bool
		if r.dim[i], ok = r.dim[i].add(e); !ok {
			return unit{}, false
		}
	}
	m := map[string]rat{}
	for _, s := range a.syms {
		m[s.name] = s.exp
	}
	for _, s := range b.syms {
		e := s.exp
		if sign < 0 {
			e = e.neg()
		}
		if cur, ok := m[s.name]; ok {
			var ok2 bool
			if e, ok2 = cur.add(e); !ok2 {
				return unit{}, false
			}
		}
		m[s.name] = e
	}
	r.syms = symsFromMap(m)
	return r, true
}

func (a unit) mul(b unit) (unit, bool) { return a.mulPow(b, 1) }
func (a unit) div(b unit) (unit, bool) { return a.mulPow(b, -1) }

// pow raises a to the rational power p.
func (a unit) pow(p rat) (unit, bool) {
	r := unit{scale: math.Pow(a.scale, p.float()), dim: a.dim}
	for i := range r.dim {
		var ok bool
		if r.dim[i], ok = r.dim[i].mul(p); !ok {
			return unit{}, false
		}
	}
	m := map[string]rat{}
	for _, s := range a.syms {
		e, ok := s.exp.mul(p)
		if !ok {
			return unit{}, false
		}
		m[s.name] = e
	}
	r.syms = symsFromMap(m)
	return r, true
}

func symsFromMap(m map[string]rat) []usym {
	var out []usym
	for k, v := range m {
		if !v.isZero() {
			out = append(out, usym{k, v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (a unit) dimensionless() bool {
	for _, e := range a.dim {
		if !e.isZero() {
			return false
		}
	}
	return true
}

// isOne reports a pure number: dimensionless with scale 1 (so not %).
func (a unit) isOne() bool { return a.dimensionless() && scaleEq(a.scale, 1) }

func scaleEq(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func (a unit) sameDim(b unit) bool { return a.dim == b.dim }

// same reports equal dimension and equal scale: the values can be added
// without conversion.
func (a unit) same(b unit) bool { return a.sameDim(b) && scaleEq(a.scale, b.scale) }

// String formats the symbolic form, e.g. "g/bar", "kg*m/s^2", "V^(1/2)/s".
func (a unit) String() string {
	var num, den []string
	for _, s := range a.syms {
		e := s.exp
		neg := e.n < 0
		if neg {
			e = e.neg()
		}
		txt := s.name
		if e.d != 1 {
			txt += "^(" + e.String() + ")"
		} else if e.n != 1 {
			txt += "^" + e.String()
		}
		if neg {
			den = append(den, txt)
		} else {
			num = append(num, txt)
		}
	}
	out := "1"
	if len(num) > 0 {
		out = strings.Join(num, "*")
	}
	switch len(den) {
	case 0:
	case 1:
		out += "/" + den[0]
	default:
		out += "/(" + strings.Join(den, "*") + ")"
	}
	return out
}

// dimString formats the dimension in base dimensions, e.g. "M L^-1 T^-2".
func (a unit) dimString() string {
	var parts []string
	for i, e := range a.dim {
		if e.isZero() {
			continue
		}
		if e.n == 1 && e.d == 1 {
			parts = append(parts, dimNames[i])
		} else if e.d == 1 {
			parts = append(parts, dimNames[i]+"^"+e.String())
		} else {
			parts = append(parts, dimNames[i]+"^("+e.String()+")")
		}
	}
	if len(parts) == 0 {
		return "dimensionless"
	}
	return strings.Join(parts, " ")
}

// mismatch explains why a and b cannot be added or compared.
func mismatch(a, b unit) string {
	as, bs := a.String(), b.String()
	if !a.sameDim(b) {
		return as + " [" + a.dimString() + "] vs " + bs + " [" + b.dimString() + "]"
	}
	return as + " vs " + bs + ": same dimension, but the scale differs by a factor " +
		strconv.FormatFloat(a.scale/b.scale, 'g', 6, 64) + " (the language never converts units)"
}

// parseUnitText parses a unit written as in a `unit` clause ("g/bar",
// "m/s^2", "V^(1/2)/s"); "?" is not accepted.
func parseUnitText(s string) (unit, error) {
	d := &diag{file: "unit"}
	p := &parser{toks: lex([]byte(s), d), src: []byte(s), d: d, m: &rawModel{}}
	var us *unitSpec
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(bailout); !ok {
					panic(r)
				}
			}
		}()
		us = p.unitSpec(false)
		if !p.atEnd() {
			p.fail(p.peek().pos, "unexpected %s after the unit", p.peek().describe())
		}
	}()
	if err := d.err(); err != nil {
		return unit{}, err
	}
	return us.u, nil
}
