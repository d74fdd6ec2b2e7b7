package ingest

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

func TestParseEpoch(t *testing.T) {
	tests := []struct {
		in    string
		scale int64
		want  int64
		ok    bool
	}{
		{"0", 1000, 0, true},
		{"12.5", 1000, 12500, true},
		{"12.0004", 1000, 12000, true},
		{"12.0005", 1000, 12001, true},
		{"12.00049999999", 1000, 12000, true},
		{"-12.0005", 1000, -12001, true},
		{"-0.0004", 1000, 0, true},
		{"+3", 1000, 3000, true},
		{".5", 1000, 500, true},
		{"5.", 1000, 5000, true},
		{"1700000000.123456", 1000, 1700000000123, true},
		{"1700000000.9999", 1000, 1700000001000, true},
		{"1.5e1", 1000, 15000, true},
		{"1.7e12", 1, 1700000000000, true},
		{"1700000000000", 1, 1700000000000, true},
		{"1700000000000.5", 1, 1700000000001, true},
		{"1700000000000.4999", 1, 1700000000000, true},
		{"-1.5", 1, -2, true},
		{"9223372036854775", 1000, 0, false}, // ×1000 overflows
		{"9223372036854774", 1000, 9223372036854774000, true},
		{"99999999999999999999", 1, 0, false},
		{"1e30", 1000, 0, false},
		{"", 1000, 0, false},
		{"-", 1000, 0, false},
		{".", 1000, 0, false},
		{"1e", 1000, 0, false},
		{"0x10", 1, 0, false},
		{"inf", 1, 0, false},
		{"NaN", 1, 0, false},
		{"1 2", 1, 0, false},
		{"1_000", 1, 0, false},
	}
	for _, tc := range tests {
		got, ok := parseEpoch([]byte(tc.in), tc.scale)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseEpoch(%q, %d) = %d, %v; want %d, %v", tc.in, tc.scale, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseRFC3339(t *testing.T) {
	tests := []struct {
		in   string
		want string // time.RFC3339Nano in UTC, or "" for invalid
	}{
		{"2024-03-01T12:00:00+02:00", "2024-03-01T10:00:00Z"},
		{"2024-03-01T12:00:00-02:30", "2024-03-01T14:30:00Z"},
		{"2024-03-01T00:00:00.1Z", "2024-03-01T00:00:00.1Z"},
		{"2024-03-01T00:00:00.12Z", "2024-03-01T00:00:00.12Z"},
		{"2024-03-01T00:00:00.0005Z", "2024-03-01T00:00:00.0005Z"},
		{"2024-03-01T00:00:00.00049Z", "2024-03-01T00:00:00.00049Z"},
		{"2024-03-01T00:00:00.0000005Z", "2024-03-01T00:00:00.000001Z"},
		{"2024-03-01T00:00:00.00000049Z", "2024-03-01T00:00:00Z"},
		{"2024-12-31T23:59:59.9999995Z", "2025-01-01T00:00:00Z"},
		{"2024-12-31T23:59:59.9999Z", "2024-12-31T23:59:59.9999Z"},
		{"2024-03-01 10:00:00Z", "2024-03-01T10:00:00Z"},
		{"2024-03-01t10:00:00z", "2024-03-01T10:00:00Z"},
		{"2024-03-01T10:00:00,5Z", "2024-03-01T10:00:00.5Z"},
		{"1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.999Z"},
		{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"},
		{"1600-02-29T00:00:00Z", "1600-02-29T00:00:00Z"},
		{"2000-02-29T00:00:00Z", "2000-02-29T00:00:00Z"},
		{"9999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"},
		{"1900-02-29T00:00:00Z", ""},
		{"2023-02-29T00:00:00Z", ""},
		{"2024-04-31T00:00:00Z", ""},
		{"2024-13-01T00:00:00Z", ""},
		{"2024-00-01T00:00:00Z", ""},
		{"2024-01-00T00:00:00Z", ""},
		{"2024-01-01T24:00:00Z", ""},
		{"2024-01-01T00:60:00Z", ""},
		{"2024-01-01T00:00:60Z", ""},
		{"2024-01-01T00:00:00", ""},
		{"2024-01-01T00:00:00.Z", ""},
		{"2024-01-01T00:00:00+0200", ""},
		{"2024-01-01T00:00:00+24:00", ""},
		{"2024-01-01T00:00:00+02:60", ""},
		{"2024-01-01", ""},
		{"2024-01-01X00:00:00Z", ""},
		{"2024-01-01T00:00:00ZZ", ""},
		{"+024-01-01T00:00:00Z", ""},
	}
	for _, tc := range tests {
		got, ok := parseRFC3339([]byte(tc.in))
		if tc.want == "" {
			if ok {
				t.Errorf("parseRFC3339(%q) = %d, want invalid", tc.in, got)
			}
			continue
		}
		w, err := time.Parse(time.RFC3339Nano, tc.want)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || got != w.UnixMicro() {
			t.Errorf("parseRFC3339(%q) = %d, %v; want %d", tc.in, got, ok, w.UnixMicro())
		}
	}
}

func TestParseDecimalMatchesStrconv(t *testing.T) {
	for _, s := range []string{
		"0", "-0", "1", "0.1", "0.3", "-2.5", "1e22", "1e23", "9007199254740993",
		"9007199254740992", "123456789012345678", "1234567890123456789012",
		"0.000000000000000000000000001", "1.7976931348623157e308", "4.9e-324",
		"2.2250738585072011e-308", "0.1e-5", "00000000000000000000000001.5", "1.00000000000000000000001",
		"3.14159265358979323846264338327950288", "100000000000000000000000", "7.", ".7",
	} {
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(s, err)
		}
		got, ok := parseDecimal([]byte(s))
		if !ok || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("parseDecimal(%q) = %v (%v), want %v", s, got, ok, want)
		}
	}
}

