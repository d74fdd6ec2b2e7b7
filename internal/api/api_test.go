package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/go-chi/chi/v5"
)

// TestOpenAPIMatchesRouter walks the chi tree and the OpenAPI document:
// every API route is documented and every documented operation is routed.
func TestOpenAPIMatchesRouter(t *testing.T) {
	e := newEnv(t, Options{})
	routed := map[string]bool{}
	err := chi.Walk(e.s.router, func(method, route string, h http.Handler, mw ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(strings.ReplaceAll(route, "/*/", "/"), "/*")
		if strings.HasPrefix(route, Prefix+"/") {
			routed[method+" "+route] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := e.want(e.do("", "GET", "/api/v1/openapi.json", nil), 200, "")
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	r.json(t, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	var missing, extra []string
	for k := range routed {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !routed[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("routed but not documented: %v\ndocumented but not routed: %v", missing, extra)
	}
	if len(routed) < 60 {
		t.Fatalf("only %d routes", len(routed))
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t, Options{})
	e.want(e.do("", "GET", "/api/v1/runs", nil), 401, auth.CodeUnauthenticated)
	e.tok["bogus"] = "aml_not-a-token"
	e.want(e.do("bogus", "GET", "/api/v1/runs", nil), 401, auth.CodeUnauthenticated)
	e.want(e.do("", "GET", "/metrics", nil), 401, auth.CodeUnauthenticated)
	e.want(e.do("", "GET", "/api/v1/health", nil), 200, "")
	// A revoked token stops working at once.
	var tk struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	e.want(e.do("admin", "POST", "/api/v1/tokens", map[string]any{"name": "tmp", "role": "viewer"}), 201, "").json(t, &tk)
	e.tok["tmp"] = tk.Token
	e.want(e.do("tmp", "GET", "/api/v1/lines", nil), 200, "")
	e.want(e.do("admin", "DELETE", "/api/v1/tokens/"+tk.ID, nil), 200, "")
	e.want(e.do("tmp", "GET", "/api/v1/lines", nil), 401, auth.CodeUnauthenticated)
	e.want(e.do("admin", "DELETE", "/api/v1/tokens/"+tk.ID, nil), 409, core.CodeConflict)
	var tl app.List[auth.TokenInfo]
	e.want(e.do("admin", "GET", "/api/v1/tokens", nil), 200, "").json(t, &tl)
	if tl.Count != 7 {
		t.Fatalf("tokens: %d", tl.Count)
	}
	e.want(e.do("engineer", "GET", "/api/v1/tokens", nil), 403, core.CodeForbidden)
}

// TestDevMode: tokenless loopback requests run as the dev admin only with
// Dev; a token is still verified.
func TestDevMode(t *testing.T) {
	e := newEnv(t, Options{Dev: true})
	var info struct {
		Principal auth.Principal `json:"principal"`
	}
	e.want(e.do("", "GET", "/api/v1/info", nil), 200, "").json(t, &info)
	if info.Principal.Name != "dev" || info.Principal.Role != auth.RoleAdmin {
		t.Fatalf("dev principal %+v", info.Principal)
	}
	e.want(e.do("viewer", "GET", "/api/v1/info", nil), 200, "").json(t, &info)
	if info.Principal.Name != "vic" {
		t.Fatalf("token ignored in dev mode: %+v", info.Principal)
	}
}

// TestRoles checks each role's refused actions before any lookup (the
// role check comes first, so ids need not exist) and that allowed roles
// get past it (to the 404 of the missing resource).
func TestRoles(t *testing.T) {
	e := newEnv(t, Options{})
	type c struct {
		method, path string
		body         any
	}
	approve := c{"POST", "/api/v1/certificates/cert-x/approve", nil}
	revoke := c{"POST", "/api/v1/certificates/cert-x/revoke", map[string]any{"reason": "r"}}
	execute := c{"POST", "/api/v1/certificates/cert-x/execute", map[string]any{}}
	promoteProd := c{"POST", "/api/v1/models/m-x/promote", map[string]any{"to": "production"}}
	promoteShadow := c{"POST", "/api/v1/models/m-x/promote", map[string]any{"to": "shadow"}}
	freeze := c{"POST", "/api/v1/scenes/s-x/freeze", map[string]any{"version": "1.0.0", "expectHash": "00"}}
	channel := c{"PUT", "/api/v1/channels/" + simLine, map[string]any{"profile": "hybrid_twin", "controlPolicy": "hitl_governed"}}
	trial := c{"POST", "/api/v1/trials", map[string]any{"model": "m-x", "snapshot": "s-x", "set": map[string]float64{"hold_pressure": 1}}}
	issue := c{"POST", "/api/v1/certificates", map[string]any{"trial": "t-x"}}
	job := c{"POST", "/api/v1/jobs", map[string]any{"datasetId": "d-x", "trainer": "test_mean@1"}}
	ingest := c{"POST", "/api/v1/ingest/samples", map[string]any{"line": simLine, "samples": []any{}}}
	retention := c{"POST", "/api/v1/retention", map[string]any{"dryRun": true}}
	cases := []struct {
		role string
		c    c
		want int // 403 refused by role; otherwise the status past the role check
	}{
		{"viewer", ingest, 403}, {"viewer", job, 403}, {"viewer", trial, 403}, {"viewer", issue, 403}, {"viewer", promoteShadow, 403},
		{"agent", approve, 403}, {"agent", revoke, 403}, {"agent", promoteProd, 403}, {"agent", promoteShadow, 403}, {"agent", freeze, 403},
		{"agent", channel, 403}, {"agent", execute, 403}, {"agent", retention, 403},
		{"agent", trial, 404}, {"agent", issue, 404}, {"agent", job, 404}, {"agent", ingest, 400},
		{"engineer", approve, 403}, {"engineer", promoteProd, 403}, {"engineer", freeze, 403}, {"engineer", execute, 403}, {"engineer", channel, 403},
		{"engineer", promoteShadow, 404}, {"engineer", trial, 404}, {"engineer", issue, 404},
		{"approver", approve, 404}, {"approver", revoke, 404}, {"approver", execute, 404}, {"approver", promoteProd, 404}, {"approver", freeze, 404},
		{"approver", trial, 403}, {"approver", ingest, 403}, {"approver", channel, 200},
		{"admin", approve, 404}, {"admin", trial, 404}, {"admin", retention, 200},
	}
	for _, k := range cases {
		r := e.do(k.role, k.c.method, k.c.path, k.c.body)
		if r.status != k.want {
			t.Errorf("%s %s %s: %d, want %d: %s", k.role, k.c.method, k.c.path, r.status, k.want, r.body)
			continue
		}
		if k.want == 403 {
			if b := r.errBody(t); b.Code != core.CodeForbidden || b.Field != "role" {
				t.Errorf("%s %s: body %s", k.role, k.c.path, r.body)
			}
		}
	}
}

func TestLineScope(t *testing.T) {
	e := newEnv(t, Options{})
	var runs app.List[core.Run]
	e.want(e.do("otherline", "GET", "/api/v1/runs", nil), 200, "").json(t, &runs)
	if runs.Count != 0 {
		t.Fatalf("scoped caller sees %d runs of another line", runs.Count)
	}
	e.want(e.do("engineer", "GET", "/api/v1/runs", nil), 200, "").json(t, &runs)
	if runs.Count != 5 {
		t.Fatalf("runs %d", runs.Count)
	}
	for _, r := range []resp{
		e.do("otherline", "GET", "/api/v1/runs/"+e.runs[0], nil),
		e.do("otherline", "GET", "/api/v1/runs?line="+simLine, nil),
		e.do("otherline", "GET", "/api/v1/ts?node=part_weight&limit=5", nil),
		e.do("otherline", "POST", "/api/v1/ingest/samples", map[string]any{"line": simLine, "samples": []any{map[string]any{"node": "x", "ts": 1, "value": 1}}}),
		e.do("otherline", "POST", "/api/v1/scenes", map[string]any{"preset": "default-injection"}),
		e.do("otherline", "GET", "/api/v1/channels/"+simLine, nil),
		e.do("otherline", "POST", "/api/v1/datasets", map[string]any{"spec": json.RawMessage(spec(t))}),
	} {
		if r.status != 403 {
			t.Fatalf("out-of-scope request: %d %s", r.status, r.body)
		}
		if b := r.errBody(t); b.Code != core.CodeForbidden || b.Field != "lineId" {
			t.Fatalf("body %s", r.body)
		}
	}
	// Its own line works, and a node of another line cannot be written
	// by labelling it with the caller's line.
	e.want(e.do("otherline", "POST", "/api/v1/ingest/samples", map[string]any{"line": "line-other", "product": "p", "recipe": "r", "run": "run-o", "samples": []any{map[string]any{"node": "o1", "ts": 1, "value": 1}}}), 200, "")
	e.want(e.do("otherline", "POST", "/api/v1/ingest/samples", map[string]any{"line": "line-other", "samples": []any{map[string]any{"node": "part_weight", "ts": 1, "value": 1}}}), 403, core.CodeForbidden)
	e.want(e.do("engineer", "POST", "/api/v1/ingest/samples", map[string]any{"line": "line-other", "samples": []any{map[string]any{"node": "part_weight", "ts": 1, "value": 1}}}), 409, core.CodeConflict)
	var lines app.List[core.Line]
	e.want(e.do("otherline", "GET", "/api/v1/lines", nil), 200, "").json(t, &lines)
	if lines.Count != 1 || lines.Items[0].ID != "line-other" {
		t.Fatalf("lines %+v", lines)
	}
}

func TestErrorsAndLimits(t *testing.T) {
	e := newEnv(t, Options{MaxBodyBytes: 4096, MaxCSVBytes: 2048, MaxBatchSamples: 10})
	e.want(e.do("engineer", "POST", "/api/v1/jobs", []byte("{not json")), 400, core.CodeInvalidArgument)
	b := e.want(e.do("engineer", "POST", "/api/v1/jobs", map[string]any{"datasetId": "x", "trainer": "t", "bogus": 1}), 400, core.CodeInvalidArgument).errBody(t)
	if b.Field != "bogus" {
		t.Fatalf("unknown field: %+v", b)
	}
	e.want(e.do("engineer", "POST", "/api/v1/jobs", map[string]any{"trainer": "t"}), 400, core.CodeInvalidArgument)
	e.want(e.do("viewer", "GET", "/api/v1/nope", nil), 404, core.CodeNotFound)
	e.want(e.do("viewer", "GET", "/api/v1/runs/no-such-run", nil), 404, core.CodeNotFound)
	e.want(e.do("viewer", "GET", "/api/v1/ts?node=part_weight&limit=-1", nil), 400, core.CodeInvalidArgument)
	e.want(e.do("viewer", "DELETE", "/api/v1/runs", nil), 405, "")
	// 413: JSON body, batch size, CSV upload.
	big := `{"line":"` + simLine + `","samples":[` + strings.Repeat(`{"node":"a","ts":1,"value":1},`, 200) + `{"node":"a","ts":1,"value":1}]}`
	e.want(e.do("engineer", "POST", "/api/v1/ingest/samples", []byte(big)), 413, core.CodeQuotaExceeded)
	var many []any
	for i := 0; i < 11; i++ {
		many = append(many, map[string]any{"node": "a", "ts": i, "value": 1})
	}
	e.want(e.do("engineer", "POST", "/api/v1/ingest/samples", map[string]any{"line": simLine, "samples": many}), 413, core.CodeQuotaExceeded)
	var csvb strings.Builder
	csvb.WriteString("time_ms,n1\n")
	for i := range 400 {
		fmt.Fprintf(&csvb, "%d,1\n", 1000+i)
	}
	csv := csvb.String()
	e.want(e.do("engineer", "POST", "/api/v1/ingest/csv?line=L9&product=P&recipe=R&run=r1", strings.NewReader(csv)), 413, core.CodeQuotaExceeded)
	// Nothing of the refused upload was written.
	e.want(e.do("engineer", "GET", "/api/v1/runs/r1", nil), 404, core.CodeNotFound)
	// A field in the query string of a body route is refused, never
	// dropped (a limit must not be lost).
	if b := e.want(e.do("engineer", "POST", "/api/v1/datasets?maxWindows=1", map[string]any{"spec": json.RawMessage(spec(t))}), 400, core.CodeInvalidArgument).errBody(t); b.Field != "maxWindows" {
		t.Fatalf("query on a body route: %+v", b)
	}
	// A spec's unknown field is the spec parser's error, with its field.
	if b := e.want(e.do("engineer", "POST", "/api/v1/datasets", []byte(`{"spec":{"lineId":"`+simLine+`","bogus":1}}`)), 422, core.CodeSpecInvalid).errBody(t); b.Field != "bogus" {
		t.Fatalf("unknown spec field: %+v", b)
	}
	// Empty query values are parameters not given.
	e.want(e.do("viewer", "GET", "/api/v1/ts?node=part_weight&from=&to=&limit=&bucket=", nil), 200, "")
	// 422: a spec the dataset parser refuses.
	e.want(e.do("engineer", "POST", "/api/v1/datasets", []byte(`{"spec":{"lineId":"`+simLine+`"}}`)), 422, core.CodeSpecInvalid)
	// A non-finite value (JSON cannot carry NaN; the decoder refuses).
	e.want(e.do("engineer", "POST", "/api/v1/ingest/samples", []byte(`{"line":"L","samples":[{"node":"a","ts":1,"value":NaN}]}`)), 400, core.CodeInvalidArgument)
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, Options{RatePerSec: 0.001, RateBurst: 3})
	for i := 0; i < 3; i++ {
		e.want(e.do("viewer", "GET", "/api/v1/lines", nil), 200, "")
	}
	r := e.want(e.do("viewer", "GET", "/api/v1/lines", nil), 429, CodeRateLimited)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	// Per token: another caller is not limited by the first.
	e.want(e.do("engineer", "GET", "/api/v1/lines", nil), 200, "")
}

// TestSlowConsumerDropped: a stream whose client does not read falls
// behind; publishers never block, and the stream ends with an overflow
// event instead of delivering a gapped sequence.
func TestSlowConsumerDropped(t *testing.T) {
	e := newEnv(t, Options{})
	w := &blockingWriter{ResponseRecorder: httptest.NewRecorder(), entered: make(chan struct{}), release: make(chan struct{})}
	req := httptest.NewRequest("GET", "/api/v1/events", nil)
	done := make(chan struct{})
	go func() {
		e.s.stream(w, req, auth.Principal{Name: "x", Role: auth.RoleViewer}, 4, nil)
		close(done)
	}()
	<-w.entered // subscribed, blocked writing the first line
	published := make(chan struct{})
	go func() {
		for i := 0; i < 100; i++ {
			e.d.Bus.Publish(events.Event{Kind: events.JobProgress, Line: simLine, ID: "j"})
		}
		close(published)
	}()
	select {
	case <-published:
	case <-time.After(5 * time.Second):
		t.Fatal("a slow stream blocked the publisher")
	}
	close(w.release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("slow stream not dropped")
	}
	if !strings.Contains(w.Body.String(), "event: overflow") || !strings.Contains(w.Body.String(), `"dropped":96`) {
		t.Fatalf("stream body:\n%s", w.Body.String())
	}
}

type blockingWriter struct {
	*httptest.ResponseRecorder
	once             sync.Once
	entered, release chan struct{}
	mu               sync.Mutex
}

func (w *blockingWriter) Write(b []byte) (int, error) {
	w.once.Do(func() { close(w.entered); <-w.release })
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ResponseRecorder.Write(b)
}

func (w *blockingWriter) Flush() {}

var _ = fmt.Sprint

func (w *blockingWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }
