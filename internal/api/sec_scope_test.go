package api

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Security finding 9a: an engineer of line B cannot add samples to line
// A's run by stamping them with their own line — neither as a JSON batch
// nor as a CSV upload. An engineer of every line gets a conflict naming
// the run's line; nothing is written either way.
func TestSec9_IngestIntoAnotherLinesRun(t *testing.T) {
	e := newEnv(t, Options{})
	runA := e.runs[0] // a run of the simulated line
	var before app.RunShowResponse
	e.want(e.do("engineer", "GET", "/api/v1/runs/"+runA, nil), 200, "").json(t, &before)

	batch := map[string]any{"line": "line-other", "product": "p", "recipe": "r", "run": runA,
		"samples": []any{map[string]any{"node": "o1", "ts": before.StartedMs + 1, "value": 1}}}
	b := e.want(e.do("otherline", "POST", "/api/v1/ingest/samples", batch), 403, core.CodeForbidden).errBody(t)
	if b.Field != "lineId" {
		t.Fatalf("refusal names %q: %+v", b.Field, b)
	}
	e.want(e.do("engineer", "POST", "/api/v1/ingest/samples", batch), 409, core.CodeConflict)

	csv := strings.NewReader("ts,o2\n" + jsonInt(before.StartedMs+1) + ",5\n")
	e.want(e.do("otherline", "POST", "/api/v1/ingest/csv?line=line-other&product=p&recipe=r&run="+runA, csv), 403, core.CodeForbidden)

	var after app.RunShowResponse
	e.want(e.do("engineer", "GET", "/api/v1/runs/"+runA, nil), 200, "").json(t, &after)
	if len(after.Samples) != len(before.Samples) {
		t.Fatalf("nodes of run %s changed: %v → %v", runA, before.Samples, after.Samples)
	}
	for n, c := range before.Samples {
		if after.Samples[n] != c {
			t.Fatalf("node %s of run %s: %d → %d samples", n, runA, c, after.Samples[n])
		}
	}
	// The caller's own run on its own line still works.
	batch["run"] = "run-of-line-other"
	e.want(e.do("otherline", "POST", "/api/v1/ingest/samples", batch), 200, "")
}

