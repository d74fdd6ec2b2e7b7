package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/aml-project/aml/internal/core"
)

// Limits that keep a contract reviewable and bound the work of validating
// untrusted JSON.
const (
	// MaxRefLen bounds identifiers and references (scene, line, node ids).
	MaxRefLen = 256
	// MaxNameLen bounds variable names.
	MaxNameLen = 64
	// MaxTextLen bounds free text (physical meaning, details, expressions).
	MaxTextLen = 4096
	// MaxItems bounds every list and map of a contract (variables,
	// constraints, bindings, trajectory steps, ...).
	MaxItems = 4096
	// MaxContractBytes bounds the JSON accepted by the Parse functions.
	MaxContractBytes = 8 << 20
)

// isName reports whether s is a variable name: ASCII letters, digits and
// '_', not starting with a digit — the name rule of the physics equation
// language, so a custom constraint expression can refer to variables.
func isName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// checkName adds a problem unless s is a valid variable name.
func checkName(p *problems, field, s string) bool {
	if !isName(s) {
		p.add(field, "%q is not a variable name (ASCII letters, digits and _, not starting with a digit, at most %d characters)", s, MaxNameLen)
		return false
	}
	return true
}

// checkRef adds a problem unless s is a usable identifier or reference:
// non-empty, at most MaxRefLen bytes, no surrounding white space and no
// control characters.
func checkRef(p *problems, field, s string) bool {
	switch {
	case s == "":
		p.add(field, "required")
	case len(s) > MaxRefLen:
		p.add(field, "longer than %d bytes", MaxRefLen)
	case strings.TrimSpace(s) != s:
		p.add(field, "has leading or trailing white space")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		p.add(field, "contains control characters")
	default:
		return true
	}
	return false
}

// checkOptRef is checkRef for an optional reference.
func checkOptRef(p *problems, field, s string) {
	if s != "" {
		checkRef(p, field, s)
	}
}

// checkText adds a problem unless s is non-empty free text of at most
// MaxTextLen bytes (when required) without NUL bytes.
func checkText(p *problems, field, s string, required bool) {
	switch {
	case strings.TrimSpace(s) == "":
		if required {
			p.add(field, "required")
		}
	case len(s) > MaxTextLen:
		p.add(field, "longer than %d bytes", MaxTextLen)
	case strings.IndexByte(s, 0) >= 0:
		p.add(field, "contains a NUL byte")
	}
}

// isHash reports whether s is a lower-case hex sha256 (64 characters).
func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
			return false
		}
	}
	return true
}

func checkHash(p *problems, field, s string, required bool) {
	if s == "" {
		if required {
			p.add(field, "required")
		}
		return
	}
	if !isHash(s) {
		p.add(field, "must be a lower-case hex sha256 (64 characters)")
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// checkFinite adds a problem if x is NaN or ±Inf.
func checkFinite(p *problems, field string, x float64) bool {
	if !finite(x) {
		p.add(field, "must be a finite number")
		return false
	}
	return true
}

func checkOptFinite(p *problems, field string, x *float64) bool {
	if x == nil {
		return true
	}
	return checkFinite(p, field, *x)
}

// checkRange checks optional min and max: finite, and min < max when both
// are given.
func checkRange(p *problems, field string, lo, hi *float64) {
	okLo := checkOptFinite(p, field+".min", lo)
	okHi := checkOptFinite(p, field+".max", hi)
	if okLo && okHi && lo != nil && hi != nil && !(*lo < *hi) {
		p.add(field+".max", "max (%v) must be greater than min (%v)", *hi, *lo)
	}
}

func checkSchemaVersion(p *problems, v, supported int) {
	switch {
	case v < 1:
		p.add("schemaVersion", "must be a positive integer")
	case v > supported:
		p.add("schemaVersion", "version %d is newer than the supported version %d", v, supported)
	}
}

func checkTime(p *problems, field string, t time.Time, required bool) {
	if t.IsZero() {
		if required {
			p.add(field, "required")
		}
		return
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		p.add(field, "year %d out of range", y)
	}
}

func checkCount(p *problems, field string, n int) bool {
	if n > MaxItems {
		p.add(field, "has %d items, at most %d allowed", n, MaxItems)
		return false
	}
	return true
}

// checkValues checks a map of finite numbers keyed by variable names.
func checkValues(p *problems, field string, m map[string]float64) {
	if !checkCount(p, field, len(m)) {
		return
	}
	for _, k := range sortedKeys(m) {
		f := field + "." + k
		if checkName(p, f, k) {
			checkFinite(p, f, m[k])
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func idx(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }

// utc returns t in UTC (the zero time stays zero).
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// canonicalWithout returns the canonical JSON of v's JSON form without the
// top-level keys in drop.
func canonicalWithout(v any, drop ...string) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		if strings.Contains(err.Error(), "unsupported value") {
			return nil, core.Errorf(core.CodeNonFinite, "canonical JSON: %v", err)
		}
		return nil, core.Errorf(core.CodeInvalidArgument, "canonical JSON: %v", err)
	}
	if len(drop) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, core.Errorf(core.CodeInternal, "canonical JSON: %v", err)
		}
		for _, k := range drop {
			delete(m, k)
		}
		if b, err = json.Marshal(m); err != nil {
			return nil, core.Errorf(core.CodeInternal, "canonical JSON: %v", err)
		}
	}
	return core.CanonicalJSON(json.RawMessage(b))
}

// hashWithout is the hex sha256 of canonicalWithout(v, drop...).
func hashWithout(v any, drop ...string) (string, error) {
	b, err := canonicalWithout(v, drop...)
	if err != nil {
		return "", err
	}
	return core.CanonicalHash(json.RawMessage(b))
}

// decodeStrict decodes one JSON value into dst, refusing unknown fields,
// trailing data and inputs over MaxContractBytes. Decoding errors are
// AML_CONTRACT_INVALID with the offending field when known.
func decodeStrict(data []byte, dst any) error {
	if len(data) > MaxContractBytes {
		return Invalidf("$", "document of %d bytes exceeds %d bytes", len(data), MaxContractBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeErr(err)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err == nil {
		return Invalidf("$", "trailing data after the JSON value")
	}
	return nil
}

func decodeErr(err error) error {
	var ae *core.Error
	if asErr(err, &ae) {
		if ae.Code == CodeContractInvalid {
			return ae
		}
		return Invalidf(orDollar(ae.Field), "%s", ae.Message)
	}
	var te *json.UnmarshalTypeError
	if asErr(err, &te) {
		return Invalidf(orDollar(te.Field), "JSON %s cannot be stored in a %s", te.Value, te.Type)
	}
	var se *json.SyntaxError
	if asErr(err, &se) {
		return Invalidf("$", "JSON syntax error at byte %d: %v", se.Offset, se)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return Invalidf(strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`), "unknown field")
	}
	return Invalidf("$", "invalid JSON: %v", err)
}

func orDollar(s string) string {
	if s == "" {
		return "$"
	}
	return s
}
