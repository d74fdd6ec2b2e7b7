package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// aml line apply --from-map converts an OPC UA or MQTT map file here and
// applies it; --print drafts the line file instead.
func TestLineApplyFromMapCLI(t *testing.T) {
	d := t.TempDir()
	if _, errs, code := aml(t, "init", "--data", d); code != 0 {
		t.Fatal(errs)
	}
	// What a person stated before is kept where the map says nothing.
	if _, errs, code := aml(t, "nodes", "set", "melt_temperature", "--line", "line-injection-01", "--unit", "degC", "--meaning", "nozzle melt", "--data", d); code != 0 {
		t.Fatal(errs)
	}
	opcMap := filepath.Join("..", "..", "examples", "connect", "opcua-injection.json")
	out, errs, code := aml(t, "line", "apply", "--from-map", opcMap, "--data", d, "--json")
	if code != 0 {
		t.Fatalf("apply --from-map: %d %s %s", code, out, errs)
	}
	var nodes []core.Node
	mustJSON(t, out, &nodes)
	byID := map[string]core.Node{}
	for _, n := range nodes {
		byID[n.ID] = n
	}
	if len(nodes) != 6 {
		t.Fatalf("%d nodes: %s", len(nodes), out)
	}
	hp, mt, ht := byID["hold_pressure"], byID["melt_temperature"], byID["hold_time"]
	if hp.Kind != core.NodeDCW || hp.Unit != "bar" || hp.Min == nil || *hp.Min != 50 || *hp.Max != 90 || hp.LineID != "line-injection-01" {
		t.Fatalf("hold_pressure: %+v", hp)
	}
	if mt.Kind != core.NodeDAQ || mt.Unit != "degC" || mt.Meaning != "nozzle melt" || mt.Min != nil {
		t.Fatalf("melt_temperature lost what the map does not say: %+v", mt)
	}
	if ht.Kind != core.NodeDCW || ht.Unit != "s" || ht.Min != nil || ht.Max != nil {
		t.Fatalf("hold_time (writable without range): %+v", ht)
	}
	// The MQTT map, detected; the nodes read back through nodes list.
	mqttMap := filepath.Join("..", "..", "examples", "connect", "mqtt-injection.json")
	if _, errs, code := aml(t, "line", "apply", "--from-map", mqttMap, "--map-kind", "mqtt", "--data", d); code != 0 {
		t.Fatal(errs)
	}
	if out, errs, code := aml(t, "nodes", "list", "--line", "line-injection-01", "--data", d); code != 0 || !strings.Contains(out, "flash_rate") {
		t.Fatalf("nodes list: %d %s %s", code, out, errs)
	}
	// --print drafts the line file; it applies as it is.
	out, errs, code = aml(t, "line", "apply", "--from-map", opcMap, "--print", "--data", d)
	if code != 0 || !strings.Contains(out, "# from OPC UA node ns=1;s=hold_pressure") || !strings.Contains(out, "writable: true") {
		t.Fatalf("--print: %d %s %s", code, out, errs)
	}
	draft := filepath.Join(d, "line.yaml")
	if err := os.WriteFile(draft, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := aml(t, "line", "apply", draft, "--data", d); code != 0 || !strings.Contains(out, "6 node(s)") {
		t.Fatalf("apply the draft: %d %s %s", code, out, errs)
	}
	if out, _, code := aml(t, "line", "apply", "--from-map", opcMap, "--print", "--json", "--data", d); code != 0 || !strings.HasPrefix(out, "{") {
		t.Fatalf("--print --json: %d %s", code, out)
	}
	// Usage and invalid maps.
	for _, args := range [][]string{{"line", "apply"}, {"line", "apply", draft, "--from-map", opcMap}, {"line", "apply", draft, "--print"}, {"line", "apply", "--from-map", opcMap, "--map-kind", "modbus"}} {
		if _, errs, code := aml(t, append(args, "--data", d)...); code != 2 {
			t.Fatalf("%v: %d %s", args, code, errs)
		}
	}
	bad := filepath.Join(d, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"line":"l","product":"p","recipe":"r","nodes":[{"opcua":"ns=1;s=w","node":"w","min":2,"max":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := aml(t, "line", "apply", "--from-map", bad, "--data", d, "--json"); code != 1 || !strings.Contains(errs, bad) || !strings.Contains(out, "AML_INVALID_ARGUMENT") || !strings.Contains(out, "nodes[0].min") {
		t.Fatalf("invalid map: %d %s %s", code, out, errs)
	}
}
