package opcua

import (
	"testing"

	"github.com/aml-project/aml/internal/core"
)

func TestParseMap(t *testing.T) {
	ok := `{"line":"l","product":"p","recipe":"r","runTag":"ns=1;s=run_id","nodes":[{"opcua":"ns=1;s=w","node":"w","unit":"g"}]}`
	m, err := ParseMap([]byte(ok))
	if err != nil || len(m.Nodes) != 1 || m.RunTag != "ns=1;s=run_id" {
		t.Fatalf("%+v %v", m, err)
	}
	for _, tc := range []struct{ name, in string }{
		{"not json", `{`},
		{"unknown field", `{"line":"l","product":"p","recipe":"r","nodes":[{"opcua":"ns=1;s=w","node":"w"}],"x":1}`},
		{"bad node id", `{"line":"l","product":"p","recipe":"r","nodes":[{"opcua":"ns=x;i=1","node":"w"}]}`},
		{"mapped twice", `{"line":"l","product":"p","recipe":"r","nodes":[{"opcua":"ns=1;s=w","node":"w"},{"opcua":"ns=1;s=w","node":"v"}]}`},
		{"fed twice", `{"line":"l","product":"p","recipe":"r","nodes":[{"opcua":"ns=1;s=w","node":"w"},{"opcua":"ns=1;s=v","node":"w"}]}`},
		{"tag as node", `{"line":"l","product":"p","recipe":"r","runTag":"ns=1;s=w","nodes":[{"opcua":"ns=1;s=w","node":"w"}]}`},
		{"bad kind", `{"line":"l","product":"p","recipe":"r","nodes":[{"opcua":"ns=1;s=w","node":"w","kind":"x"}]}`},
		{"min above max", `{"line":"l","product":"p","recipe":"r","nodes":[{"opcua":"ns=1;s=w","node":"w","min":2,"max":1}]}`},
		{"no line", `{"product":"p","recipe":"r","nodes":[{"opcua":"ns=1;s=w","node":"w"}]}`},
		{"negative interval", `{"line":"l","product":"p","recipe":"r","samplingIntervalMs":-1,"nodes":[{"opcua":"ns=1;s=w","node":"w"}]}`},
		{"trailing", ok + `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseMap([]byte(tc.in)); core.CodeOf(err) != core.CodeInvalidArgument {
				t.Fatalf("want AML_INVALID_ARGUMENT, got %v", err)
			}
		})
	}
}

// FuzzParseMap: any input gives a map or a typed error, never a panic.
func FuzzParseMap(f *testing.F) {
	f.Add([]byte(`{"line":"l","product":"p","recipe":"r","runTag":"ns=1;s=run_id","nodes":[{"opcua":"ns=1;s=w","node":"w","min":1,"max":2}]}`))
	f.Add([]byte(`{"nodes":[{"opcua":"i=85","node":"x"}]}`))
	f.Add([]byte(`{"line":"l","product":"p","recipe":"r","nodes":[{"opcua":"ns=2;g=09087e75-8e5e-499b-954f-f2a9603db28a","node":"w"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMap(data)
		if err != nil {
			if core.CodeOf(err) != core.CodeInvalidArgument {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(m.Nodes) == 0 || m.Line == "" {
			t.Fatalf("accepted an incomplete map %+v", m)
		}
	})
}
