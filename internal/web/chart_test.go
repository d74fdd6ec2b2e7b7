package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// demoRuns are the demo line's runs, newest first.
func demoRuns(t *testing.T, f *fixture) []core.Run {
	t.Helper()
	runs, err := f.store.ListRuns(context.Background(), core.RunFilter{Line: "line-injection-01"})
	if err != nil || len(runs) < 2 {
		t.Fatalf("runs %v %v", len(runs), err)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartedMs > runs[j].StartedMs })
	return runs
}

func getTrend(t *testing.T, c *http.Client, base string, q url.Values) (int, trendDoc, string) {
	t.Helper()
	code, body, h := get(t, c, base+"/ui/data/trend?"+q.Encode())
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("content type %q: %.300s", ct, body)
	}
	var doc trendDoc
	if code == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
	}
	return code, doc, body
}

func TestTrendData(t *testing.T) {
	f := getFixture(t)
	base := f.srv.URL
	victor := f.client(t, "victor")
	runs := demoRuns(t, f)
	r0, r1 := runs[0], runs[1]

	// Two signals over two runs, aligned at run start: one series per
	// node and run, each node with its unit, x in minutes from 0.
	q := url.Values{"node": {"part_weight", "hold_pressure"}, "run": {r0.ID, r1.ID}, "align": {"start"}}
	code, doc, body := getTrend(t, victor, base, q)
	if code != http.StatusOK {
		t.Fatalf("trend data %d: %.400s", code, body)
	}
	if doc.Align != "start" || len(doc.Nodes) != 2 || len(doc.Series) != 4 {
		t.Fatalf("doc: align %q, %d nodes, %d series", doc.Align, len(doc.Nodes), len(doc.Series))
	}
	for _, n := range doc.Nodes {
		if n.Unit == "" {
			t.Errorf("node %s has no unit", n.ID)
		}
	}
	for _, s := range doc.Series {
		if len(s.X) < 10 || len(s.X) != len(s.Y) || len(s.Lo) != len(s.X) || len(s.Hi) != len(s.X) {
			t.Fatalf("series %s: %d x, %d y", s.Label, len(s.X), len(s.Y))
		}
		if s.X[0] != 0 || s.X[len(s.X)-1] > 24*60 {
			t.Errorf("series %s: x from %v to %v min, want from the run's start", s.Label, s.X[0], s.X[len(s.X)-1])
		}
		for i := range s.Y {
			if s.Lo[i] > s.Y[i] || s.Y[i] > s.Hi[i] {
				t.Fatalf("series %s: bucket %d mean %v outside min–max %v..%v", s.Label, i, s.Y[i], s.Lo[i], s.Hi[i])
			}
		}
	}

	// The same on an absolute axis: epoch seconds inside each run.
	q.Set("align", "time")
	_, abs, _ := getTrend(t, victor, base, q)
	for _, s := range abs.Series {
		run := r0
		if s.Run == r1.ID {
			run = r1
		}
		if first := int64(s.X[0] * 1000); first != run.StartedMs {
			t.Errorf("series %s starts at %d ms, run %s at %d", s.Label, first, run.ID, run.StartedMs)
		}
	}

	// What the request may not ask.
	for _, tc := range []struct {
		q    url.Values
		code int
		want string
	}{
		{url.Values{"run": {r0.ID}}, http.StatusBadRequest, `"field":"node"`},
		{url.Values{"node": {"part_weight"}}, http.StatusBadRequest, `"field":"run"`},
		{url.Values{"node": {"a", "b", "c", "d", "e"}, "run": {r0.ID}}, http.StatusBadRequest, `"field":"node"`},
		{url.Values{"node": {"part_weight"}, "run": {r0.ID}, "align": {"sideways"}}, http.StatusBadRequest, `"field":"align"`},
		{url.Values{"node": {"no_such_node"}, "run": {r0.ID}}, http.StatusNotFound, "AML_NOT_FOUND"},
		{url.Values{"node": {"part_weight"}, "run": {"no-such-run"}}, http.StatusNotFound, "AML_NOT_FOUND"},
	} {
		code, _, body := getTrend(t, victor, base, tc.q)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%v: %d %.300s, want %d with %s", tc.q, code, body, tc.code, tc.want)
		}
	}

	// Line scope is the application's: a principal of another line is
	// refused, and without a session the answer is a JSON 401, not the
	// login page.
	one := url.Values{"node": {"part_weight"}, "run": {r0.ID}}
	if code, _, body := getTrend(t, f.client(t, "olga"), base, one); code != http.StatusForbidden || !strings.Contains(body, "AML_FORBIDDEN") {
		t.Errorf("olga: %d %.300s", code, body)
	}
	if code, _, body := getTrend(t, f.client(t, ""), base, one); code != http.StatusUnauthorized || !strings.Contains(body, "AML_UNAUTHENTICATED") {
		t.Errorf("anonymous: %d %.300s", code, body)
	}
}

