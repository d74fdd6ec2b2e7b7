package web

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
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

func TestIngestAndLineFileForms(t *testing.T) {
	f := getFixture(t)
	base := f.srv.URL
	eve := f.client(t, "eve")
	tok := csrfForUser(t, f, "eve")
	fields := [][2]string{{"csrf", tok}, {"line", "line-web-own"}, {"product", "p1"}, {"recipe", "r1"}, {"run", "web-own-run-1"}, {"delimiter", ";"}, {"decimalComma", "true"}, {"unit", "sp=bar\npv=degC"}}
	code, body := postMultipart(t, eve, base+"/ui/ingest/csv", fields, "file", "own.csv", ownLineCSV(120, 0))
	if code != http.StatusOK || !strings.Contains(body, `id="ingest-report"`) || !strings.Contains(body, `<dd class="samples">240</dd>`) {
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
