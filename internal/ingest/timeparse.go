package ingest

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

type timeUnit int

const (
	unitAuto timeUnit = iota
	unitUs
	unitMs
	unitS
	unitMin
	unitH
	unitRFC3339
)

func (u timeUnit) String() string {
	switch u {
	case unitUs:
		return "us"
	case unitMs:
		return "ms"
	case unitS:
		return "s"
	case unitMin:
		return "min"
	case unitH:
		return "h"
	case unitRFC3339:
		return "rfc3339"
	}
	return "auto"
}

// timeLikeNames are the header names (case-insensitive) auto-detected as the
// time column.
var timeLikeNames = []string{"time", "ts", "timestamp", "datetime", "date", "t",
	"time_ms", "time_s", "time_us", "timestamp_ms", "timestamp_us", "epoch_ms", "epoch_s", "epoch_us"}

func isTimeLike(name string) bool {
	for _, n := range timeLikeNames {
		if strings.EqualFold(name, n) {
			return true
		}
	}
	return false
}

// unitFromName returns the unit a column name's suffix implies (_us, _ms,
// _s).
func unitFromName(name string) timeUnit {
	l := strings.ToLower(name)
	switch {
	case strings.HasSuffix(l, "_us"):
		return unitUs
	case strings.HasSuffix(l, "_ms"):
		return unitMs
	case strings.HasSuffix(l, "_s"):
		return unitS
	}
	return unitAuto
}

// autoMsThreshold: an auto-detected numeric time whose first value is at
// least this large is epoch milliseconds, otherwise seconds. 1e11 s is the
// year 5138; 1e11 ms is 1973-03-03. Likewise from autoUsThreshold on it is
// epoch microseconds (1e14 ms is the year 5138, 1e14 µs 1973-03-03).
const (
	autoMsThreshold = 1e11
	autoUsThreshold = 1e14
)

// timeParser turns time cells into epoch microseconds. In auto mode the unit
// is fixed by the first cell that parses and holds for the rest of the file.
type timeParser struct {
	unit timeUnit
	// loc is the zone of times written without one (CSVOptions.TZ); nil
	// refuses them. comma reads a decimal comma in numeric times.
	loc   *time.Location
	comma bool
	buf   []byte
	// bad, when a time was refused for a reason of its own (a local time
	// that is ambiguous or does not exist), says why.
	bad string
}

// parse returns the time in epoch µs, or ok=false.
func (p *timeParser) parse(b []byte) (us int64, ok bool) {
	p.bad = ""
	if p.comma && p.unit != unitRFC3339 {
		b = p.dotted(b)
	}
	switch p.unit {
	case unitUs:
		return parseEpoch(b, 1)
	case unitMs:
		return parseEpoch(b, 1000)
	case unitS:
		return parseEpoch(b, 1_000_000)
	case unitMin:
		return parseScaled(b, 60_000_000)
	case unitH:
		return parseScaled(b, 3_600_000_000)
	case unitRFC3339:
		return p.parseDateTime(b)
	}
	if v, ok := parseDecimal(b); ok {
		u, scale := unitS, int64(1_000_000)
		switch a := math.Abs(v); {
		case a >= autoUsThreshold:
			u, scale = unitUs, 1
		case a >= autoMsThreshold:
			u, scale = unitMs, 1000
		}
		us, ok = parseEpoch(b, scale)
		if ok {
			p.unit = u
		}
		return us, ok
	}
	us, ok = p.parseDateTime(b)
	if ok {
		p.unit = unitRFC3339
	}
	return us, ok
}

// dotted is b with a decimal comma read as a point.
func (p *timeParser) dotted(b []byte) []byte {
	if bytes.IndexByte(b, ',') < 0 {
		return b
	}
	p.buf = append(p.buf[:0], b...)
	for i, c := range p.buf {
		if c == ',' {
			p.buf[i] = '.'
		}
	}
	return p.buf
}

// parseScaled converts a decimal number of units of scale microseconds
// (minutes, hours) to microseconds, rounded to the nearest one.
func parseScaled(b []byte, scale int64) (int64, bool) {
	v, ok := parseDecimal(b)
	if !ok {
		return 0, false
	}
	x := math.Round(v * float64(scale))
	if math.IsNaN(x) || x >= 9.2e18 || x <= -9.2e18 {
		return 0, false
	}
	return int64(x), true
}

