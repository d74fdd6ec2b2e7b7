package app

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// Duration is a span of time written as a Go duration string on every
// surface ("500ms", "90s", "15m", "1h30m"): JSON bodies, query parameters,
// MCP arguments and CLI flags.
type Duration time.Duration

// D is d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string ("90s"); a bare number is refused
// so that no surface guesses a unit.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return core.Errorf(core.CodeInvalidArgument, "want a duration string such as \"90s\" or \"15m\", got %s", b)
	}
	return d.Set(s)
}

// Set parses a duration string (flag.Value and query parameters).
func (d *Duration) Set(s string) error {
	v, err := core.ParseDuration(s)
	if err != nil {
		return core.Errorf(core.CodeInvalidArgument, "want a duration such as \"90s\", \"15min\" or \"1638us\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

// Type names the flag value type.
func (d *Duration) Type() string { return "duration" }

// Instant is a point in time given as epoch milliseconds or RFC 3339; it
// is written back as epoch milliseconds.
type Instant int64

// T is the instant as a time.Time (UTC).
func (i Instant) T() time.Time { return time.UnixMilli(int64(i)).UTC() }

// UnmarshalJSON accepts a number (epoch ms) or an RFC 3339 string.
func (i *Instant) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		*i = Instant(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return core.Errorf(core.CodeInvalidArgument, "want epoch milliseconds or an RFC 3339 time, got %s", b)
	}
	return i.Set(s)
}

// Set parses epoch milliseconds or RFC 3339.
func (i *Instant) Set(s string) error {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*i = Instant(n)
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return core.Errorf(core.CodeInvalidArgument, "%q is neither epoch milliseconds nor RFC 3339", s)
	}
	*i = Instant(t.UnixMilli())
	return nil
}

func (i Instant) String() string { return strconv.FormatInt(int64(i), 10) }

// Type names the flag value type.
func (i *Instant) Type() string { return "time" }

// List is the envelope of every list response.
type List[T any] struct {
	Items []T `json:"items"`
	Count int `json:"count"`
}

// ListOf wraps items (never null).
func ListOf[T any](items []T) List[T] {
	if items == nil {
		items = []T{}
	}
	return List[T]{Items: items, Count: len(items)}
}

// required returns AML_INVALID_ARGUMENT for an empty field.
func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, field, "%s is required", field)
	}
	return nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// limitIn checks an optional count: 0 means def; otherwise lo..hi.
func limitIn(field string, v, lo, hi int) error {
	if v != 0 && (v < lo || v > hi) {
		return core.FieldErrorf(core.CodeInvalidArgument, field, "%s must be an integer in %d..%d, got %d", field, lo, hi, v)
	}
	return nil
}

// strictDecode decodes one JSON object into v, refusing unknown fields (the
// envelope of a request whose documents have their own parsers).
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
