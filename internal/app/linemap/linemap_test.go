package linemap

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestExampleMapsGolden: the repo's example map files convert to the
// committed line files, and each draft is a line file line.apply accepts.
func TestExampleMapsGolden(t *testing.T) {
	for _, name := range []string{"opcua-injection", "mqtt-injection"} {
		t.Run(name, func(t *testing.T) {
			d, err := ReadFile(filepath.Join("..", "..", "..", "examples", "connect", name+".json"), "")
			if err != nil {
				t.Fatal(err)
			}
			got := d.YAML()
			golden := filepath.Join("testdata", name+".line.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs (go test ./internal/app/linemap -update):\n%s", golden, got)
			}
			// The draft reads back as the same line file, strictly.
			var back app.LineApplyRequest
			dec := yaml.NewDecoder(bytes.NewReader(got))
			dec.KnownFields(true)
			if err := dec.Decode(&back); err != nil {
				t.Fatal(err)
			}
			if err := back.Validate(); err != nil {
				t.Fatal(err)
			}
			if a, b := mustYAML(t, back), mustYAML(t, d.Req); a != b {
				t.Fatalf("draft does not read back:\n%s\nvs\n%s", a, b)
			}
		})
	}
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFromMapEdgeCases(t *testing.T) {
	const opcHead = `{"line":"l","product":"p","recipe":"r","nodes":[`
	const mqttHead = `{"line":"l","product":"p","recipe":"r","topics":[`
	for _, tc := range []struct {
		name, kind, in string
		want           string // the converted nodes as YAML flow
	}{
		{"opcua bare node", "", opcHead + `{"opcua":"ns=1;s=w","node":"w"}]}`, `[{id: w}]`},
		{"opcua writable without range", "", opcHead + `{"opcua":"ns=1;s=sp","node":"sp","kind":"dcw"}]}`, `[{id: sp, writable: true}]`},
		{"opcua only min", "", opcHead + `{"opcua":"ns=1;s=w","node":"w","unit":"g","min":0}]}`, `[{id: w, unit: g, min: 0}]`},
		{"opcua daq", "opcua", opcHead + `{"opcua":"ns=1;s=w","node":"w","kind":"daq","min":1,"max":2}]}`, `[{id: w, writable: false, min: 1, max: 2}]`},
		{"mqtt bare topic", "", mqttHead + `{"topic":"a/b","node":"b"}]}`, `[{id: b}]`},
		{"mqtt writable without range", "mqtt", mqttHead + `{"topic":"a/b","node":"b","kind":"dcw","unit":"bar"}]}`, `[{id: b, writable: true, unit: bar}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := FromMap([]byte(tc.in), tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			if d.Req.Line != "l" {
				t.Fatalf("line %q", d.Req.Line)
			}
			var want []app.NodeSpec
			if err := yaml.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if a, b := mustYAML(t, d.Req.Nodes), mustYAML(t, want); a != b {
				t.Fatalf("got\n%s\nwant\n%s", a, b)
			}
			_ = d.YAML()
		})
	}
	for _, tc := range []struct{ name, kind, in, msg string }{
		{"not json", "", `{`, "not a JSON object"},
		{"neither", "", `{"line":"l"}`, "neither"},
		{"both", "", `{"nodes":[],"topics":[]}`, "--map-kind"},
		{"bad kind flag", "modbus", opcHead + `{"opcua":"ns=1;s=w","node":"w"}]}`, "opcua or mqtt"},
		{"opcua as mqtt", "mqtt", opcHead + `{"opcua":"ns=1;s=w","node":"w"}]}`, "unknown field"},
		{"opcua invalid", "", opcHead + `{"opcua":"ns=x","node":"w","min":2,"max":1}]}`, "invalid"},
		{"mqtt wildcard", "", mqttHead + `{"topic":"a/#","node":"b"}]}`, "invalid"},
		{"no nodes", "", opcHead + `]}`, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromMap([]byte(tc.in), tc.kind)
			if core.CodeOf(err) != core.CodeInvalidArgument {
				t.Fatalf("want AML_INVALID_ARGUMENT, got %v", err)
			}
			if !strings.Contains(strings.ToLower(errText(err)), strings.ToLower(tc.msg)) {
				t.Fatalf("error %q does not say %q", errText(err), tc.msg)
			}
		})
	}
}

// errText is the error with its problems.
func errText(err error) string {
	s := err.Error()
	var ae *core.Error
	if errors.As(err, &ae) {
		for _, p := range ae.Problems {
			s += "; " + p.Field + ": " + p.Message
		}
	}
	return s
}

func TestReadFileNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(p, []byte(`{"line":"l"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, ""); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("error does not name the file: %v", err)
	}
	var ae *core.Error
	if _, err := ReadFile(p, ""); !errors.As(err, &ae) || ae.Field != "map" {
		t.Fatalf("field: %v", err)
	}
	if _, err := ReadFile(p, "modbus"); core.CodeOf(err) != core.CodeUsage {
		t.Fatalf("bad kind: %v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.json"), ""); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("missing file: %v", err)
	}
}
