package web

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var (
	modelRowRe = regexp.MustCompile(`<tr data-model="([^"]+)">`)
	testRunRe  = regexp.MustCompile(`<option value="([^"]+)">[^<]* \(test\)</option>`)
	fitCellRe  = regexp.MustCompile(`<td class="n fit">([^<]+)</td>`)
)

// The models table of a dataset (model.compare: metrics, gates,
// coverage, class, size, training time, sortable) and the comparison of
// the ticked models on one run (model.compare's validation view: fit %).
func TestModelsTableAndCompare(t *testing.T) {
	f := getFixture(t)
	second := oneStepModel(t, f)
	base := f.srv.URL
	c := f.client(t, "victor")

	code, body, _ := get(t, c, base+"/ui/models?dataset="+url.QueryEscape(f.demo.DatasetID))
	if code != http.StatusOK {
		t.Fatalf("models of the dataset %d: %s", code, excerpt(body))
	}
	var rows []string
	for _, m := range modelRowRe.FindAllStringSubmatch(body, -1) {
		rows = append(rows, m[1])
	}
	if len(rows) < 2 || !strings.Contains(strings.Join(rows, " "), f.demo.ModelID) || !strings.Contains(strings.Join(rows, " "), second) {
		t.Fatalf("rows %v, want the demo model and %s", rows, second)
	}
	for _, s := range []string{`class="sortable compact"`, `/ui/static/sorttable.js`, `name="model" value="` + second + `"`, "one_step@1", "hybrid_residual@1",
		"KiB", `data-type="num">Test NRMSE`, `data-type="num">Coverage`, `action="/ui/models/compare"`} {
		if !strings.Contains(body, s) {
			t.Errorf("models table lacks %q", s)
		}
	}
	if !regexp.MustCompile(`<td class="n" data-v="[0-9.e-]+">\d+\.\d s</td>`).MatchString(body) {
		t.Error("no training time in seconds")
	}
	m := testRunRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no test run to compare on")
	}
	testRun := m[1]

	q := url.Values{"dataset": {f.demo.DatasetID}, "run": {testRun}, "model": {f.demo.ModelID, second}}
	code, body, _ = get(t, c, base+"/ui/models/compare?"+q.Encode())
	if code != http.StatusOK {
		t.Fatalf("compare %d: %s", code, excerpt(body))
	}
	if got := modelRowRe.FindAllStringSubmatch(body, -1); len(got) != 2 {
		t.Errorf("compare rows %v, want 2", got)
	}
	fits := fitCellRe.FindAllStringSubmatch(body, -1)
	if len(fits) < 2 {
		t.Fatalf("fit cells %v", fits)
	}
	for _, f := range fits {
		if !strings.HasSuffix(f[1], "%") {
			t.Errorf("fit cell %q is not a percentage", f[1])
		}
	}
	if n := svgPoints(body); len(n) == 0 || n[0] < 10 {
		t.Errorf("overlay charts %v: want measured and simulated series", n)
	}
	if !strings.Contains(body, "measured") || !strings.Contains(body, "one_step@1·"+second[len(second)-6:]+" fit ") {
		t.Error("the overlay lacks the measured series or a model's fit in its legend")
	}

	// What the form may not leave out; the scope is the application's.
	for _, tc := range []struct {
		q     url.Values
		code  int
		field string
	}{
		{url.Values{"dataset": {f.demo.DatasetID}, "run": {testRun}}, http.StatusBadRequest, "model"},
		{url.Values{"dataset": {f.demo.DatasetID}, "model": {second}}, http.StatusBadRequest, "run"},
		{url.Values{"run": {testRun}, "model": {second}}, http.StatusBadRequest, "dataset"},
	} {
		code, body, _ := get(t, c, base+"/ui/models/compare?"+tc.q.Encode())
		if code != tc.code || !strings.Contains(body, tc.field) {
			t.Errorf("%v: %d %s", tc.q, code, excerpt(body))
		}
	}
	code, body, _ = get(t, f.client(t, "olga"), base+"/ui/models/compare?"+q.Encode())
	if code != http.StatusForbidden {
		t.Errorf("olga compares another line's models: %d %s", code, excerpt(body))
	}
}
