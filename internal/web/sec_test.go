package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/service"
)

// oneToken verifies only the token "aml_good".
type oneToken struct{}

func (oneToken) VerifyToken(_ context.Context, tok string) (auth.Principal, error) {
	if tok == "aml_good" {
		return auth.Principal{Name: "pat", Role: auth.RoleViewer, TokenID: "tok_1"}, nil
	}
	return auth.Principal{}, auth.Unauthenticated("unknown token")
}

// TestSec12_LoginRefusesCrossOrigin: a page on another site must not log
// the browser in with the attacker's token (login CSRF): the login form's
// POST passes the same Origin rule as the UI's other forms. A same-origin
// login and a client without browser headers still log in.
func TestSec12_LoginRefusesCrossOrigin(t *testing.T) {
	srv := httptest.NewServer(New(&service.Deps{}, Options{Verifier: oneToken{}}))
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	login := func(hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {"aml_good"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	setsCookie := func(res *http.Response) bool {
		for _, ck := range res.Cookies() {
			if ck.Name == auth.CookieName && ck.Value != "" {
				return true
			}
		}
		return false
	}
	for name, hdr := range map[string]map[string]string{
		"foreign origin":  {"Origin": "https://evil.example"},
		"null origin":     {"Origin": "null"},
		"cross-site":      {"Sec-Fetch-Site": "cross-site"},
		"foreign referer": {"Referer": "https://evil.example/login-csrf.html"},
	} {
		res := login(hdr)
		if res.StatusCode != http.StatusForbidden || setsCookie(res) {
			t.Errorf("%s: status %d, cookie set %v; want 403 and no cookie", name, res.StatusCode, setsCookie(res))
		}
	}
	for name, hdr := range map[string]map[string]string{
		"same origin":     {"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"},
		"same referer":    {"Referer": srv.URL + "/ui/login"},
		"no browser hdrs": nil,
	} {
		res := login(hdr)
		if res.StatusCode != http.StatusSeeOther || !setsCookie(res) {
			t.Errorf("%s: status %d, cookie set %v; want 303 and the cookie", name, res.StatusCode, setsCookie(res))
		}
	}
}
