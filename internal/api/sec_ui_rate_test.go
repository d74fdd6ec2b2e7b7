package api

import (
	"net/http/httptest"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/web"
)

// TestSec15_UISessionRateLimited: the web UI was mounted without the rate
// limit the API puts on every token, so a logged-in browser session (the
// token in the aml_token cookie) or a bearer token sent to /ui/ ran
// requests — pages that query the store, chart data — as fast as it liked.
// A UI request with a principal now takes from the same per-token bucket
// as the API: past the burst it is 429 AML_RATE_LIMITED, and API and UI
// calls of one token share the bucket. The login page, reached without a
// principal, is not the token's to spend.
func TestSec15_UISessionRateLimited(t *testing.T) {
	e := newEnv(t, Options{})
	a := app.New(e.d, app.Options{Version: Version})
	s := NewServer(e.d, Options{App: a, UI: web.New(e.d, web.Options{App: a}), RatePerSec: 0.001, RateBurst: 3})
	srv := httptest.NewServer(s)
	t.Cleanup(func() { s.CloseStreams(); srv.Close() })
	e.srv = srv

	cookie := "cookie:" + e.tok["viewer"]
	steps := []struct {
		token, path string
		status      int
		code        string
	}{
		{cookie, "/ui/", 200, ""},
		{cookie, "/ui/lines/" + simLine, 200, ""},
		{e.tok["viewer"], "/api/v1/lines", 200, ""}, // the same token's bucket
		{cookie, "/ui/", 429, CodeRateLimited},
		{cookie, "/ui/data/trend?node=part_weight", 429, CodeRateLimited},
		{e.tok["viewer"], "/ui/jobs", 429, CodeRateLimited}, // a bearer token on the UI
		{e.tok["viewer"], "/api/v1/lines", 429, CodeRateLimited},
		{"", "/ui/login", 200, ""},                       // no principal: not the token's
		{"cookie:" + e.tok["engineer"], "/ui/", 200, ""}, // another token's own bucket
	}
	for i, c := range steps {
		r := e.raw("GET", c.path, "", c.token, nil, nil)
		if r.status != c.status {
			t.Fatalf("step %d %s: status %d, want %d: %.300s", i, c.path, r.status, c.status, r.body)
		}
		if c.code != "" {
			if b := r.errBody(t); b.Code != c.code {
				t.Fatalf("step %d %s: code %s, want %s", i, c.path, b.Code, c.code)
			}
			if r.header.Get("Retry-After") == "" {
				t.Fatalf("step %d %s: no Retry-After", i, c.path)
			}
		}
	}
}
