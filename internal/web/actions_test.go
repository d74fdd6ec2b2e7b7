package web

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// postMultipart posts fields (in order) and then one file part.
func postMultipart(t *testing.T, c *http.Client, u string, fields [][2]string, fileField, fileName, content string) (int, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if fileField != "" {
		fw, err := mw.CreateFormFile(fileField, fileName)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(fw, content); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", u, &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// ownLineCSV is a small wide file of a new line: a setpoint and its
// response, 1 s apart, with a European decimal comma and ; delimiter.
func ownLineCSV(n int, offset float64) string {
	var b strings.Builder
	b.WriteString("time;sp;pv\n")
	for i := 0; i < n; i++ {
		sp := 10.0
		if (i/20)%2 == 1 {
			sp = 14
		}
		pv := sp*0.5 + offset + float64(i%7)*0.01
		b.WriteString("2026-03-02T08:" + pad2(i/60) + ":" + pad2(i%60) + "Z;" + strings.ReplaceAll(ftoa(sp), ".", ",") + ";" + strings.ReplaceAll(ftoa(pv), ".", ",") + "\n")
	}
	return b.String()
}

func pad2(i int) string {
	s := "0" + strconv.Itoa(i)
	return s[len(s)-2:]
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// ownLine uploads the own line's CSV and applies its line file through the
// forms (once per test binary: the browser test adds runs of its own).
var ownLineOnce sync.Once

func TestIngestAndLineFileForms(t *testing.T) {
	f := getFixture(t)
	base := f.srv.URL
	eve := f.client(t, "eve")
	tok := csrfForUser(t, f, "eve")
	fields := [][2]string{{"csrf", tok}, {"line", "line-web-own"}, {"product", "p1"}, {"recipe", "r1"}, {"run", "web-own-run-1"}, {"delimiter", ";"}, {"decimalComma", "true"}, {"unit", "sp=bar\npv=degC"}}
	code, body := postMultipart(t, eve, base+"/ui/ingest/csv", fields, "file", "own.csv", ownLineCSV(300, 0))
	if code != http.StatusOK || !strings.Contains(body, `id="ingest-report"`) || !strings.Contains(body, `<dd class="samples">600</dd>`) {
		t.Fatalf("upload: status %d: %s", code, excerpt(body))
	}
	// Without the token nothing is read or written.
	code, body = postMultipart(t, eve, base+"/ui/ingest/csv", fields[1:], "file", "own.csv", ownLineCSV(10, 0))
	if code != http.StatusForbidden || !strings.Contains(body, "AML_FORBIDDEN") {
		t.Errorf("upload without the CSRF token: status %d: %s", code, excerpt(body))
	}
	// A viewer's upload is refused with the rule, on the form.
	vtok := csrfForUser(t, f, "victor")
	vf := append([][2]string{{"csrf", vtok}}, fields[1:]...)
	code, body = postMultipart(t, f.client(t, "victor"), base+"/ui/ingest/csv", vf, "file", "own.csv", ownLineCSV(10, 0))
	if code != http.StatusForbidden || !strings.Contains(body, `class="card error-card form-error"`) || !strings.Contains(body, "victor has role viewer") {
		t.Errorf("viewer upload: status %d: %s", code, excerpt(body))
	}

	// The line file, pasted: sp becomes a writable setpoint with a range.
	file := "line: line-web-own\nnodes:\n  - id: sp\n    writable: true\n    unit: bar\n    min: 5\n    max: 20\n  - id: pv\n    unit: degC\n"
	code, body, _ = post(t, eve, base+"/ui/lines/apply", url.Values{"csrf": {tok}, "line": {"line-web-own"}, "file": {file}})
	if code != http.StatusOK || !strings.Contains(body, `id="line-applied"`) || !strings.Contains(body, `<tr data-node="sp"><td>sp</td><td class="kind">dcw</td>`) {
		t.Fatalf("line apply: status %d: %s", code, excerpt(body))
	}
	n, err := f.store.GetNode(context.Background(), "sp")
	if err != nil || n.Kind != "dcw" || n.Max == nil || *n.Max != 20 {
		t.Errorf("node sp after the line file: %+v %v", n, err)
	}
	// A file for another line than the form's is refused on the form.
	code, body, _ = post(t, eve, base+"/ui/lines/apply", url.Values{"csrf": {tok}, "line": {"line-other"}, "file": {file}})
	if code != http.StatusBadRequest || !strings.Contains(body, "form-error") {
		t.Errorf("line file for another line: status %d: %s", code, excerpt(body))
	}
}

// TestDatasetJobAndStageForms: on the own line of TestIngestAndLineFileForms
// (run first if needed), the dataset form is built from the line's nodes,
// its live check names what is wrong, the build runs dataset.build; the
// job form carries the trainer's schema fields, the job trains in the
// fixture's worker, and the model card's stage buttons promote it to
// shadow and refuse production to an engineer, on the card.
func TestDatasetJobAndStageForms(t *testing.T) {
	f := getFixture(t)
	ownLineOnce.Do(func() { TestIngestAndLineFileForms(t) })
	base := f.srv.URL
	eve := f.client(t, "eve")
	tok := csrfForUser(t, f, "eve")
	code, body := get2(t, eve, base+"/ui/datasets/new?line=line-web-own")
	if code != 200 || !strings.Contains(body, `<select name="role.sp" id="role-sp">`) || !strings.Contains(body, `value="p1"`) {
		t.Fatalf("dataset form: %d %s", code, excerpt(body))
	}
	form := url.Values{"csrf": {tok}, "line": {"line-web-own"}, "product": {"p1"}, "recipe": {"r1"}, "purpose": {"mpc_surrogate"}, "role.sp": {"control"}, "role.pv": {""},
		"beat": {"1s"}, "historySteps": {"4"}, "horizonSteps": {"2"}, "stride": {"1"}, "valRatio": {"0.2"}, "testRatio": {"0.2"}, "seed": {"1"}, "mode": {"time_blocks"}}
	code, body, _ = post(t, eve, base+"/ui/datasets/check", form)
	if code != 200 || !strings.Contains(body, `"ok":false`) || !strings.Contains(body, "target") {
		t.Errorf("check without a target: %d %s", code, body)
	}
	form.Set("role.pv", "target")
	code, body, _ = post(t, eve, base+"/ui/datasets/check", form)
	if code != 200 || !strings.Contains(body, `"ok":true`) {
		t.Errorf("check of a valid spec: %d %s", code, body)
	}
	code, body, _ = post(t, eve, base+"/ui/datasets", form)
	m := regexp.MustCompile(`id="built-link">([^<]+)<`).FindStringSubmatch(body)
	if code != 200 || m == nil {
		t.Fatalf("dataset build: %d %s", code, excerpt(body))
	}
	ds := m[1]
	code, body = get2(t, eve, base+"/ui/jobs/new?datasetId="+ds+"&trainer=linear_state_space@1")
	if code != 200 || !strings.Contains(body, `id="job-params"`) || !strings.Contains(body, `name="param.`) {
		t.Fatalf("job form: %d %s", code, excerpt(body))
	}
	code, body, h := post(t, eve, base+"/ui/jobs", url.Values{"csrf": {tok}, "datasetId": {ds}, "trainer": {"linear_state_space@1"}, "note": {"web form"}, "param.initSteps": {"2"}})
	loc := h.Get("Location")
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/jobs/") {
		t.Fatalf("job submit: %d %s %s", code, loc, excerpt(body))
	}
	jobID := strings.TrimPrefix(strings.Split(loc, "?")[0], "/ui/jobs/")
	model := waitJob(t, f, jobID)
	code, body = get2(t, eve, base+"/ui/models/"+model)
	if code != 200 || !strings.Contains(body, `id="gate-summary"`) || !strings.Contains(body, `id="promote-form"`) || strings.Contains(body, `<option value="production">`) {
		t.Fatalf("model card stage section: %d %s", code, excerpt(body))
	}
	code, _, h = post(t, eve, base+"/ui/models/"+model+"/promote", url.Values{"csrf": {tok}, "to": {"shadow"}, "expect": {"candidate"}, "reason": {"web test"}})
	if code != http.StatusSeeOther {
		t.Fatalf("promote to shadow: %d %s", code, h.Get("Location"))
	}
	if got, err := f.store.GetModel(context.Background(), model); err != nil || got.Stage != "shadow" {
		t.Errorf("model after promote: %+v %v", got.Stage, err)
	}
	code, body, _ = post(t, eve, base+"/ui/models/"+model+"/promote", url.Values{"csrf": {tok}, "to": {"production"}, "expect": {"shadow"}})
	if code != http.StatusForbidden || !strings.Contains(body, `form-error`) || !strings.Contains(body, "eve has role engineer") || !strings.Contains(body, `id="stage-card"`) {
		t.Errorf("engineer promotes to production: %d %s", code, excerpt(body))
	}
}

func get2(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	code, body, _ := get(t, c, u)
	return code, body
}

// waitJob waits for the fixture's worker to finish a job and returns its
// model (a generous bound against a hung job, not a timing assertion).
func waitJob(t *testing.T, f *fixture, id string) string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		j, err := f.store.GetJob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status.Terminal() {
			if j.ModelID == "" {
				t.Fatalf("job %s ended %s without a model: %s %s", id, j.Status, j.ErrorCode, j.Error)
			}
			return j.ModelID
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", id, j.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