// parseDateTime is parseRFC3339, and with a zone (loc) also a local date
// and time without an offset, read in that zone. A local time in the hour
// a daylight-saving change repeats is ambiguous and one in the hour it
// skips does not exist: both are refused (p.bad says which).
func (p *timeParser) parseDateTime(b []byte) (int64, bool) {
	if us, ok := parseRFC3339(b); ok || p.loc == nil {
		return us, ok
	}
	y, mo, d, h, mi, s, frac, ok := parseLocal(b)
	if !ok {
		return 0, false
	}
	t := time.Date(int(y), time.Month(mo), int(d), int(h), int(mi), int(s), int(frac)*1e3, p.loc)
	ty, tmo, td := t.Date()
	th, tmi, ts := t.Clock()
	if int64(ty) != y || int64(tmo) != mo || int64(td) != d || int64(th) != h || int64(tmi) != mi || int64(ts) != s {
		p.bad = fmt.Sprintf("does not exist in %s (the clocks skip it at a daylight-saving change)", p.loc)
		return 0, false
	}
	for _, delta := range [...]time.Duration{-time.Hour, time.Hour, -30 * time.Minute, 30 * time.Minute} {
		u := t.Add(delta).In(p.loc)
		uy, umo, ud := u.Date()
		uh, umi, us := u.Clock()
		if uy == ty && umo == tmo && ud == td && uh == th && umi == tmi && us == ts {
			p.bad = fmt.Sprintf("is ambiguous in %s (the clocks show it twice at a daylight-saving change); write it with its offset", p.loc)
			return 0, false
		}
	}
	return t.UnixMicro(), true
}

// parseLocal parses YYYY-MM-DD[T ]hh:mm[:ss[.fraction]] without a zone;
// frac is the fraction in µs (rounded to the nearest).
func parseLocal(b []byte) (y, mo, d, h, mi, s, frac int64, ok bool) {
	if len(b) < 16 || b[4] != '-' || b[7] != '-' || b[13] != ':' || (b[10] != 'T' && b[10] != 't' && b[10] != ' ') {
		return
	}
	var ok1, ok2, ok3, ok4, ok5 bool
	y, ok1 = digits(b[0:4])
	mo, ok2 = digits(b[5:7])
	d, ok3 = digits(b[8:10])
	h, ok4 = digits(b[11:13])
	mi, ok5 = digits(b[14:16])
	if !(ok1 && ok2 && ok3 && ok4 && ok5) {
		return
	}
	i := 16
	if i < len(b) {
		if b[i] != ':' || len(b) < 19 {
			return
		}
		var oks bool
		if s, oks = digits(b[17:19]); !oks {
			return
		}
		i = 19
		if i < len(b) {
			if b[i] != '.' && b[i] != ',' {
				return
			}
			n := 0
			for i++; i < len(b); i++ {
				c := b[i]
				if c < '0' || c > '9' {
					return
				}
				switch {
				case n < 6:
					frac = frac*10 + int64(c-'0')
				case n == 6 && c >= '5':
					frac++
				}
				n++
			}
			if n == 0 {
				return
			}
			for ; n < 6; n++ {
				frac *= 10
			}
		}
	}
	if mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || s > 59 {
		return
	}
	return y, mo, d, h, mi, s, frac, true
}

// want describes what the parser expects, for error messages.
func (p *timeParser) want() string {
	switch p.unit {
	case unitUs:
		return "epoch microseconds"
	case unitMs:
		return "epoch milliseconds"
	case unitS:
		return "epoch seconds"
	case unitMin:
		return "a number of minutes"
	case unitH:
		return "a number of hours"
	case unitRFC3339:
		if p.loc != nil {
			return "an RFC 3339 time, or a local date and time in " + p.loc.String() + " (2024-05-01 12:00:00)"
		}
		return "an RFC 3339 time with a zone, e.g. 2024-05-01T12:00:00.250+02:00 (a local time without one needs --tz)"
	}
	if p.loc != nil {
		return "epoch seconds, epoch milliseconds, an RFC 3339 time or a local date and time in " + p.loc.String()
	}
	return "epoch seconds, epoch milliseconds or an RFC 3339 time with a zone (a local time without one needs --tz)"
}

// isDecimal reports whether b is a plain decimal number:
// [+-]digits[.digits][(e|E)[+-]digits] with at least one mantissa digit.
// Hexadecimal floats, underscores, Inf and NaN are not.
func isDecimal(b []byte) bool {
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	digits := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
		digits++
	}
	if i < len(b) && b[i] == '.' {
		i++
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		e := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			e++
		}
		if e == 0 {
			return false
		}
	}
	return i == len(b)
}

// parseEpoch converts the decimal number b, counted in units of scale
// microseconds (1 for µs, 1000 for ms, 1e6 for s; a power of ten), to
// microseconds, rounding to the nearest microsecond (halves away from
// zero). Numbers without an exponent are converted exactly in integer
// arithmetic.
func parseEpoch(b []byte, scale int64) (int64, bool) {
	if !isDecimal(b) {
		return 0, false
	}
	for _, c := range b {
		if c == 'e' || c == 'E' {
			v, err := strconv.ParseFloat(string(b), 64)
			if err != nil {
				return 0, false
			}
			x := math.Round(v * float64(scale))
			if math.IsNaN(x) || x >= 9.2e18 || x <= -9.2e18 {
				return 0, false
			}
			return int64(x), true
		}
	}
	i, neg := 0, false
	if b[0] == '+' || b[0] == '-' {
		neg = b[0] == '-'
		i++
	}
	const limit = math.MaxInt64 / 1000
	var ip int64
	for ; i < len(b) && b[i] != '.'; i++ {
		if ip > limit {
			return 0, false
		}
		ip = ip*10 + int64(b[i]-'0')
	}
	if ip > math.MaxInt64/scale-1 {
		return 0, false
	}
	us := ip * scale
	if i < len(b) { // fraction
		frac := b[i+1:]
		digits := 0 // fraction digits that are whole microseconds
		for s := scale; s >= 10; s /= 10 {
			digits++
		}
		var f int64
		for k := 0; k < digits; k++ {
			f *= 10
			if k < len(frac) {
				f += int64(frac[k] - '0')
			}
		}
		us += f
		if digits < len(frac) && frac[digits] >= '5' {
			us++
		}
	}
	if neg {
		us = -us
	}
	return us, true
}

