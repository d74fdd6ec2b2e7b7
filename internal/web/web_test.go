package web

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (int, string, http.Header) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// svgPoints returns the data-points of every chart in a page.
func svgPoints(page string) []int {
	var out []int
	for _, m := range regexp.MustCompile(`<svg [^>]*class="chart"[^>]*data-points="(\d+)"`).FindAllStringSubmatch(page, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

func TestPagesRender(t *testing.T) {
	f := getFixture(t)
	c := f.client(t, "victor") // a viewer reads everything
	base := f.srv.URL
	tests := []struct {
		path     string
		contains []string
		charts   int // at least this many charts with data
	}{
		{"/ui/", []string{"line-injection-01"}, 0},
		{"/ui/lines/line-injection-01", []string{"Trend: overlay runs", "part_weight"}, 0},
		{"/ui/lines/line-injection-01/trend?node=part_weight", []string{"time since run start [min]"}, 1},
		{"/ui/datasets", []string{f.demo.DatasetID}, 0},
		{"/ui/datasets/" + f.demo.DatasetID, []string{`id="summaries"`, `id="cleaning"`, `id="lags"`, "Hampel", "lag cross-correlation"}, 2},
		{"/ui/jobs", []string{f.demo.JobID, `data-live="jobs"`, "<progress"}, 0},
		{"/ui/jobs/" + f.demo.JobID, []string{"hybrid_residual@1", "G1"}, 0},
		{"/ui/models", []string{f.demo.ModelID, "production"}, 0},
		{"/ui/models/" + f.demo.ModelID, []string{"Model card", `id="metrics"`, `id="gates"`, `id="twin-gate"`, "predicted vs actual", "90% conformal band", "of actual values inside the band", `id="shadow"`}, 2},
		{"/ui/scenes", []string{"frozen"}, 0},
		{"/ui/trials", []string{f.demo.TrialID}, 0},
		{"/ui/trials/" + f.demo.TrialID, []string{"PASSED", "hashes to the stored record", "candidate tube", "baseline (hold setpoints)", `id="constraint-results"`, "objective target"}, 3},
		{"/ui/certificates", []string{f.demo.CertificateID, "EXECUTED", `id="role-note"`}, 0},
		{"/ui/certificates/" + f.demo.CertificateID, []string{"EXECUTED", "cert.execute"}, 0},
		{"/ui/audit", []string{"cert.issue", "trial.put"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			code, body, h := get(t, c, base+tc.path)
			if code != http.StatusOK {
				t.Fatalf("status %d: %.600s", code, body)
			}
			if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
				t.Error("no content security policy")
			}
			for _, s := range tc.contains {
				if !strings.Contains(body, s) {
					t.Errorf("page lacks %q: %.300s", s, excerpt(body))
				}
			}
			n := 0
			for _, p := range svgPoints(body) {
				if p > 0 {
					n++
				}
			}
			if n < tc.charts {
				t.Errorf("%d charts with data, want at least %d", n, tc.charts)
			}
			if strings.Contains(body, "http://") && !strings.Contains(body, "http://www.w3.org/2000/svg") {
				t.Error("page refers to an external http resource")
			}
		})
	}
	// The scene page (its id and version come from the list).
	_, list, _ := get(t, c, base+"/ui/scenes")
	m := regexp.MustCompile(`href="(/ui/scenes/[^"]+/[^"]+)"`).FindStringSubmatch(list)
	if m == nil {
		t.Fatal("no scene link")
	}
	code, body, _ := get(t, c, base+m[1])
	if code != http.StatusOK || !strings.Contains(body, `id="constraints"`) || !strings.Contains(body, "hard_range") || !strings.Contains(body, "Write policy") {
		t.Errorf("scene page %d: %.400s", code, body)
	}
}

func TestLoginAndSession(t *testing.T) {
	f := getFixture(t)
	c := f.client(t, "")
	base := f.srv.URL
	// Without a session a page redirects to the login page.
	code, _, h := get(t, c, base+"/ui/models")
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ui/login?next=") {
		t.Fatalf("anonymous page: %d %s", code, h.Get("Location"))
	}
	// Static assets and the login page need no session.
	for _, p := range []string{"/ui/login", "/ui/static/style.css", "/ui/static/live.js"} {
		if code, _, _ := get(t, c, base+p); code != http.StatusOK {
			t.Errorf("%s: %d", p, code)
		}
	}
	tests := []struct {
		name, token string
		status      int
		want        string
	}{
		{"empty", "", http.StatusBadRequest, "Paste your API token"},
		{"unknown", "aml_not-a-real-token", http.StatusUnauthorized, "unknown, expired or revoked"},
		{"valid", f.tokens["alice"], http.StatusSeeOther, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body, h := post(t, c, base+"/ui/login", url.Values{"token": {tc.token}, "next": {"/ui/models"}})
			if code != tc.status {
				t.Fatalf("status %d, want %d: %.300s", code, tc.status, body)
			}
			if !strings.Contains(body, tc.want) {
				t.Errorf("body lacks %q", tc.want)
			}
			if tc.status == http.StatusSeeOther {
				if h.Get("Location") != "/ui/models" {
					t.Errorf("redirect to %q", h.Get("Location"))
				}
				ck := h.Get("Set-Cookie")
				for _, s := range []string{"aml_token=" + tc.token, "HttpOnly", "SameSite=Strict", "Path=/"} {
					if !strings.Contains(ck, s) {
						t.Errorf("cookie %q lacks %q", ck, s)
					}
				}
			}
		})
	}
	// An open redirect is not followed.
	if _, _, h := post(t, c, base+"/ui/login", url.Values{"token": {f.tokens["alice"]}, "next": {"//evil.example/"}}); h.Get("Location") != "/ui/" {
		t.Errorf("next=//evil → %q", h.Get("Location"))
	}
	// A stale cookie is sent to the login page.
	req, _ := http.NewRequest("GET", base+"/ui/models", nil)
	req.AddCookie(&http.Cookie{Name: "aml_token", Value: "aml_revoked"})
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
		t.Errorf("stale cookie: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// csrfFor fetches the certificate page as user and returns its form token.
func csrfFor(t *testing.T, f *fixture, c *http.Client, id string) string {
	t.Helper()
	_, body, _ := get(t, c, f.srv.URL+"/ui/certificates/"+id)
	// The page's token (its decisions are links to their confirmation
	// pages, so the certificate page itself has no form).
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		m = regexp.MustCompile(`<meta name="csrf" content="([0-9a-f]+)">`).FindStringSubmatch(body)
	}
	if m == nil {
		// Roles without the buttons still get a token from the inbox's
		// logout-less forms: derive it from any page's forms.
		t.Fatalf("no csrf token on the certificate page: %.400s", body)
	}
	return m[1]
}

