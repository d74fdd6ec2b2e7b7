package core

import (
	"regexp"
	"strings"
	"time"
)

// minUnit matches the unit "min" (minutes) after a number, which Go's
// duration syntax writes "m".
var minUnit = regexp.MustCompile(`([0-9.])min`)

// ParsePeriod parses a sampling period or other plant duration: Go's
// duration syntax ("1.638ms", "1638us", "1638µs", "100ms", "5s", "1h30m")
// plus "min" for minutes ("2min", "1.5min"). The result is positive and a
// whole number of microseconds, the resolution of stored sample times.
func ParsePeriod(s string) (time.Duration, error) {
	d, err := ParseDuration(s)
	switch {
	case err != nil:
		return 0, Errorf(CodeInvalidArgument, "period %s: want a duration such as \"1638us\", \"1.638ms\", \"100ms\", \"5s\" or \"2min\"", Quote(s))
	case d <= 0:
		return 0, Errorf(CodeInvalidArgument, "period %s must be positive", Quote(s))
	case d%time.Microsecond != 0:
		return 0, Errorf(CodeInvalidArgument, "period %s is not a whole number of microseconds (the resolution of sample times): round it, e.g. %s", Quote(s), d.Round(time.Microsecond))
	}
	return d, nil
}

// ParseDuration is time.ParseDuration with "min" for minutes as well as
// "m" ("2min", "1h30min"), surrounding space ignored.
func ParseDuration(s string) (time.Duration, error) {
	return time.ParseDuration(minUnit.ReplaceAllString(strings.TrimSpace(s), "${1}m"))
}

// FormatPeriod writes a period the way ParsePeriod reads it: Go's
// duration syntax ("1.638437ms", "100ms", "1m30s"), whole minutes below an
// hour as "2min".
func FormatPeriod(d time.Duration) string {
	if d >= time.Minute && d < time.Hour && d%time.Minute == 0 {
		return strings.TrimSuffix(d.String(), "0s") + "in" // "2m0s" → "2min"
	}
	return d.String()
}
