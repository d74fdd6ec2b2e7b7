package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestTrialPageThroughOps: the trial page reads through the app ops
// (trial.show, snapshot.show, scene.show, cert.list): it lists the
// certificates issued from the trial, draws the scene's limits, and is
// refused to a caller outside the trial's line.
func TestTrialPageThroughOps(t *testing.T) {
	f := getFixture(t)
	id := f.issueCert(t)
	code, body, _ := get(t, f.client(t, "alice"), f.srv.URL+"/ui/trials/"+f.demo.TrialID)
	if code != http.StatusOK || !strings.Contains(body, `/ui/certificates/`+id) || !strings.Contains(body, "range max") {
		t.Fatalf("trial page: %d, want certificate %s and the scene's limits: %.300s", code, id, body)
	}
	if code, body, _ := get(t, f.client(t, "olga"), f.srv.URL+"/ui/trials/"+f.demo.TrialID); code != http.StatusForbidden || strings.Contains(body, id) {
		t.Fatalf("olga: %d %.200s", code, body)
	}
}

// TestAuditPageHeadThroughOp: the audit page's head (seq and hash) is
// audit.list's, the log's newest entry.
func TestAuditPageHeadThroughOp(t *testing.T) {
	f := getFixture(t)
	seq, hash, err := f.store.AuditLog().Head(context.Background())
	if err != nil || seq == 0 {
		t.Fatalf("head %d %v", seq, err)
	}
	code, body, _ := get(t, f.client(t, "victor"), f.srv.URL+"/ui/audit?limit=1")
	if want := fmt.Sprintf("head seq %d <code>%s", seq, hash[:12]); code != http.StatusOK || !strings.Contains(body, want) {
		t.Fatalf("audit page %d, want %q: %.300s", code, want, body)
	}
}
