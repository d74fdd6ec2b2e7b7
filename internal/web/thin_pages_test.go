package web

import (
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
