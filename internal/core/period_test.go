package core

import (
	"testing"
	"time"
)

func TestParsePeriod(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		str  string
	}{
		{"1638us", 1638 * time.Microsecond, "1.638ms"},
		{"1638µs", 1638 * time.Microsecond, "1.638ms"},
		{" 1.638437ms ", 1638437 * time.Nanosecond / 1000 * 1000, ""},
		{"19.53125us", 0, ""},
		{"100ms", 100 * time.Millisecond, "100ms"},
		{"5s", 5 * time.Second, "5s"},
		{"2min", 2 * time.Minute, "2min"},
		{"1.5min", 90 * time.Second, "1m30s"},
		{"1h30min", 90 * time.Minute, "1h30m0s"},
		{"1h", time.Hour, "1h0m0s"},
		{"0s", 0, ""},
		{"-1ms", 0, ""},
		{"10", 0, ""},
		{"fast", 0, ""},
		{"1.5us", 0, ""},
	} {
		got, err := ParsePeriod(c.in)
		if c.want == 0 || c.in == " 1.638437ms " {
			if err == nil || CodeOf(err) != CodeInvalidArgument {
				t.Errorf("%q: got %v, %v; want AML_INVALID_ARGUMENT", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		if s := FormatPeriod(got); s != c.str {
			t.Errorf("FormatPeriod(%v) = %q, want %q", got, s, c.str)
		}
		if back, err := ParsePeriod(FormatPeriod(got)); err != nil || back != got {
			t.Errorf("round trip of %v: %v %v", got, back, err)
		}
	}
}
