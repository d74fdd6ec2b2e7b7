package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Security finding 14a: a caller scoped to line B learned line A's ids
// and its node metadata by naming line A's objects in requests about its
// own line. A recipe id of line A in recipe.put or an ingest batch was
// refused with a conflict naming line A and its product; a scene of line
// B whose variables bind to line A's nodes (scene.check — any reader —
// and snapshot.take) was refused with problems naming line A and each
// node's kind, unit and range. The refusals now name the caller's own
// line only and say nothing more of the foreign object.
func TestSec14_ForeignLineMetadataNotRevealed(t *testing.T) {
	e := newEnv(t, Options{})
	var run app.RunShowResponse
	e.want(e.do("engineer", "GET", "/api/v1/runs/"+e.runs[0], nil), 200, "").json(t, &run)
	var nodes struct {
		Items []core.Node `json:"items"`
	}
	e.want(e.do("engineer", "GET", "/api/v1/nodes?line="+simLine, nil), 200, "").json(t, &nodes)
	foreign := map[string]core.Node{}
	for _, n := range nodes.Items {
		foreign[n.ID] = n
	}
	hp, ok := foreign["hold_pressure"]
	if !ok || hp.Min == nil || hp.Max == nil || hp.Unit == "" {
		t.Fatalf("the simulated line has no ranged hold_pressure node: %+v", nodes.Items)
	}
	leaks := func(what string, r resp) {
		t.Helper()
		body := string(r.body)
		for _, s := range []string{simLine, run.ProductID} {
			if strings.Contains(body, s) {
				t.Errorf("%s: the answer (%d) names line A's %q: %s", what, r.status, s, body)
			}
		}
	}

	// A recipe of line A named by line B's engineer.
	r := e.do("otherline", "POST", "/api/v1/recipes", map[string]any{"line": "line-other", "product": "p-other", "recipe": run.RecipeID, "params": map[string]any{"hold_pressure": 70}})
	if r.status < 400 {
		t.Fatalf("recipe.put on line A's recipe: %d %s", r.status, r.body)
	}
	leaks("recipe.put", r)
	r = e.do("otherline", "POST", "/api/v1/ingest/samples", map[string]any{"line": "line-other", "product": "p-other", "recipe": run.RecipeID, "run": "run-b-1",
		"samples": []any{map[string]any{"node": "b1", "ts": run.StartedMs, "value": 1}}})
	if r.status < 400 {
		t.Fatalf("ingest under line A's recipe: %d %s", r.status, r.body)
	}
	leaks("ingest.samples", r)
	r = e.do("otherline", "POST", "/api/v1/ingest/csv?line=line-other&product=p-other&recipe="+run.RecipeID+"&run=run-b-2&timeUnit=ms",
		strings.NewReader(fmt.Sprintf("ts,b1\n%d,1\n", run.StartedMs)))
	if r.status < 400 {
		t.Fatalf("CSV ingest under line A's recipe: %d %s", r.status, r.body)
	}
	leaks("ingest.csv", r)

	// A scene of line B bound to line A's nodes (by name), checked by a
	// reader of line B.
	sc := contract.DefaultInjectionScene()
	sc.SceneID, sc.LineID = "probe", "line-other"
	doc, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	// Bound by name, and weight bound explicitly to line A's writable
	// hold_pressure (a kind and unit that do not fit a target).
	r = e.do("otherline", "POST", "/api/v1/scene-checks", map[string]any{"document": string(doc), "bindings": map[string]string{"weight": "hold_pressure"}})
	if r.status != 422 {
		t.Fatalf("scene.check: %d %s", r.status, r.body)
	}
	leaks("scene.check", r)
	msg := r.errBody(t).Message
	for _, want := range []string{"variables.hold_pressure: node hold_pressure is not a node of line line-other", "variables.weight: node hold_pressure is not a node of line line-other"} {
		if !strings.Contains(msg, want) {
			t.Errorf("scene.check: %q lacks %q", msg, want)
		}
	}
	for _, leak := range []string{"hold_pressure is dcw", "hold_pressure is in", "hold_pressure's min", "hold_pressure's max", "declares no range"} {
		if strings.Contains(msg, leak) {
			t.Errorf("scene.check tells line B of line A's node (%q): %s", leak, msg)
		}
	}
	// snapshot.take refuses the same scene stored as line B's draft
	// with the same words.
	var put app.SceneSummary
	e.want(e.do("otherline", "POST", "/api/v1/scenes", map[string]any{"scene": json.RawMessage(doc)}), 201, "").json(t, &put)
	r = e.do("otherline", "POST", "/api/v1/snapshots", map[string]any{"scene": put.SceneID, "bindings": map[string]string{"weight": "hold_pressure"}})
	if r.status < 400 {
		t.Fatalf("snapshot.take: %d %s", r.status, r.body)
	}
	leaks("snapshot.take", r)
	if msg := r.errBody(t).Message; strings.Contains(msg, "hold_pressure is dcw") || strings.Contains(msg, "hold_pressure is in") {
		t.Errorf("snapshot.take tells line B of line A's node: %s", msg)
	}
	// Line A's own engineer still gets the precise conflict.
	r = e.do("engineer", "POST", "/api/v1/recipes", map[string]any{"line": "line-other", "product": "p-other", "recipe": run.RecipeID, "params": map[string]any{"hold_pressure": 70}})
	e.want(r, 409, core.CodeConflict)
}
