package api

import (
	"fmt"
	"strings"
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

// A plant line's lineage verifies from its own batch records: recipe
// versions registered (content-hashed), each run's record (version, end,
// who confirmed it) imported, and the dataset built on those runs says
// lineageVerified — where before only the simulator could write the
// evidence.
func TestPlantLineage(t *testing.T) {
	e := newEnv(t, Options{})
	const runs, steps = 6, 80
	for r := 0; r < runs; r++ { // plant exports: one CSV per run (runs end with their file)
		var b strings.Builder
		b.WriteString("time_ms,u,y\n")
		t0 := int64(1_780_000_000_000 + r*3_600_000)
		for k := 0; k < steps; k++ {
			u := float64((k / 10) % 2)
			fmt.Fprintf(&b, "%d,%g,%g\n", t0+int64(k)*1000, u, 0.5*u+float64(r)*0.01)
		}
		e.want(e.do("engineer", "POST", fmt.Sprintf("/api/v1/ingest/csv?line=plant&product=p&recipe=rc&run=plant-run-%d", r), strings.NewReader(b.String())), 200, "")
	}
	spec := map[string]any{"lineId": "plant", "productId": "p", "recipeId": "rc",
		"nodes":  []any{map[string]any{"nodeId": "u", "role": "control"}, map[string]any{"nodeId": "y", "role": "target"}},
		"beatMs": 1000, "historySteps": 5, "horizonSteps": 2, "stride": 1,
		"split": map[string]any{"valRatio": 0.2, "testRatio": 0.2, "seed": 1, "mode": "by_run"}, "purpose": "mpc_surrogate"}
	var before app.DatasetBuildResponse
	e.want(e.do("engineer", "POST", "/api/v1/datasets", map[string]any{"spec": spec}), 201, "").json(t, &before)
	if before.Lineage.LineageVerified {
		t.Fatalf("lineage verified without batch records: %+v", before.Lineage)
	}
	var rv core.RecipeVersion
	e.want(e.do("engineer", "POST", "/api/v1/recipes", map[string]any{"line": "plant", "product": "p", "recipe": "rc",
		"params": map[string]any{"setpoint": 0.5, "gain": 2}}), 201, "").json(t, &rv)
	if rv.Version != 1 || len(rv.ContentHash) != 64 {
		t.Fatalf("recipe version %+v", rv)
	}
	var again core.RecipeVersion
	e.want(e.do("engineer", "POST", "/api/v1/recipes", map[string]any{"line": "plant", "product": "p", "recipe": "rc",
		"params": map[string]any{"gain": 2, "setpoint": 0.5}}), 201, "").json(t, &again)
	if again.Version != 1 {
		t.Fatalf("the same content is a new version: %+v", again)
	}
	var events []any
	for r := 0; r < runs; r++ {
		t0 := int64(1_780_000_000_000 + r*3_600_000)
		events = append(events, map[string]any{"run": fmt.Sprintf("plant-run-%d", r), "recipe": "rc", "recipeVersion": 1,
			"start": t0, "end": t0 + steps*1000, "confirmedBy": "shift lead Kim"})
	}
	// Refusals: another line's engineer; a version that does not exist;
	// a run of another line.
	e.want(e.do("otherline", "POST", "/api/v1/lines/plant/run-events", map[string]any{"events": events}), 403, core.CodeForbidden)
	bad := map[string]any{"run": "plant-run-0", "recipe": "rc", "recipeVersion": 9, "start": 1, "confirmedBy": "Kim"}
	if b := e.want(e.do("engineer", "POST", "/api/v1/lines/plant/run-events", map[string]any{"events": []any{bad}}), 404, core.CodeNotFound).errBody(t); b.Field != "events[0].recipeVersion" {
		t.Fatalf("missing version: %+v", b)
	}
	other := map[string]any{"run": e.runs[0], "recipe": "rc", "recipeVersion": 1, "start": 1, "confirmedBy": "Kim"}
	e.want(e.do("engineer", "POST", "/api/v1/lines/plant/run-events", map[string]any{"events": []any{other}}), 409, core.CodeConflict)

	var rec app.RunEventsResponse
	e.want(e.do("engineer", "POST", "/api/v1/lines/plant/run-events", map[string]any{"events": events}), 200, "").json(t, &rec)
	if len(rec.Segments) != runs || rec.Runs[0].Status != core.RunEnded || *rec.Runs[0].RecipeVersion != 1 || rec.Segments[0].ConfirmedBy != "shift lead Kim" {
		t.Fatalf("recorded %+v", rec)
	}
	var after app.DatasetBuildResponse
	e.want(e.do("engineer", "POST", "/api/v1/datasets", map[string]any{"spec": spec}), 201, "").json(t, &after)
	if !after.Lineage.LineageVerified || len(after.Lineage.Verified) == 0 {
		t.Fatalf("lineage after the batch records: %+v", after.Lineage)
	}
}
