package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/cert"
)

// The fixture is a real data directory made by the real binary: `aml demo`
// (simulated line, dataset, hybrid twin model, gate, trial, certificate;
// ~25 s) plus API tokens for each role from `aml token create`. It is
// built once per test binary and shared by the handler tests and the
// browser tests. The server is the API (internal/api) with web.Handler mounted, the way
// `aml serve` builds it: auth.OptionalMiddleware with the store's token
// verifier in front of the pages, /api/v1/events for live progress.
type fixture struct {
	dir    string
	bin    string
	demo   demoOut
	tokens map[string]string // user name → token
	store  *sqlite.Store
	deps   *service.Deps
	srv    *httptest.Server
	queue  *jobs.Queue
	app    *app.App
}

type demoOut struct {
	ModelID       string `json:"modelId"`
	TrialID       string `json:"trialId"`
	CertificateID string `json:"certificateId"`
	DatasetID     string `json:"datasetId"`
	JobID         string `json:"jobId"`
	SnapshotID    string `json:"snapshotId"`
}

// users: name → role and line scope ("" = every line).
var users = []struct{ name, role, lines string }{
	{"alice", "approver", ""},
	{"eve", "engineer", ""},
	{"bot", "agent", ""},
	{"victor", "viewer", ""},
	{"olga", "approver", "line-elsewhere"},
}

var (
	fxOnce sync.Once
	fx     *fixture
	fxErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fx != nil {
		fx.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := fx.queue.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "stop the fixture's job queue:", err)
		}
		cancel()
		if err := fx.store.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close the fixture store:", err)
			code = 1
		}
		if err := os.RemoveAll(fx.dir); err != nil {
			fmt.Fprintln(os.Stderr, "remove the fixture directory:", err)
		}
	}
	os.Exit(code)
}

func getFixture(t *testing.T) *fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("the fixture trains the hybrid twin end to end (aml demo); runs without -short")
	}
	fxOnce.Do(func() { fx, fxErr = buildFixture() })
	if fxErr != nil {
		t.Fatalf("fixture: %v", fxErr)
	}
	return fx
}

func buildFixture() (*fixture, error) {
	dir, err := os.MkdirTemp("", "aml-web-test-")
	if err != nil {
		return nil, err
	}
	f := &fixture{dir: dir, bin: filepath.Join(dir, "aml"), tokens: map[string]string{}}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	build := exec.Command("go", "build", "-o", f.bin, "./cmd/aml")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/aml: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	t0 := time.Now()
	if err := f.amlJSON(&f.demo, "demo", "--data", data); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "web fixture: aml demo took %.1f s (model %s, trial %s)\n", time.Since(t0).Seconds(), f.demo.ModelID, f.demo.TrialID)
	if f.demo.ModelID == "" || f.demo.TrialID == "" {
		return nil, fmt.Errorf("aml demo made no model or trial: %+v", f.demo)
	}
	for _, u := range users {
		args := []string{"token", "create", "--data", data, "--role", u.role, "--name", u.name, "--as", "web-test"}
		if u.lines != "" {
			args = append(args, "--lines", u.lines)
		}
		var tok struct {
			Token string `json:"token"`
		}
		if err := f.amlJSON(&tok, args...); err != nil {
			return nil, err
		}
		f.tokens[u.name] = tok.Token
	}
	st, err := sqlite.Open(data)
	if err != nil {
		return nil, err
	}
	key, err := cert.LoadOrCreateKey(data)
	if err != nil {
		return nil, err
	}
	f.store = st
	f.deps = &service.Deps{Store: st, DataDir: data, Bus: events.New(), Key: key}
	// A job system with one worker, as aml serve runs it: the job form's
	// jobs train in this process and their progress reaches the pages.
	f.deps.Runner = jobs.NewRunner(st, jobs.Options{DataDir: data, Bus: f.deps.Bus, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats())})
	q, err := jobs.NewQueueFor(context.Background(), st, f.deps.Runner, jobs.QueueOptions{Work: true, MaxConcurrent: 1})
	if err != nil {
		return nil, err
	}
	if err := q.Start(context.Background()); err != nil {
		return nil, err
	}
	f.deps.Queue, f.queue = q, q
	// The served app: the API with the UI mounted sharing one App, as aml
	// serve builds it; its benefit studies are shortened (shortStudy).
	f.app = app.New(f.deps, app.Options{Version: api.Version, BenefitStudy: shortStudy})
	f.srv = httptest.NewServer(api.New(f.deps, api.Options{UI: New(f.deps, Options{App: f.app}), App: f.app, RatePerSec: -1}))
	return f, nil
}

// amlJSON runs the built binary with --json and decodes its output.
func (f *fixture) amlJSON(v any, args ...string) error {
	cmd := exec.Command(f.bin, append(args, "--json")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("aml %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("aml %s: decode: %v\n%.500s", strings.Join(args, " "), err, out)
	}
	return nil
}

// issueCert issues a fresh certificate for the demo trial with the CLI
// (requested by eve, so alice may approve it).
func (f *fixture) issueCert(t *testing.T) string {
	t.Helper()
	var rec struct {
		Certificate struct {
			RecommendationID string `json:"recommendationId"`
			Status           string `json:"status"`
		} `json:"certificate"`
	}
	if err := f.amlJSON(&rec, "cert", "issue", "--data", f.deps.DataDir, "--trial", f.demo.TrialID, "--as", "eve"); err != nil {
		t.Fatal(err)
	}
	if rec.Certificate.Status != "ISSUED" || rec.Certificate.RecommendationID == "" {
		t.Fatalf("issued certificate: %+v", rec)
	}
	return rec.Certificate.RecommendationID
}

func (f *fixture) certStatus(t *testing.T, id string) string {
	t.Helper()
	r, err := f.store.LoadCertificate(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return string(r.Cert.Status)
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the module")
	}
	return filepath.Dir(mod), nil
}

// client is an HTTP client that keeps cookies and does not follow
// redirects (tests look at them).
func (f *fixture) client(t *testing.T, user string) *http.Client {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 60 * time.Second}
	if user != "" {
		c.Transport = bearer{f.tokens[user]}
	}
	return c
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}