// Security finding 9b: objectives belong to a line. Line B's engineer
// cannot rewrite line A's target under its id, cannot read it, and a
// global objective (no line) is an admin's; line A's optimiser never
// uses another line's objective.
func TestSec9_ObjectivesBelongToALine(t *testing.T) {
	e := newEnv(t, Options{})
	var put app.ObjectivePutResponse
	e.want(e.do("engineer", "POST", "/api/v1/objectives", map[string]any{"preset": "default-injection"}), 201, "").json(t, &put)
	// The profile as JSON (a map: the test must run against a server
	// whose profiles had no line).
	type showResp struct {
		Objective map[string]any `json:"objective"`
		Hash      string         `json:"hash"`
	}
	var shown showResp
	e.want(e.do("engineer", "GET", "/api/v1/objectives/"+put.ObjectiveID, nil), 200, "").json(t, &shown)
	profile := func(line string, target float64) map[string]any {
		o := map[string]any{}
		for k, v := range shown.Objective {
			o[k] = v
		}
		o["targets"] = map[string]float64{"weight": target}
		delete(o, "lineId")
		if line != "" {
			o["lineId"] = line
		}
		return o
	}

	// Line B takes line A's objective, changes its target (32 → 45 g)
	// and stores it under the same id: a profile without a line would be
	// global, which is an admin's — refused.
	evil := profile("", 45)
	e.want(e.do("otherline", "POST", "/api/v1/objectives", map[string]any{"objective": evil}), 403, core.CodeForbidden)
	if shown.Objective["lineId"] != simLine {
		t.Fatalf("the preset is not line A's: %+v", shown.Objective)
	}
	// ... for its own line: the profile stays on line A, and the refusal
	// is the line-scope one, naming only line B's own lines
	// (TestSec15_NoExistenceOracle), not a conflict naming line A.
	evil = profile("line-other", 45)
	if r := e.want(e.do("otherline", "POST", "/api/v1/objectives", map[string]any{"objective": evil}), 403, core.CodeForbidden); strings.Contains(string(r.body), simLine) {
		t.Fatalf("the refusal names line A: %s", r.body)
	}
	// ... naming line A: outside its scope.
	evil = profile(simLine, 45)
	e.want(e.do("otherline", "POST", "/api/v1/objectives", map[string]any{"objective": evil}), 403, core.CodeForbidden)
	evil = profile("", 45)
	e.want(e.do("engineer", "POST", "/api/v1/objectives", map[string]any{"objective": evil}), 403, core.CodeForbidden)
	// An admin cannot move it to another line either.
	e.want(e.do("admin", "POST", "/api/v1/objectives", map[string]any{"objective": evil}), 409, core.CodeConflict)
	e.want(e.do("otherline", "GET", "/api/v1/objectives/"+put.ObjectiveID, nil), 403, core.CodeForbidden)
	e.want(e.do("engineer", "GET", "/api/v1/objectives/"+put.ObjectiveID, nil), 200, "").json(t, &shown)
	if shown.Objective["targets"].(map[string]any)["weight"] != 32.0 || shown.Hash != put.Hash {
		t.Fatalf("line A's objective changed: %+v %s", shown.Objective, shown.Hash)
	}

	// Line B stores its own profile under a new id; line A's twin refuses
	// to optimise for it even when asked by name.
	own := profile("line-other", 45)
	own["objectiveId"] = "b-weight"
	e.want(e.do("otherline", "POST", "/api/v1/objectives", map[string]any{"objective": own}), 201, "")
	var sr app.SceneSummary
	e.want(e.do("engineer", "POST", "/api/v1/scenes", map[string]any{"preset": "default-injection"}), 201, "").json(t, &sr)
	e.want(e.do("approver", "POST", "/api/v1/scenes/"+sr.SceneID+"/freeze", map[string]any{"version": sr.SceneVersion, "expectHash": sr.Hash}), 200, "")
	var run core.Run
	e.want(e.do("viewer", "GET", "/api/v1/runs/"+e.runs[4], nil), 200, "").json(t, &run)
	var snap struct {
		Snapshot contract.TwinSnapshot `json:"snapshot"`
	}
	e.want(e.do("engineer", "POST", "/api/v1/snapshots", map[string]any{"scene": sr.SceneID, "run": run.ID, "at": *run.EndedMs - 1000,
		"bindings": map[string]string{"weight": "part_weight"}}), 201, "").json(t, &snap)
	for _, path := range []string{"/api/v1/trials", "/api/v1/optimize"} {
		body := map[string]any{"model": "any-model", "snapshot": snap.Snapshot.SnapshotID, "objective": "b-weight"}
		if path == "/api/v1/trials" {
			body["set"] = map[string]float64{"hold_pressure": 60}
		}
		b := e.want(e.do("engineer", "POST", path, body), 409, core.CodeConflict).errBody(t)
		if !strings.Contains(b.Message, "belongs to line line-other") {
			t.Fatalf("%s: %s", path, b.Message)
		}
	}
}

