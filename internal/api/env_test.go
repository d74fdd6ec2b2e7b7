package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
)

const simLine = sim.DefaultLineID

// env is a real server over HTTP: a SQLite store with simulated runs, a
// job queue with one worker, and a token per role.
type env struct {
	t    *testing.T
	srv  *httptest.Server
	s    *Server
	d    *service.Deps
	dir  string
	tok  map[string]string
	runs []string
}

func newEnv(t *testing.T, o Options) *env {
	t.Helper()
	st, dir := testfix.SQLite(t)
	ctx := context.Background()
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed, cfg.RunDuration = 5, 4, 8*time.Minute
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	bus := events.New()
	tr := jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats())
	tr.Add(jobs.TestMeanTrainer{})
	runner := jobs.NewRunner(st, jobs.Options{DataDir: dir, Trainers: tr, Bus: bus})
	q, err := jobs.NewQueue(ctx, st.DB(), runner, jobs.QueueOptions{Work: true, MaxConcurrent: 1, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := q.Stop(sctx); err != nil {
			t.Errorf("stop the queue: %v", err)
		}
	})
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := &service.Deps{Store: st, DataDir: dir, Runner: runner, Queue: q, Bus: bus, Key: key}
	s := NewServer(d, o)
	srv := httptest.NewServer(s)
	t.Cleanup(func() { s.CloseStreams(); srv.Close() })
	e := &env{t: t, srv: srv, s: s, d: d, dir: dir, tok: map[string]string{}}
	for _, r := range out.Runs {
		e.runs = append(e.runs, r.Run.ID)
	}
	tk := auth.NewTokens(st.SQL())
	for name, nt := range map[string]auth.NewToken{
		"viewer":    {Name: "vic", Role: auth.RoleViewer},
		"engineer":  {Name: "erin", Role: auth.RoleEngineer},
		"approver":  {Name: "ada", Role: auth.RoleApprover},
		"admin":     {Name: "root", Role: auth.RoleAdmin},
		"agent":     {Name: "bot", Role: auth.RoleAgent},
		"otherline": {Name: "olga", Role: auth.RoleEngineer, Lines: []string{"line-other"}},
	} {
		_, secret, err := tk.Create(ctx, "test", nt)
		if err != nil {
			t.Fatal(err)
		}
		e.tok[name] = secret
	}
	return e
}

// resp is a decoded response.
type resp struct {
	status int
	body   []byte
	header http.Header
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response is not JSON (%d): %v\n%s", r.status, err, r.body)
	}
}

func (r resp) errBody(t *testing.T) auth.ErrorBody {
	t.Helper()
	var b auth.ErrorBody
	r.json(t, &b)
	if b.Code == "" || b.Message == "" {
		t.Fatalf("error body without code or message: %s", r.body)
	}
	return b
}

// do sends a request as role ("" = no token); body is JSON-encoded unless
// it is []byte or an io.Reader.
func (e *env) do(role, method, path string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	ct := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd, ct = b, "text/csv"
	default:
		js, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", ct)
	}
	if role != "" {
		req.Header.Set("Authorization", "Bearer "+e.tok[role])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, body: b, header: res.Header}
}

// want asserts a status (and for errors an error body with code).
func (e *env) want(r resp, status int, code string) resp {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if code != "" {
		if b := r.errBody(e.t); b.Code != code {
			e.t.Fatalf("code %s, want %s: %s", b.Code, code, r.body)
		}
	}
	return r
}

// spec is the example injection spec shortened for tests.
func spec(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../examples/specs/injection.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["stride"] = 5
	m["split"].(map[string]any)["valRatio"] = 0.2
	m["split"].(map[string]any)["testRatio"] = 0.2
	out, _ := json.Marshal(m)
	return out
}

// sseClient reads events from /api/v1/events as role.
type sseClient struct {
	events chan sseEvent
	cancel func()
}

type sseEvent struct {
	kind string
	data map[string]any
}

func (e *env) sse(role, query string) *sseClient {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/events"+query, nil)
	req.Header.Set("Authorization", "Bearer "+e.tok[role])
	res, err := e.srv.Client().Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		e.t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	c := &sseClient{events: make(chan sseEvent, 1024), cancel: func() { cancel(); res.Body.Close() }}
	connected := make(chan struct{})
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(res.Body)
		var kind string
		first := true
		for sc.Scan() {
			line := sc.Text()
			if first {
				close(connected)
				first = false
			}
			switch {
			case strings.HasPrefix(line, "event: "):
				kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				var m map[string]any
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
					e.t.Errorf("event data %q: %v", line, err) // Error: this is not the test's goroutine
					continue
				}
				c.events <- sseEvent{kind: kind, data: m}
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		e.t.Fatal("event stream did not open")
	}
	e.t.Cleanup(c.cancel)
	return c
}