// The trend and run pages carry the interactive chart (its data address,
// the vendored script and stylesheet, the controls) with the SVG inside
// for a browser without scripts.
func TestChartPages(t *testing.T) {
	f := getFixture(t)
	base := f.srv.URL
	c := f.client(t, "victor")
	runs := demoRuns(t, f)
	for _, tc := range []struct{ path, data string }{
		{"/ui/lines/line-injection-01/trend?node=part_weight&node=hold_pressure&run=" + runs[0].ID + "&run=" + runs[1].ID,
			"/ui/data/trend?align=start&amp;node=part_weight&amp;node=hold_pressure&amp;run=" + url.QueryEscape(runs[0].ID) + "&amp;run=" + url.QueryEscape(runs[1].ID)},
		{"/ui/lines/line-injection-01/trend?node=part_weight&align=time", "align=time"},
		{"/ui/runs/" + runs[0].ID + "?node=part_weight&node=hold_pressure", "/ui/data/trend?align=time&amp;node=hold_pressure&amp;node=part_weight&amp;run=" + url.QueryEscape(runs[0].ID)},
	} {
		code, body, _ := get(t, c, base+tc.path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.path, code, excerpt(body))
		}
		for _, s := range []string{`class="ichart"`, `data-src="`, tc.data, "/ui/static/vendor/uplot/uPlot.iife.min.js", "/ui/static/vendor/uplot/uPlot.min.css", "/ui/static/chart.js", `data-act="reset"`, `tabindex="0"`, `class="plot ichart-fallback"`} {
			if !strings.Contains(body, s) {
				t.Errorf("%s lacks %q", tc.path, s)
			}
		}
		if n := svgPoints(body); len(n) == 0 || n[0] == 0 {
			t.Errorf("%s: no SVG fallback with data", tc.path)
		}
	}
	// The vendored files are served (embedded), with their types.
	for p, ct := range map[string]string{"/ui/static/vendor/uplot/uPlot.iife.min.js": "javascript", "/ui/static/vendor/uplot/uPlot.min.css": "text/css", "/ui/static/chart.js": "javascript"} {
		code, body, h := get(t, c, base+p)
		if code != http.StatusOK || !strings.Contains(h.Get("Content-Type"), ct) || len(body) < 1000 {
			t.Errorf("%s: %d %s %d bytes", p, code, h.Get("Content-Type"), len(body))
		}
	}
}

var (
	secondOnce  sync.Once
	secondModel string
	secondErr   error
)

// oneStepModel trains a second model on the demo dataset (one_step@1, a
// MIMO ARX: seconds) with the CLI, once per test binary, so the models
// table and the comparison have two models.
func oneStepModel(t *testing.T, f *fixture) string {
	t.Helper()
	secondOnce.Do(func() {
		var job struct {
			ModelID string `json:"modelId"`
			Status  string `json:"status"`
		}
		secondErr = f.amlJSON(&job, "job", "submit", "--data", f.deps.DataDir, "--dataset", f.demo.DatasetID, "--trainer", "one_step@1", "--wait")
		if secondErr == nil && job.ModelID == "" {
			secondErr = fmt.Errorf("one_step@1 job %s made no model", job.Status)
		}
		secondModel = job.ModelID
	})
	if secondErr != nil {
		t.Fatal(secondErr)
	}
	return secondModel
}
