package core

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// One validation of what every ingest path writes (the JSON batch, CSV
// files, the connectors): ids of lines, products, recipes and runs, node
// ids, sample states and sample times. The same value is accepted or
// refused with the same message whichever way it arrives.
const (
	// MaxIDBytes bounds a line, product, recipe or run id.
	MaxIDBytes = 128
	// MaxNodeIDBytes bounds a node id (plant tag names can be long).
	MaxNodeIDBytes = 256
	// MaxStateBytes bounds a sample state (ok, bad, uncertain, ...).
	MaxStateBytes = 32
	// MinTsMs and MaxTsMs are the sample times AML stores: the years 0000
	// to 9999 (what RFC 3339 can write), so that every stored time can be
	// formatted, bucketed and subtracted without overflow.
	MinTsMs int64 = -62167219200000
	MaxTsMs int64 = 253402300799999
	// MinTsUs and MaxTsUs are the same bounds in epoch microseconds.
	MinTsUs = MinTsMs * 1000
	MaxTsUs = MaxTsMs*1000 + 999
)

// CheckID checks a line, product, recipe or run id: 1 to MaxIDBytes bytes
// of UTF-8 without control or invisible (format) characters, without
// surrounding space, without a path separator, and not "." or "..". field
// names it in the error.
func CheckID(field, s string) error {
	if err := checkText(field, s, MaxIDBytes); err != nil {
		return err
	}
	if strings.ContainsAny(s, `/\`) || s == "." || s == ".." {
		return FieldErrorf(CodeInvalidArgument, field, "%s %s contains a path separator or is a dot name", field, Quote(s))
	}
	return nil
}

// CheckNodeID checks a node id: as CheckID, but up to MaxNodeIDBytes and
// path separators allowed (tag names such as "flow m3/h").
func CheckNodeID(field, s string) error { return checkText(field, s, MaxNodeIDBytes) }

// CheckState checks a sample state and returns it as stored: empty and
// any case of "ok" are StateOK; any other state is 1 to MaxStateBytes of
// letters, digits, '_', '-' and '.' (bad, uncertain, substituted, ...).
func CheckState(field, s string) (string, error) {
	if s == "" || strings.EqualFold(s, StateOK) {
		return StateOK, nil
	}
	if len(s) > MaxStateBytes {
		return "", FieldErrorf(CodeInvalidArgument, field, "state %s is longer than %d bytes", Quote(s), MaxStateBytes)
	}
	for _, r := range s {
		if !(r < utf8.RuneSelf && (r == '_' || r == '-' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return "", FieldErrorf(CodeInvalidArgument, field, "state %s: want letters, digits, '_', '-' or '.'", Quote(s))
		}
	}
	return s, nil
}

// CheckTs checks a time in epoch ms is within [MinTsMs, MaxTsMs].
func CheckTs(field string, ts int64) error {
	if ts < MinTsMs || ts > MaxTsMs {
		return FieldErrorf(CodeInvalidArgument, field, "time %d ms is outside the years 0000 to 9999", ts)
	}
	return nil
}

// CheckTsUs checks a sample time in epoch µs is within [MinTsUs, MaxTsUs].
func CheckTsUs(field string, ts int64) error {
	if ts < MinTsUs || ts > MaxTsUs {
		return FieldErrorf(CodeInvalidArgument, field, "time %d µs is outside the years 0000 to 9999", ts)
	}
	return nil
}

// UsToMs is the epoch millisecond that contains the epoch microsecond us
// (floor division, also before 1970).
func UsToMs(us int64) int64 {
	ms := us / 1000
	if us%1000 < 0 {
		ms--
	}
	return ms
}

// MsRangeUs is the microsecond range [lo, hi] of the milliseconds [from,
// to] inclusive: every sample within the bounding milliseconds.
func MsRangeUs(from, to int64) (lo, hi int64) { return from * 1000, to*1000 + 999 }

func checkText(field, s string, max int) error {
	switch {
	case s == "":
		return FieldErrorf(CodeInvalidArgument, field, "%s is empty", field)
	case len(s) > max:
		return FieldErrorf(CodeInvalidArgument, field, "%s %s is longer than %d bytes", field, Quote(s), max)
	case !utf8.ValidString(s):
		return FieldErrorf(CodeInvalidArgument, field, "%s %s is not UTF-8", field, Quote(s))
	}
	for _, r := range s {
		if Invisible(r) {
			return FieldErrorf(CodeInvalidArgument, field, "%s %s has a control or invisible character (U+%04X)", field, Quote(s), r)
		}
	}
	if r, _ := utf8.DecodeRuneInString(s); unicode.IsSpace(r) {
		return FieldErrorf(CodeInvalidArgument, field, "%s %s starts with a space", field, Quote(s))
	}
	if r, _ := utf8.DecodeLastRuneInString(s); unicode.IsSpace(r) {
		return FieldErrorf(CodeInvalidArgument, field, "%s %s ends with a space", field, Quote(s))
	}
	return nil
}

// Invisible reports whether r is a control character (C0, DEL, C1), a
// format character (zero-width spaces and joiners, bidirectional
// controls, the byte-order mark, soft hyphen), a variation selector or
// another default-ignorable code point: characters that make two names
// look alike on screen but compare different.
func Invisible(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return true
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Variation_Selector, r), unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
		return true
	case r == 0x034f || r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0: // combining grapheme joiner, Hangul fillers
		return true
	}
	return false
}

// Quote quotes s for a message, cut to 40 bytes (at a rune boundary).
func Quote(s string) string {
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}
