package api

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// TestSec15_MetricsNeedEveryLine: /metrics counts the jobs, ingests and
// trials of every line together (it has no line label to filter by), so a
// token scoped to one line learnt how busy the others were. Only a
// principal whose scope is every line may read it; a scoped one gets
// AML_FORBIDDEN, with a bearer token or the UI's session cookie, and the
// refusal carries no figure.
func TestSec15_MetricsNeedEveryLine(t *testing.T) {
	e := newEnv(t, Options{})
	_, secret, err := auth.NewTokens(e.d.Store.SQL()).Create(context.Background(), "test",
		auth.NewToken{Name: "sam", Role: auth.RoleViewer, Lines: []string{"line-other"}})
	if err != nil {
		t.Fatal(err)
	}
	e.tok["scopedviewer"] = secret
	// Something per line to count.
	e.want(e.do("otherline", "POST", "/api/v1/ingest/samples", map[string]any{"line": "line-other", "product": "p", "recipe": "r", "run": "run-o",
		"samples": []any{map[string]any{"node": "o1", "ts": 1, "value": 1}}}), 200, "")
	cases := []struct {
		who    string
		cookie bool
		status int
	}{
		{"viewer", false, 200},
		{"admin", false, 200},
		{"agent", false, 200},
		{"viewer", true, 200},
		{"otherline", false, 403},
		{"scopedviewer", false, 403},
		{"otherline", true, 403},
		{"scopedviewer", true, 403},
	}
	for _, c := range cases {
		tok := e.tok[c.who]
		if c.cookie {
			tok = "cookie:" + tok
		}
		r := e.raw("GET", "/metrics", "", tok, nil, nil)
		if r.status != c.status {
			t.Errorf("%s (cookie %v): status %d, want %d: %.200s", c.who, c.cookie, r.status, c.status, r.body)
			continue
		}
		body := string(r.body)
		if c.status == 200 {
			if !strings.Contains(body, "aml_ingest_samples_total") {
				t.Errorf("%s: metrics lack aml_ingest_samples_total", c.who)
			}
			continue
		}
		b := r.errBody(t)
		if b.Code != core.CodeForbidden || strings.Contains(body, "aml_") {
			t.Errorf("%s (cookie %v): want AML_FORBIDDEN without figures, got %s", c.who, c.cookie, body)
		}
	}
}