func TestCertificateDecisions(t *testing.T) {
	f := getFixture(t)
	base := f.srv.URL
	alice := f.client(t, "alice")
	tests := []struct {
		name   string
		user   string
		action string
		form   url.Values
		status int
		want   string // in the error page
		after  string // certificate status afterwards
	}{
		{"agent refused", "bot", "approve", nil, http.StatusForbidden, "a decision a person with the approver (or admin) role signs", "ISSUED"},
		{"viewer refused", "victor", "approve", nil, http.StatusForbidden, "role viewer", "ISSUED"},
		{"engineer refused", "eve", "revoke", url.Values{"reason": {"no"}}, http.StatusForbidden, "may not cert.approve", "ISSUED"},
		{"approver outside line scope", "olga", "approve", nil, http.StatusForbidden, "outside the scope", "ISSUED"},
		{"approver approves", "alice", "approve", nil, http.StatusSeeOther, "", "APPROVED"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := f.issueCert(t)
			c := f.client(t, tc.user)
			// The token is the session's own (the agent's page has no
			// buttons, so take the form token an approver page would
			// carry for this session: the same derivation).
			tok := csrfForUser(t, f, tc.user)
			form := url.Values{"csrf": {tok}}
			for k, v := range tc.form {
				form[k] = v
			}
			code, body, _ := post(t, c, base+"/ui/certificates/"+id+"/"+tc.action, form)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %.500s", code, tc.status, body)
			}
			if tc.want != "" && !strings.Contains(body, tc.want) {
				t.Errorf("page lacks %q: %.800s", tc.want, body)
			}
			if got := f.certStatus(t, id); got != tc.after {
				t.Errorf("certificate %s is %s, want %s", id, got, tc.after)
			}
		})
	}
	t.Run("approver may not approve own request", func(t *testing.T) {
		// alice requests (store rule: the requester cannot approve).
		var rec struct {
			Certificate struct {
				RecommendationID string `json:"recommendationId"`
			} `json:"certificate"`
		}
		if err := f.amlJSON(&rec, "cert", "issue", "--data", f.deps.DataDir, "--trial", f.demo.TrialID, "--as", "alice"); err != nil {
			t.Fatal(err)
		}
		id := rec.Certificate.RecommendationID
		code, body, _ := post(t, alice, base+"/ui/certificates/"+id+"/approve", url.Values{"csrf": {csrfFor(t, f, alice, id)}})
		if code < 400 || f.certStatus(t, id) != "ISSUED" {
			t.Errorf("self-approval: status %d, cert %s: %.400s", code, f.certStatus(t, id), body)
		}
	})
	t.Run("revoke needs a reason, then revokes", func(t *testing.T) {
		id := f.issueCert(t)
		tok := csrfFor(t, f, alice, id)
		if code, _, _ := post(t, alice, base+"/ui/certificates/"+id+"/revoke", url.Values{"csrf": {tok}}); code != http.StatusBadRequest {
			t.Errorf("revoke without reason: %d", code)
		}
		code, _, h := post(t, alice, base+"/ui/certificates/"+id+"/revoke", url.Values{"csrf": {tok}, "reason": {"line stopped"}, "back": {"cert"}})
		if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ui/certificates/"+id) || f.certStatus(t, id) != "REVOKED" {
			t.Errorf("revoke: %d %s %s", code, h.Get("Location"), f.certStatus(t, id))
		}
	})
	t.Run("csrf", func(t *testing.T) {
		id := f.issueCert(t)
		for name, form := range map[string]url.Values{"missing": {}, "wrong": {"csrf": {"00ff"}}, "another session's": {"csrf": {csrfForUser(t, f, "olga")}}} {
			if code, _, _ := post(t, alice, base+"/ui/certificates/"+id+"/approve", form); code != http.StatusForbidden {
				t.Errorf("%s csrf token: status %d", name, code)
			}
		}
		req, _ := http.NewRequest("POST", base+"/ui/certificates/"+id+"/approve", strings.NewReader(url.Values{"csrf": {csrfFor(t, f, alice, id)}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := alice.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || f.certStatus(t, id) != "ISSUED" {
			t.Errorf("cross-origin post: %d, cert %s", resp.StatusCode, f.certStatus(t, id))
		}
	})
}

// csrfForUser is the form token of user's session (what every page they
// are served carries).
func csrfForUser(t *testing.T, f *fixture, user string) string {
	t.Helper()
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+f.tokens[user])
	return csrfToken(r)
}

func TestLineScope(t *testing.T) {
	f := getFixture(t)
	olga := f.client(t, "olga") // scoped to another line
	base := f.srv.URL
	for _, p := range []string{"/ui/models/" + f.demo.ModelID, "/ui/trials/" + f.demo.TrialID, "/ui/datasets/" + f.demo.DatasetID, "/ui/lines/line-injection-01"} {
		code, body, _ := get(t, olga, base+p)
		if code != http.StatusForbidden || !strings.Contains(body, "outside the scope") {
			t.Errorf("%s: %d %.200s", p, code, body)
		}
	}
	_, body, _ := get(t, olga, base+"/ui/models")
	if strings.Contains(body, f.demo.ModelID) {
		t.Error("the model list shows a model outside the scope")
	}
	// A missing model is refused to olga as one of another line (she
	// cannot tell them apart: TestSec15_NoExistenceOracle); a user of
	// every line is told it is not there.
	if code, body, _ := get(t, olga, base+"/ui/models/no-such-model"); code != http.StatusForbidden || !strings.Contains(body, "outside the scope") {
		t.Errorf("olga, missing model: %d %.200s", code, body)
	}
	if code, body, _ := get(t, f.client(t, "victor"), base+"/ui/models/no-such-model"); code != http.StatusNotFound || !strings.Contains(body, "AML_NOT_FOUND") {
		t.Errorf("victor, missing model: %d %.200s", code, body)
	}
}

// excerpt is the page's main content for failure messages.
func excerpt(body string) string {
	if i := strings.Index(body, "<main>"); i >= 0 {
		body = body[i:]
	}
	if i := strings.Index(body, "recompute-note"); i >= 0 {
		return body[i:]
	}
	return body
}
