package web

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/twin/contract"
)

// A certificate that can no longer execute shows why instead of its
// expiry; one waiting for approval shows its countdown.
func TestCertExecutionShown(t *testing.T) {
	f := getFixture(t)
	base := f.srv.URL
	c := f.client(t, "victor")

	// The demo's certificate was executed: no countdown.
	_, body, _ := get(t, c, base+"/ui/certificates/"+f.demo.CertificateID)
	exec := regexp.MustCompile(`(?s)<dd id="cert-exec">(.*?)</dd>`).FindStringSubmatch(body)
	if exec == nil || !strings.Contains(exec[1], `data-exec="final"`) || !strings.Contains(exec[1], "cannot execute: EXECUTED") || strings.Contains(exec[1], "expires") {
		t.Errorf("executed certificate's execution: %v", exec)
	}

	// A fresh one waits for approval: its expiry and the time left.
	id := f.issueCert(t)
	_, body, _ = get(t, c, base+"/ui/certificates/"+id)
	exec = regexp.MustCompile(`(?s)<dd id="cert-exec">(.*?)</dd>`).FindStringSubmatch(body)
	if exec == nil || !strings.Contains(exec[1], `data-exec="awaiting_approval"`) || !regexp.MustCompile(`expires [0-9-]+ [0-9:]+Z \(in \d+m0s\)`).MatchString(exec[1]) {
		t.Errorf("issued certificate's execution: %v", exec)
	}
	_, body, _ = get(t, c, base+"/ui/certificates")
	row := regexp.MustCompile(`(?s)<tr data-cert="` + regexp.QuoteMeta(id) + `">(.*?)</tr>`).FindStringSubmatch(body)
	if row == nil || !strings.Contains(row[1], `data-exec="awaiting_approval"`) || !strings.Contains(row[1], "(in ") {
		t.Errorf("inbox row: %v", row)
	}

	// Revoked by an approver: final, no countdown, in the inbox's other table.
	alice := f.client(t, "alice")
	code, _, _ := post(t, alice, base+"/ui/certificates/"+id+"/revoke", url.Values{"csrf": {csrfForUser(t, f, "alice")}, "reason": {"flags test"}})
	if code != http.StatusSeeOther {
		t.Fatalf("revoke: %d", code)
	}
	_, body, _ = get(t, c, base+"/ui/certificates")
	row = regexp.MustCompile(`(?s)<tr data-cert="` + regexp.QuoteMeta(id) + `">(.*?)</tr>`).FindStringSubmatch(body)
	if row == nil || !strings.Contains(row[1], "cannot execute: REVOKED") || strings.Contains(row[1], "expires") {
		t.Errorf("revoked row: %v", row)
	}
}

// A shadow run beyond the gate is flagged on the model card (the 1.90 of
// the issue), and a run within it is not.
func TestShadowFlagShown(t *testing.T) {
	f := getFixture(t)
	ctx := context.Background()
	model := oneStepModel(t, f) // its own model: the demo's card stays as it was
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, r := range []contract.ShadowRecord{
		{ModelID: model, RunID: "shadow-bad-run", CreatedAt: now, Steps: 100, NRMSE: 1.90, Coverage: 0.95, Evidence: []byte(`{}`)},
		{ModelID: model, RunID: "shadow-good-run", CreatedAt: now, Steps: 100, NRMSE: 0.05, Coverage: 0.92, Evidence: []byte(`{}`)},
		{ModelID: model, RunID: "shadow-nan-run", CreatedAt: now, Steps: 0, NRMSE: math.NaN(), Coverage: math.NaN(), Evidence: []byte(`{}`)},
	} {
		if err := f.store.PutShadow(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	_, body, _ := get(t, f.client(t, "victor"), f.srv.URL+"/ui/models/"+model)
	rows := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)<tr( class="flagged")?><td><a href="\?run=(shadow-[a-z]+-run)">.*?</tr>`).FindAllStringSubmatch(body, -1) {
		rows[m[2]] = m[0]
	}
	if bad := rows["shadow-bad-run"]; !strings.Contains(bad, `class="flagged"`) || !strings.Contains(bad, "NRMSE 1.9 beyond the gate&#39;s 0.25") {
		t.Errorf("bad shadow run: %q", bad)
	}
	for _, id := range []string{"shadow-good-run", "shadow-nan-run"} {
		if r := rows[id]; r == "" || strings.Contains(r, "flagged") || strings.Contains(r, "shadow-flag") {
			t.Errorf("%s: %q", id, r)
		}
	}
}