// ParseRFC3339Ms parses an RFC 3339 time with a zone to epoch milliseconds
// by the same rules as a CSV time column (fraction rounded to the nearest
// ms; a space may replace the T). The CLI uses it for --start.
func ParseRFC3339Ms(s string) (int64, error) {
	us, ok := parseRFC3339([]byte(strings.TrimSpace(s)))
	if !ok {
		return 0, core.Errorf(core.CodeInvalidArgument,
			"time %q: want RFC 3339 with a zone, e.g. 2024-05-01T12:00:00.250+02:00", s)
	}
	return core.UsToMs(us + 500), nil
}

// parseRFC3339 parses YYYY-MM-DDThh:mm:ss[.fraction](Z|±hh:mm) to epoch µs,
// rounding the fraction to the nearest microsecond. A space or 't' may
// separate date and time, 'z' may stand for 'Z', and ',' for the decimal
// point. A zone is required: a time without one is ambiguous.
func parseRFC3339(b []byte) (int64, bool) {
	if len(b) < 20 {
		return 0, false
	}
	y, ok1 := digits(b[0:4])
	mo, ok2 := digits(b[5:7])
	d, ok3 := digits(b[8:10])
	h, ok4 := digits(b[11:13])
	mi, ok5 := digits(b[14:16])
	s, ok6 := digits(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		b[4] != '-' || b[7] != '-' || b[13] != ':' || b[16] != ':' ||
		(b[10] != 'T' && b[10] != 't' && b[10] != ' ') {
		return 0, false
	}
	if mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || s > 59 {
		return 0, false
	}
	i := 19
	var frac int64
	if b[i] == '.' || b[i] == ',' {
		i++
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			switch {
			case n < 6:
				frac = frac*10 + int64(b[i]-'0')
			case n == 6 && b[i] >= '5':
				frac++
			}
			n++
			i++
		}
		if n == 0 {
			return 0, false
		}
		for ; n < 6; n++ {
			frac *= 10
		}
	}
	if i >= len(b) {
		return 0, false
	}
	var off int64
	switch z := b[i:]; {
	case len(z) == 1 && (z[0] == 'Z' || z[0] == 'z'):
	case len(z) == 6 && (z[0] == '+' || z[0] == '-') && z[3] == ':':
		oh, okh := digits(z[1:3])
		om, okm := digits(z[4:6])
		if !okh || !okm || oh > 23 || om > 59 {
			return 0, false
		}
		off = (oh*60 + om) * 60_000_000
		if z[0] == '-' {
			off = -off
		}
	default:
		return 0, false
	}
	days := daysFromCivil(y, mo, d)
	return days*86_400_000_000 + h*3_600_000_000 + mi*60_000_000 + s*1_000_000 + frac - off, true
}

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date (H. Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseDecimal parses a plain decimal number (the syntax isDecimal accepts)
// to the nearest float64, exactly as strconv.ParseFloat does. Numbers with
// at most 15 significant digits and a small exponent, which is nearly every
// sensor value, take Clinger's exact fast path (one correctly rounded
// multiplication or division of two exact float64s); the rest go to
// strconv.ParseFloat. ok is false for anything that is not a finite decimal.
func parseDecimal(b []byte) (v float64, ok bool) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		i++
	}
	var mant uint64
	nd, digits, exp := 0, 0, 0
	exact := true
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		digits++
		if nd < 19 {
			mant = mant*10 + uint64(c)
			if mant != 0 {
				nd++
			}
		} else {
			exp++
			exact = false
		}
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b); i++ {
			c := b[i] - '0'
			if c > 9 {
				break
			}
			digits++
			if nd < 19 {
				mant = mant*10 + uint64(c)
				if mant != 0 {
					nd++
				}
				exp--
			} else {
				exact = false
			}
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		e, ed := 0, 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if e < 100000 {
				e = e*10 + int(b[i]-'0')
			}
			ed++
		}
		if ed == 0 {
			return 0, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(b) {
		return 0, false
	}
	if exact && mant>>53 == 0 && exp >= -22 && exp <= 22 {
		f := float64(mant)
		if exp < 0 {
			f /= pow10[-exp]
		} else {
			f *= pow10[exp]
		}
		if neg {
			f = -f
		}
		return f, true
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// digits parses a run of decimal digits (ok false for none or any other
// byte).
func digits(s []byte) (int64, bool) {
	var v int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, len(s) > 0
}
