package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
)

// CanonicalJSON encodes v as canonical JSON: object keys sorted by byte order
// at every depth (never by locale), no insignificant white space, numbers in
// one spelling (an integer literal that fits int64 or uint64 as an integer, any other
// number in Go's shortest float64 form), and non-finite numbers rejected with
// AML_NON_FINITE instead of being written as null.
//
// v may be any value encoding/json can marshal, or raw JSON ([]byte or
// json.RawMessage) which is parsed and re-encoded.
func CanonicalJSON(v any) ([]byte, error) {
	var raw []byte
	switch t := v.(type) {
	case json.RawMessage:
		raw = t
	case []byte:
		raw = t
	default:
		if err := checkFinite(v); err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			if strings.Contains(err.Error(), "unsupported value") {
				return nil, Errorf(CodeNonFinite, "canonical JSON: %v", err)
			}
			return nil, Errorf(CodeInvalidArgument, "canonical JSON: %v", err)
		}
		raw = b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, Errorf(CodeInvalidArgument, "canonical JSON: %v", err)
	}
	if dec.More() {
		return nil, Errorf(CodeInvalidArgument, "canonical JSON: trailing data after value")
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, tree, "$"); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CanonicalHash is the hex sha256 of CanonicalJSON(v).
func CanonicalHash(v any) (string, error) {
	b, err := CanonicalJSON(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func checkFinite(v any) error {
	switch t := v.(type) {
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return Errorf(CodeNonFinite, "canonical JSON: non-finite number %v", t)
		}
	case float32:
		return checkFinite(float64(t))
	case map[string]any:
		for k, x := range t {
			if err := checkFinite(x); err != nil {
				return FieldErrorf(CodeNonFinite, k, "%s", err.(*Error).Message)
			}
		}
	case map[string]float64:
		for k, x := range t {
			if err := checkFinite(x); err != nil {
				return FieldErrorf(CodeNonFinite, k, "%s", err.(*Error).Message)
			}
		}
	case []any:
		for _, x := range t {
			if err := checkFinite(x); err != nil {
				return err
			}
		}
	case []float64:
		for _, x := range t {
			if err := checkFinite(x); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeCanonical(buf *bytes.Buffer, v any, path string) error {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		writeString(buf, t)
	case json.Number:
		s := string(t)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			buf.WriteString(strconv.FormatInt(i, 10))
			return nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			buf.WriteString(strconv.FormatUint(u, 10))
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return FieldErrorf(CodeNonFinite, path, "number %q is not a finite float64", s)
		}
		if f == 0 {
			// -0.0 and 0e5 are the integer 0: one spelling, and the
			// canonical form stays a fixed point ("-0" reads back as 0).
			buf.WriteByte('0')
			return nil
		}
		b, _ := json.Marshal(f)
		buf.Write(b)
	case []any:
		buf.WriteByte('[')
		for i, x := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, x, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // byte-wise comparison of UTF-8, locale independent
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, t[k], path+"."+k); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return Errorf(CodeInternal, "canonical JSON: unexpected %T", v)
	}
	return nil
}

// writeString writes s as a JSON string without HTML escaping, so the bytes
// match what other languages' canonical encoders produce for the same text.
func writeString(buf *bytes.Buffer, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	buf.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
