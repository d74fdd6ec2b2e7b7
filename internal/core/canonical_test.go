package core

import (
	"encoding/json"
	"math"
	"testing"
)

func TestCanonicalJSONKeyOrderAndNumbers(t *testing.T) {
	a := []byte(`{"b": 1, "a": {"z": [1, 2.50, {"y": true, "x": null}], "é": "x", "B": 1e2}}`)
	b := []byte(`{"a":{"B":100,"é":"x","z":[1.0,2.5,{"x":null,"y":true}]},"b":1.000}`)
	ca, err := CanonicalJSON(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := CanonicalJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":{"B":100,"z":[1,2.5,{"x":null,"y":true}],"é":"x"},"b":1}`
	if string(ca) != want || string(cb) != want {
		t.Fatalf("canonical\n got %s\n and %s\nwant %s", ca, cb, want)
	}
	ha, _ := CanonicalHash(a)
	hb, _ := CanonicalHash(b)
	if ha != hb || len(ha) != 64 {
		t.Fatalf("hash %s vs %s", ha, hb)
	}
	// Go values hash the same as their JSON text.
	hv, _ := CanonicalHash(map[string]any{"b": 1, "a": map[string]any{"B": 100.0, "é": "x", "z": []any{1, 2.5, map[string]any{"y": true, "x": nil}}}})
	if hv != ha {
		t.Fatal("Go value and JSON text hash differently")
	}
	// No HTML escaping: other languages' canonical encoders agree.
	c, _ := CanonicalJSON(map[string]any{"k": "<a&b>"})
	if string(c) != `{"k":"<a&b>"}` {
		t.Fatalf("escaping: %s", c)
	}
}

func TestCanonicalJSONHashStableUnderReordering(t *testing.T) {
	// Property: any permutation of insertion order gives the same hash.
	keys := []string{"delta", "alpha", "Charlie", "bravo", "_x", "10", "9", "ä"}
	var first string
	for p := 0; p < 50; p++ {
		m := map[string]any{}
		for i := range keys {
			k := keys[(i*7+p)%len(keys)]
			m[k] = map[string]any{"v": float64(len(k)), "w": []any{k}}
		}
		raw, _ := json.Marshal(m)
		h, err := CanonicalHash(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = h
		} else if h != first {
			t.Fatalf("permutation %d changed the hash", p)
		}
	}
}

func TestCanonicalJSONRejectsNonFinite(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"a": math.Inf(-1)}, []float64{1, math.NaN()}, map[string]float64{"x": math.NaN()}} {
		if _, err := CanonicalJSON(v); CodeOf(err) != CodeNonFinite {
			t.Fatalf("%v: got %v", v, err)
		}
	}
	if _, err := CanonicalJSON([]byte(`{"a":1e400}`)); CodeOf(err) != CodeNonFinite {
		t.Fatalf("1e400: %v", err)
	}
	if _, err := CanonicalJSON([]byte(`{"a":1} x`)); CodeOf(err) != CodeInvalidArgument {
		t.Fatalf("trailing: %v", err)
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	f.Add([]byte(`{"b":1,"a":[1,2,{"c":null}]}`))
	f.Add([]byte(`[1e308, -0, 0.1, "x\u0000"]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := CanonicalJSON(in)
		if err != nil {
			if CodeOf(err) == CodeInternal {
				t.Fatalf("internal error on input: %v", err)
			}
			return
		}
		// Canonical form is a fixed point.
		c2, err := CanonicalJSON(c)
		if err != nil || string(c2) != string(c) {
			t.Fatalf("not idempotent: %s -> %s (%v)", c, c2, err)
		}
	})
}

func TestErrors(t *testing.T) {
	e := FieldErrorf(CodeIngestInvalid, "a.csv:3:2", "bad value %q", "x")
	if e.Error() != `AML_INGEST_INVALID: a.csv:3:2: bad value "x"` || e.Kind() != KindUnprocessable {
		t.Fatalf("%v %s", e, e.Kind())
	}
	if CodeOf(Wrap(CodeConflict, e, "ctx")) != CodeIngestInvalid {
		t.Fatal("wrap lost the code")
	}
	if CodeOf(nil) != "" {
		t.Fatal("nil code")
	}
}

func TestCanonicalJSONLargeUnsigned(t *testing.T) {
	c, err := CanonicalJSON(map[string]any{"seed": uint64(18446744073709551615)})
	if err != nil || string(c) != `{"seed":18446744073709551615}` {
		t.Fatalf("%s %v", c, err)
	}
}
