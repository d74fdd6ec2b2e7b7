package api

import (
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
)

// A plant line's metadata is stated over the API: a line file makes
// nodes writable setpoints with ranges and units (what a snapshot needs to
// bind a scene's controls), node.set changes one node, every change is
// audited, and a line file applies whole or not at all.
func TestLineMetadata(t *testing.T) {
	e := newEnv(t, Options{})
	e.want(e.do("engineer", "POST", "/api/v1/ingest/samples", map[string]any{"line": "plant", "product": "p", "recipe": "r", "run": "pr1",
		"samples": []any{map[string]any{"node": "temp", "ts": 1_700_000_000_000, "value": 200}, map[string]any{"node": "sp", "ts": 1_700_000_000_000, "value": 60}}}), 200, "")
	file := map[string]any{"nodes": []any{
		map[string]any{"id": "temp", "unit": "degC", "min": 150, "max": 260, "physicalMeaning": "barrel temperature"},
		map[string]any{"id": "sp", "unit": "bar", "min": 50, "max": 90, "writable": true},
	}}
	var got app.List[core.Node]
	e.want(e.do("engineer", "POST", "/api/v1/lines/plant/nodes", file), 200, "").json(t, &got)
	if got.Count != 2 || got.Items[1].Kind != core.NodeDCW || *got.Items[1].Max != 90 || got.Items[0].Unit != "degC" {
		t.Fatalf("applied %+v", got.Items)
	}
	// One node: a field left out keeps its value.
	e.want(e.do("engineer", "PUT", "/api/v1/nodes/temp", map[string]any{"line": "plant", "max": 270}), 200, "").json(t, &got)
	if n := got.Items[0]; *n.Max != 270 || *n.Min != 150 || n.Unit != "degC" || n.Kind != core.NodeDAQ {
		t.Fatalf("node.set %+v", n)
	}
	// Refusals: a viewer; another line's engineer; a node of another line;
	// a bad range.
	e.want(e.do("viewer", "PUT", "/api/v1/nodes/temp", map[string]any{"line": "plant", "max": 1}), 403, core.CodeForbidden)
	e.want(e.do("otherline", "PUT", "/api/v1/nodes/temp", map[string]any{"line": "plant", "max": 1}), 403, core.CodeForbidden)
	e.want(e.do("engineer", "PUT", "/api/v1/nodes/part_weight", map[string]any{"line": "plant", "unit": "kg"}), 409, core.CodeConflict)
	if b := e.want(e.do("engineer", "PUT", "/api/v1/nodes/temp", map[string]any{"line": "plant", "min": 300}), 400, core.CodeInvalidArgument).errBody(t); b.Field != "nodes[0]" {
		t.Fatalf("min above the stored max: %+v", b)
	}
	// Whole or nothing: a file whose second node is another line's changes
	// nothing, not even its first node.
	bad := map[string]any{"nodes": []any{map[string]any{"id": "temp", "unit": "K"}, map[string]any{"id": "part_weight", "unit": "kg"}}}
	e.want(e.do("engineer", "POST", "/api/v1/lines/plant/nodes", bad), 409, core.CodeConflict)
	var nodes app.List[core.Node]
	e.want(e.do("viewer", "GET", "/api/v1/nodes?line=plant", nil), 200, "").json(t, &nodes)
	for _, n := range nodes.Items {
		if n.ID == "temp" && n.Unit != "degC" {
			t.Fatalf("a refused line file changed temp: %+v", n)
		}
	}
	dup := map[string]any{"nodes": []any{map[string]any{"id": "temp"}, map[string]any{"id": "temp"}}}
	if b := e.want(e.do("engineer", "POST", "/api/v1/lines/plant/nodes", dup), 400, core.CodeInvalidArgument).errBody(t); b.Field != "nodes[1].id" {
		t.Fatalf("duplicate node: %+v", b)
	}
	// Audited: two changes, each with the node before and after.
	var log app.AuditListResponse
	e.want(e.do("viewer", "GET", "/api/v1/audit?subject=plant", nil), 200, "").json(t, &log)
	n := 0
	for _, en := range log.Items {
		if en.Action == "line.apply" && en.Actor == "erin" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d line.apply audit entries, want 2: %+v", n, log.Items)
	}
}