// FuzzParseDecimal: parseDecimal agrees bit for bit with strconv.ParseFloat
// on every plain decimal, and rejects everything else.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"1.5", "-0.30000000000000004", "1e400", "0x1p3", "inf", "9007199254740993", "1_0", ".e1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseDecimal([]byte(s))
		if !isDecimal([]byte(s)) {
			if ok {
				t.Fatalf("parseDecimal(%q) accepted a non-decimal", s)
			}
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(want, 0) {
			if ok {
				t.Fatalf("parseDecimal(%q) = %v, strconv says %v %v", s, got, want, err)
			}
			return
		}
		if !ok || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseDecimal(%q) = %v (%v), want %v", s, got, ok, want)
		}
	})
}

// FuzzRFC3339: whatever parseRFC3339 accepts, time.Parse accepts too (after
// spelling the separator T and the zone Z) with the same instant rounded to
// the nearest microsecond; and whatever time.Parse accepts in the strict
// form is accepted.
func FuzzRFC3339(f *testing.F) {
	for _, s := range []string{"2024-03-01T12:00:00+02:00", "2024-03-01 10:00:00.9996-01:30", "2024-02-29t23:59:59.5z", "2023-02-29T00:00:00Z", "0000-01-01T00:00:00+24:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseRFC3339([]byte(s))
		norm := []byte(s)
		if len(norm) > 10 && (norm[10] == 't' || norm[10] == ' ') {
			norm[10] = 'T'
		}
		if n := len(norm); n > 0 && norm[n-1] == 'z' {
			norm[n-1] = 'Z'
		}
		if len(norm) > 19 && norm[19] == ',' {
			norm[19] = '.'
		}
		tm, err := time.Parse(time.RFC3339Nano, string(norm))
		if ok {
			if err != nil {
				t.Fatalf("parseRFC3339(%q) = %d but time.Parse fails: %v", s, got, err)
			}
			want := roundUs(tm, s)
			if got != want {
				t.Fatalf("parseRFC3339(%q) = %d, time.Parse says %d", s, got, want)
			}
			return
		}
		// Strict RFC 3339 (4-digit year, 'T', fraction with '.', zone Z or
		// ±hh:mm) that Go accepts must be accepted.
		if err == nil && string(norm) == s && strictShape(s) {
			t.Fatalf("parseRFC3339(%q) rejected what time.Parse accepts (%v)", s, tm)
		}
	})
}

// roundMs is tm in epoch ms, rounded to the nearest ms using the decimal
// fraction as written (time.Parse keeps only nanoseconds).
func roundUs(tm time.Time, s string) int64 {
	msv := tm.Unix()*1_000_000 + int64(tm.Nanosecond()/1e3)
	if i := strings.IndexAny(s[19:], ".,"); i == 0 {
		frac := s[20:]
		if j := strings.IndexFunc(frac, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
			frac = frac[:j]
		}
		if len(frac) > 6 && frac[6] >= '5' {
			msv++
		}
	}
	return msv
}

func strictShape(s string) bool {
	if len(s) < 20 || s[10] != 'T' {
		return false
	}
	for i, c := range s[:19] {
		switch i {
		case 4, 7:
			if c != '-' {
				return false
			}
		case 10:
		case 13, 16:
			if c != ':' {
				return false
			}
		default:
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	rest := s[19:]
	if strings.HasPrefix(rest, ".") {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 1 {
			return false
		}
		rest = rest[i:]
	}
	if rest == "Z" {
		return true
	}
	// RFC 3339's time-numoffset: hours 00–23, minutes 00–59 (time.Parse
	// also takes +24:00, which is not RFC 3339 and the parser refuses)
	return len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
		strings.Trim(rest[1:3]+rest[4:6], "0123456789") == "" && rest[1:3] <= "23" && rest[4:6] <= "59"
}

func TestParseRFC3339Ms(t *testing.T) {
	got, err := ParseRFC3339Ms(" 2024-05-01T12:00:00.250+02:00 ")
	if err != nil || got != ms(2024, 5, 1, 10, 0, 0, 250) {
		t.Errorf("got %d %v", got, err)
	}
	if _, err := ParseRFC3339Ms("2024-05-01"); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Errorf("date only: %v", err)
	}
}
