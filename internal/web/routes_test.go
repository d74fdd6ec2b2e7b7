package web

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/twin/contract"
)

// TestActionsAreAPIOps: every UI action names an app op that an API route
// names too (the form and the API call run the same use case), and no
// POST route of the UI is missing from the table.
func TestActionsAreAPIOps(t *testing.T) {
	apiOps := map[string]bool{}
	for _, rt := range api.RouteTable() {
		apiOps[rt.Op] = true
	}
	seen := map[string]bool{}
	for _, a := range actionRoutes(nil) {
		if !strings.HasPrefix(a.Route, "POST /ui/") {
			t.Errorf("%s: an action is a POST under /ui/", a.Route)
		}
		if seen[a.Route] {
			t.Errorf("%s listed twice", a.Route)
		}
		seen[a.Route] = true
		if _, ok := app.Lookup(a.Op); !ok {
			t.Errorf("%s: no app op %q", a.Route, a.Op)
		}
		if !apiOps[a.Op] {
			t.Errorf("%s: op %s has no API route", a.Route, a.Op)
		}
	}
	// The handler registers exactly these POST routes (besides login and
	// logout, which pass the Origin rule without a session).
	srv := httptest.NewServer(New(&service.Deps{}, Options{Verifier: oneToken{}, App: app.New(&service.Deps{}, app.Options{})}))
	defer srv.Close()
	for _, path := range []string{"/ui/models/x/archive", "/ui/datasets/x"} {
		res, err := http.Post(srv.URL+path, "application/x-www-form-urlencoded", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed && res.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s: status %d, want no such action", path, res.StatusCode)
		}
	}
}

// TestActionsCallTheirOpAndNeedCSRF posts to every action route: without
// the session's CSRF token (none, a wrong one, another session's) the
// form is refused (403 AML_FORBIDDEN) and its op never runs; with it, the
// op the table names is what runs (observed with App.OnDone, the hook
// the API's metrics use) — refused for the viewer, so nothing changes.
func TestActionsCallTheirOpAndNeedCSRF(t *testing.T) {
	f := getFixture(t)
	var mu sync.Mutex
	var ran []string
	a := app.New(f.deps, app.Options{})
	a.OnDone(func(op string, _ time.Duration, _ any, _ error) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, op)
	})
	srv := httptest.NewServer(api.New(f.deps, api.Options{UI: New(f.deps, Options{App: a}), App: a, RatePerSec: -1}))
	defer srv.Close()
	took := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := ran
		ran = nil
		return out
	}
	victor := f.client(t, "victor")
	good := csrfForUser(t, f, "victor")
	// A valid form of each action (what the page would post), so that the
	// op is reached and refuses the viewer's role.
	forms := map[string]url.Values{
		"POST /ui/lines/apply": {"file": {"line: line-injection-01\nnodes:\n  - id: hold_pressure\n    unit: bar\n"}},
		"POST /ui/datasets/check": {"line": {"line-injection-01"}, "product": {"p"}, "recipe": {"r"}, "purpose": {"mpc_surrogate"}, "role.hold_pressure": {"control"}, "role.part_weight": {"target"},
			"beat": {"1s"}, "historySteps": {"4"}, "horizonSteps": {"2"}, "valRatio": {"0.2"}, "testRatio": {"0.2"}, "seed": {"1"}, "mode": {"time_blocks"}},
		"POST /ui/jobs":                {"datasetId": {f.demo.DatasetID}, "trainer": {"linear_state_space@1"}},
		"POST /ui/models/{id}/promote": {"to": {"shadow"}},
	}
	forms["POST /ui/datasets"] = forms["POST /ui/datasets/check"]
	// The twin, approver and batch-record forms (a scene file drafted
	// from the demo model, so that scene.put parses it and reaches the op).
	draft, err := a.SceneDraft(t.Context(), auth.Principal{Name: "eve", Role: auth.RoleEngineer}, app.SceneDraftRequest{Model: f.demo.ModelID, ID: "web-csrf-scene"})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := contract.MarshalSceneFile(&draft.File, nil)
	if err != nil {
		t.Fatal(err)
	}
	forms["POST /ui/scenes/draft"] = url.Values{"model": {f.demo.ModelID}}
	forms["POST /ui/scenes/check"] = url.Values{"document": {string(doc)}, "model": {f.demo.ModelID}}
	forms["POST /ui/scenes"] = url.Values{"document": {string(doc)}}
	forms["POST /ui/scenes/{id}/{version}/freeze"] = url.Values{"expectHash": {"00"}}
	forms["POST /ui/channels"] = url.Values{"line": {"line-injection-01"}, "sceneId": {"web-test-none"}, "sceneVersion": {"1.0.0"}}
	forms["POST /ui/snapshots"] = url.Values{"scene": {"web-test-none"}, "model": {f.demo.ModelID}}
	forms["POST /ui/trials"] = url.Values{"model": {f.demo.ModelID}, "snapshot": {f.demo.SnapshotID}, "move.hold_pressure": {"60"}}
	forms["POST /ui/optimize"] = url.Values{"model": {f.demo.ModelID}, "snapshot": {f.demo.SnapshotID}}
	forms["POST /ui/certificates"] = url.Values{"trial": {f.demo.TrialID}}
	forms["POST /ui/batch/recipe"] = url.Values{"line": {"line-injection-01"}, "product": {"p"}, "recipe": {"r"}, "params": {"a: 1\n"}}
	forms["POST /ui/batch/events"] = url.Values{"line": {"line-injection-01"}, "events": {"run,recipe,recipe_version,start,end,confirmed_by\nweb-test-none,r,1,2026-01-01T00:00:00Z,,x\n"}}
	forms["POST /ui/benefit"] = url.Values{"line": {"line-injection-01"}, "runs": {"2"}, "seed": {"7"}, "wear": {"1"}}
	ids := map[string]string{"{id}": "web-test-none"}
	for _, act := range actionRoutes(nil) {
		t.Run(strings.TrimPrefix(act.Route, "POST "), func(t *testing.T) {
			path := strings.TrimPrefix(act.Route, "POST ")
			for k, v := range ids {
				path = strings.ReplaceAll(path, k, v)
			}
			send := func(csrf string) (int, string) {
				form := url.Values{}
				for k, v := range forms[act.Route] {
					form[k] = v
				}
				if csrf != "" {
					form.Set("csrf", csrf)
				}
				if !act.Upload {
					code, body, _ := post(t, victor, srv.URL+path, form)
					return code, body
				}
				var buf bytes.Buffer
				mw := multipart.NewWriter(&buf)
				_ = mw.WriteField("csrf", form.Get("csrf"))
				for _, kv := range [][2]string{{"line", "line-injection-01"}, {"product", "p"}, {"recipe", "r"}, {"run", "web-test-none"}} {
					_ = mw.WriteField(kv[0], kv[1])
				}
				fw, _ := mw.CreateFormFile("file", "x.csv")
				_, _ = fw.Write([]byte("time,a\n2026-01-01T00:00:00Z,1\n"))
				_ = mw.Close()
				req, _ := http.NewRequest("POST", srv.URL+path, &buf)
				req.Header.Set("Content-Type", mw.FormDataContentType())
				res, err := victor.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				var b strings.Builder
				_, _ = bufCopy(&b, res)
				return res.StatusCode, b.String()
			}
			took()
			for name, tok := range map[string]string{"missing": "", "wrong": "00ff", "another session's": csrfForUser(t, f, "eve")} {
				code, body := send(tok)
				if code != http.StatusForbidden || !strings.Contains(body, "AML_FORBIDDEN") || !strings.Contains(body, "CSRF") {
					t.Errorf("%s CSRF token: status %d: %s", name, code, excerpt(body))
				}
				for _, op := range took() {
					if op == act.Op {
						t.Errorf("%s CSRF token: op %s ran", name, op)
					}
				}
			}
			code, body := send(good)
			ops := took()
			ranOp := false
			for _, op := range ops {
				ranOp = ranOp || op == act.Op
			}
			if act.Check {
				// A check stores nothing: the viewer may run it.
				if !ranOp || code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
					t.Errorf("check route: status %d, ops %v: %s", code, ops, excerpt(body))
				}
				return
			}
			if !ranOp {
				t.Errorf("with the token: ops %v ran, want %s (status %d: %s)", ops, act.Op, code, excerpt(body))
			}
			if act.Read { // an op that only reads: the viewer may run it
				if code != http.StatusOK {
					t.Errorf("the viewer's %s: status %d: %s", act.Op, code, excerpt(body))
				}
				return
			}
			if code != http.StatusForbidden || !strings.Contains(body, "viewer") {
				t.Errorf("the viewer's %s: status %d: %s", act.Op, code, excerpt(body))
			}
		})
	}
}

