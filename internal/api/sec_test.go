package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// raw sends a request with the given Host (empty: the server's) and extra
// headers; token "" sends none, a token prefixed "cookie:" goes in the
// session cookie, any other as a bearer token.
func (e *env) raw(method, path, host, token string, hdr map[string]string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if host != "" {
		req.Host = host
	}
	if c, ok := strings.CutPrefix(token, "cookie:"); ok {
		req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: c})
	} else if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, body: b, header: res.Header}
}

// port is the test server's port.
func (e *env) port() string {
	u, _ := url.Parse(e.srv.URL)
	return u.Port()
}

// tokenCount is how many tokens the store holds.
func (e *env) tokenCount() int {
	e.t.Helper()
	var tl struct {
		Count int `json:"count"`
	}
	e.want(e.do("admin", "GET", "/api/v1/tokens", nil), 200, "").json(e.t, &tl)
	return tl.Count
}

// TestSec3_DevModeRefusesForeignHostAndOrigin: with --dev, a page on
// another site that rebinds its name to 127.0.0.1 (its Host) or posts
// cross-origin (its Origin) must not mint an admin token as "dev".
func TestSec3_DevModeRefusesForeignHostAndOrigin(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		_, _ = io.WriteString(w, p.Name)
	})
	e := newEnv(t, Options{Dev: true, UI: ui})
	port := e.port()
	mint := map[string]any{"name": "pwn", "role": "admin"}
	before := e.tokenCount()
	for name, c := range map[string]struct {
		host string
		hdr  map[string]string
	}{
		"rebound host":        {host: "evil.example:" + port},
		"rebound host+origin": {host: "evil.example:" + port, hdr: map[string]string{"Origin": "http://evil.example:" + port}},
		"foreign origin":      {hdr: map[string]string{"Origin": "https://evil.example"}},
		"null origin":         {hdr: map[string]string{"Origin": "null"}},
		"other local port":    {hdr: map[string]string{"Origin": "http://localhost:1"}},
		"cross-site fetch":    {hdr: map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"foreign referer":     {hdr: map[string]string{"Referer": "https://evil.example/x"}},
	} {
		r := e.raw("POST", "/api/v1/tokens", c.host, "", c.hdr, mint)
		if r.status != http.StatusForbidden || r.errBody(t).Code != core.CodeForbidden {
			t.Errorf("%s: status %d %s, want 403 %s", name, r.status, r.body, core.CodeForbidden)
		}
	}
	if n := e.tokenCount(); n != before {
		t.Fatalf("a refused request created a token: %d → %d", before, n)
	}
	// The server's own names still work: the CLI (no Origin) and a page
	// served by this server under either loopback name.
	e.want(e.raw("POST", "/api/v1/tokens", "", "", nil, mint), 201, "")
	e.want(e.raw("GET", "/api/v1/info", "localhost:"+port, "", map[string]string{"Origin": "http://localhost:" + port}, nil), 200, "")
	e.want(e.raw("GET", "/api/v1/info", "localhost:"+port, "", map[string]string{"Origin": "http://127.0.0.1:" + port, "Sec-Fetch-Site": "same-site"}, nil), 200, "")
	e.want(e.raw("GET", "/api/v1/info", "[::1]:"+port, "", nil, nil), 200, "")
	// A presented token is verified as always, whatever the Host (a CLI
	// client behind a proxy, no Origin).
	e.want(e.raw("GET", "/api/v1/info", "aml.example", e.tok["viewer"], nil, nil), 200, "")
	// The UI behind the same rule.
	e.want(e.raw("GET", "/ui/", "evil.example:"+port, "", nil, nil), 403, core.CodeForbidden)
	e.want(e.raw("POST", "/ui/x", "", "", map[string]string{"Origin": "https://evil.example"}, nil), 403, core.CodeForbidden)
	if r := e.want(e.raw("GET", "/ui/", "", "", nil, nil), 200, ""); string(r.body) != "dev" {
		t.Fatalf("ui principal %q", r.body)
	}
}

// TestSec3_AllowedHosts: names given with --allowed-host (api Options)
// are accepted as Host in dev mode; others are not.
func TestSec3_AllowedHosts(t *testing.T) {
	e := newEnv(t, Options{Dev: true, AllowedHosts: []string{"aml.lab", "box.lab:9000"}})
	port := e.port()
	e.want(e.raw("GET", "/api/v1/info", "aml.lab:"+port, "", map[string]string{"Origin": "http://aml.lab:" + port}, nil), 200, "")
	e.want(e.raw("GET", "/api/v1/info", "box.lab:9000", "", nil, nil), 200, "")
	e.want(e.raw("GET", "/api/v1/info", "box.lab:"+port, "", nil, nil), 403, core.CodeForbidden)
	e.want(e.raw("GET", "/api/v1/info", "evil.example:"+port, "", nil, nil), 403, core.CodeForbidden)
	// Without dev mode nothing tokenless gets in, whatever the Host.
	e2 := newEnv(t, Options{AllowedHosts: []string{"aml.lab"}})
	e2.want(e2.raw("GET", "/api/v1/info", "aml.lab", "", nil, nil), 401, auth.CodeUnauthenticated)
}

// TestSec6_CookieAPICallsNeedCSRF: the UI's session cookie authenticates
// API calls too; a state-changing one must carry the session's CSRF token
// and come from no other origin. Bearer calls are unaffected.
func TestSec6_CookieAPICallsNeedCSRF(t *testing.T) {
	e := newEnv(t, Options{})
	cookie := "cookie:" + e.tok["admin"]
	mint := map[string]any{"name": "csrf", "role": "admin"}
	probe, _ := http.NewRequest("GET", "/", nil)
	probe.AddCookie(&http.Cookie{Name: auth.CookieName, Value: e.tok["admin"]})
	csrf := auth.CSRFToken(probe)
	before := e.tokenCount()
	for name, hdr := range map[string]map[string]string{
		"no token":                 nil,
		"wrong token":              {auth.CSRFHeader: "00ff"},
		"foreign origin":           {"Origin": "https://evil.example"},
		"foreign origin and token": {"Origin": "https://evil.example", auth.CSRFHeader: csrf},
		"null origin and token":    {"Origin": "null", auth.CSRFHeader: csrf},
	} {
		for _, m := range []string{"POST", "DELETE"} {
			path := "/api/v1/tokens"
			if m == "DELETE" {
				path += "/tok_nope"
			}
			r := e.raw(m, path, "", cookie, hdr, mint)
			if r.status != http.StatusForbidden || r.errBody(t).Code != core.CodeForbidden {
				t.Errorf("%s %s: status %d %s, want 403", m, name, r.status, r.body)
			}
		}
	}
	if n := e.tokenCount(); n != before {
		t.Fatalf("a refused request created a token: %d → %d", before, n)
	}
	// Reads need no token; a call with the token from this origin passes.
	e.want(e.raw("GET", "/api/v1/tokens", "", cookie, map[string]string{"Origin": "https://evil.example"}, nil), 200, "")
	e.want(e.raw("POST", "/api/v1/tokens", "", cookie, map[string]string{auth.CSRFHeader: csrf}, mint), 201, "")
	e.want(e.raw("POST", "/api/v1/tokens", "", cookie, map[string]string{auth.CSRFHeader: csrf, "Origin": e.srv.URL}, mint), 201, "")
	// Bearer calls: no CSRF token, any Origin.
	e.want(e.raw("POST", "/api/v1/tokens", "", e.tok["admin"], map[string]string{"Origin": "https://evil.example"}, mint), 201, "")
}