// Security finding 12 (ingest): the JSON batch accepts what the CSV
// parser and the connectors refuse — every path now shares one check of
// ids, states and times, and the refusal names the field.
func TestSec12_JSONIngestValidatesLikeCSV(t *testing.T) {
	e := newEnv(t, Options{})
	ok := func() map[string]any {
		return map[string]any{"line": "line-j", "product": "p", "recipe": "r", "run": "run-j",
			"samples": []any{map[string]any{"node": "n1", "ts": 1_700_000_000_000, "value": 1}}}
	}
	sample := func(m map[string]any) map[string]any { return m["samples"].([]any)[0].(map[string]any) }
	for _, c := range []struct {
		name, field string
		mut         func(m map[string]any)
	}{
		{"1 MiB node id", "samples[0].node", func(m map[string]any) { sample(m)["node"] = strings.Repeat("n", 1<<20) }},
		{"NUL in node id", "samples[0].node", func(m map[string]any) { sample(m)["node"] = "a\x00b" }},
		{"zero-width space in node id", "samples[0].node", func(m map[string]any) { sample(m)["node"] = "part\u200bweight" }},
		{"path in run id", "run", func(m map[string]any) { m["run"] = "../../etc" }},
		{"dot run id", "run", func(m map[string]any) { m["run"] = ".." }},
		{"newline in line id", "line", func(m map[string]any) { m["line"] = "line\nfake" }},
		{"bidi control in product", "product", func(m map[string]any) { m["product"] = "p\u202e" }},
		{"state with markup", "samples[0].state", func(m map[string]any) { sample(m)["state"] = "<b>pwned</b>" }},
		{"state too long", "samples[0].state", func(m map[string]any) { sample(m)["state"] = strings.Repeat("x", 33) }},
		{"ts -2^63", "samples[0].ts", func(m map[string]any) { sample(m)["ts"] = int64(math.MinInt64) }},
		{"ts beyond year 9999", "samples[0].ts", func(m map[string]any) { sample(m)["ts"] = int64(253402300800000) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := ok()
			c.mut(m)
			b := e.want(e.do("engineer", "POST", "/api/v1/ingest/samples", m), 400, core.CodeInvalidArgument).errBody(t)
			if b.Field != c.field {
				t.Fatalf("field %q, want %q: %s", b.Field, c.field, b.Message)
			}
		})
	}
	// Nothing of the refused batches was stored; a good one is.
	e.want(e.do("engineer", "GET", "/api/v1/runs/run-j", nil), 404, core.CodeNotFound)
	e.want(e.do("engineer", "POST", "/api/v1/ingest/samples", ok()), 200, "")
	// The bucketed query that a stored -2^63 broke answers.
	e.want(e.do("engineer", "GET", "/api/v1/ts?node=n1&bucket=1h", nil), 200, "")

	// The CSV path refuses the same things with the same words.
	for _, c := range []struct{ name, csv, query, want string }{
		{"zero-width space in a column", "ts,part\u200bweight\n1,2\n", "run=r1", "invisible character"},
		{"state with markup", "ts,node,value,state\n1,n,2,<b>x</b>\n", "run=r2", "want letters"},
		{"path in run id", "ts,n\n1,2\n", "run=..%2Fx", "path separator"},
		{"time beyond year 9999", "ts,n\n253402300800000,2\n", "run=r3", "outside the years"},
	} {
		t.Run("csv "+c.name, func(t *testing.T) {
			r := e.do("engineer", "POST", "/api/v1/ingest/csv?line=line-j&product=p&recipe=r&timeUnit=ms&"+c.query, strings.NewReader(c.csv))
			if r.status < 400 || r.status >= 500 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if b := r.errBody(t); !strings.Contains(b.Message, c.want) {
				t.Fatalf("message %q lacks %q", b.Message, c.want)
			}
		})
	}
}

// Security finding 12 (duplicates): two samples of a node at the same
// time in one CSV were counted as ingested and silently collapsed into
// one; now the row is a bad row (the file fails, or with skip-bad it is
// skipped and counted) and the counts are what was stored.
func TestSec12_DuplicateTimesInOneCSV(t *testing.T) {
	e := newEnv(t, Options{})
	wide := "ts,d1,d2\n1000,1,2\n1000,3,4\n2000,5,6\n"
	r := e.do("engineer", "POST", "/api/v1/ingest/csv?line=line-d&product=p&recipe=r&run=rd1&timeUnit=ms", strings.NewReader(wide))
	if b := e.want(r, 422, core.CodeIngestInvalid).errBody(t); !strings.Contains(b.Message, "repeats") {
		t.Fatalf("message %q", b.Message)
	}
	var rep struct {
		Samples int            `json:"samples"`
		Skipped int            `json:"skipped"`
		Reasons map[string]int `json:"skipReasons"`
	}
	e.want(e.do("engineer", "POST", "/api/v1/ingest/csv?line=line-d&product=p&recipe=r&run=rd1&timeUnit=ms&skipBad=true", strings.NewReader(wide)), 200, "").json(t, &rep)
	if rep.Samples != 4 || rep.Skipped != 1 {
		t.Fatalf("report %+v", rep)
	}
	long := "ts,node,value\n1000,d3,1\n1000,d3,2\n"
	e.want(e.do("engineer", "POST", "/api/v1/ingest/csv?line=line-d&product=p&recipe=r&run=rd2&timeUnit=ms", strings.NewReader(long)), 422, core.CodeIngestInvalid)
	var page core.Page
	e.want(e.do("engineer", "GET", "/api/v1/ts?node=d1", nil), 200, "").json(t, &page)
	if len(page.Points) != 2 || page.Points[0].Value != 1 {
		t.Fatalf("stored %+v", page.Points)
	}
}

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }
