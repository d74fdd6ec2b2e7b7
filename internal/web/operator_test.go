package web

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/app"
)

// TestOperatorOverview: the operator page of the demo line is the
// application's line.overview (the API's GET /lines/{line}/overview):
// every node with its alarm, the demo's executed write with its readback,
// a freshly issued certificate awaiting approval; its fragment is the
// body alone; a caller scoped to another line is refused; /ui/operator
// lists the lines in scope.
func TestOperatorOverview(t *testing.T) {
	f := getFixture(t)
	const line = "line-injection-01"
	cert := f.issueCert(t)
	victor := f.client(t, "victor")

	// The op's answer over the API.
	code, raw, _ := get(t, victor, f.srv.URL+"/api/v1/lines/"+line+"/overview?staleAfter=87600h")
	if code != http.StatusOK {
		t.Fatalf("API overview: %d %s", code, excerpt(raw))
	}
	var ov app.LineOverview
	if err := json.Unmarshal([]byte(raw), &ov); err != nil {
		t.Fatal(err)
	}
	if len(ov.Nodes) == 0 || len(ov.Writes) == 0 || len(ov.Pending) == 0 {
		t.Fatalf("overview: %d nodes, %d writes, %d pending", len(ov.Nodes), len(ov.Writes), len(ov.Pending))
	}

	code, body, _ := get(t, victor, f.srv.URL+"/ui/operator/"+line+"?stale=87600h")
	if code != http.StatusOK {
		t.Fatalf("operator page: %d %s", code, excerpt(body))
	}
	rows := regexp.MustCompile(`<tr data-node="([^"]+)" data-alarm="([^"]*)"`).FindAllStringSubmatch(body, -1)
	if len(rows) != len(ov.Nodes) {
		t.Fatalf("%d node rows, the op has %d nodes", len(rows), len(ov.Nodes))
	}
	for i, r := range rows {
		if r[1] != ov.Nodes[i].ID || r[2] != ov.Nodes[i].Alarm {
			t.Errorf("row %d: %s %q, op %s %q", i, r[1], r[2], ov.Nodes[i].ID, ov.Nodes[i].Alarm)
		}
	}
	if !strings.Contains(body, `data-alarms="`+strconv.Itoa(ov.Alarms)+`"`) {
		t.Errorf("alarm count %d not shown", ov.Alarms)
	}
	w := ov.Writes[0]
	if !strings.Contains(body, `data-write="`+strconv.FormatInt(w.Seq, 10)+`"`) || len(w.Moves) == 0 || !w.Moves[0].Verified || !strings.Contains(body, fmtNum(w.Moves[0].Readback)+" ✓") {
		t.Errorf("the demo's write %+v is not shown with its readback", w)
	}
	if !strings.Contains(body, `data-cert="`+cert+`" data-state="awaiting_approval"`) {
		t.Errorf("issued certificate %s not pending", cert)
	}
	if !strings.Contains(body, `data-src="/ui/operator/`+line+`/fragment?stale=87600h"`) || !strings.Contains(body, `/ui/static/linelive.js`) {
		t.Error("the page does not refresh its body")
	}

	code, frag, _ := get(t, victor, f.srv.URL+"/ui/operator/"+line+"/fragment")
	if code != http.StatusOK || strings.Contains(frag, "<html") || !strings.Contains(frag, `id="operator-nodes"`) {
		t.Errorf("fragment: %d %s", code, excerpt(frag))
	}
	code, body, _ = get(t, f.client(t, "olga"), f.srv.URL+"/ui/operator/"+line)
	if code != http.StatusForbidden || strings.Contains(body, `id="operator-nodes"`) {
		t.Errorf("another line's approver: %d %s", code, excerpt(body))
	}
	code, body, _ = get(t, victor, f.srv.URL+"/ui/operator/"+line+"?stale=soon")
	if code != http.StatusBadRequest || !strings.Contains(body, "stale must be a duration") {
		t.Errorf("bad stale: %d %s", code, excerpt(body))
	}
	code, body, h := get(t, victor, f.srv.URL+"/ui/operator")
	if code == http.StatusSeeOther {
		if h.Get("Location") != "/ui/operator/"+line {
			t.Errorf("one line: redirect to %s", h.Get("Location"))
		}
	} else if code != http.StatusOK || !strings.Contains(body, `href="/ui/operator/`+line+`"`) {
		t.Errorf("operator index: %d %s", code, excerpt(body))
	}
}