func bufCopy(b *strings.Builder, res *http.Response) (int64, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(res.Body)
	b.Write(buf.Bytes())
	return n, err
}

// TestActionBodyLimits: the API's body limits reach the UI's forms
// (api.NewServer → SetBodyLimits): an upload over the CSV limit and a form
// over the body limit are refused with 413 and nothing is ingested.
func TestActionBodyLimits(t *testing.T) {
	f := getFixture(t)
	srv := httptest.NewServer(api.New(f.deps, api.Options{UI: New(f.deps, Options{}), RatePerSec: -1, MaxCSVBytes: 2048, MaxBodyBytes: 1024}))
	defer srv.Close()
	eve := f.client(t, "eve")
	tok := csrfForUser(t, f, "eve")
	fields := [][2]string{{"csrf", tok}, {"line", "line-web-limit"}, {"product", "p"}, {"recipe", "r"}, {"run", "web-limit-run"}, {"delimiter", ";"}, {"decimalComma", "true"}}
	code, body := postMultipart(t, eve, srv.URL+"/ui/ingest/csv", fields, "file", "big.csv", ownLineCSV(200, 0))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "AML_QUOTA_EXCEEDED") {
		t.Errorf("upload over the CSV limit: status %d: %s", code, excerpt(body))
	}
	if _, err := f.store.GetRun(t.Context(), "web-limit-run"); err == nil {
		t.Error("the refused upload created its run")
	}
	code, body, _ = post(t, eve, srv.URL+"/ui/lines/apply", url.Values{"csrf": {tok}, "file": {strings.Repeat("#", 2000)}})
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("form over the body limit: status %d: %s", code, excerpt(body))
	}
}
