package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	amlmcp "github.com/aml-project/aml/internal/mcp"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/cert"
)

// testServer is the real API (api.New) over real HTTP on a real SQLite
// data dir, with a job worker, and one token per role.
type testServer struct {
	url string
	tok map[string]string // role → token
	srv *api.Server
	st  *sqlite.Store
}

func startServer(t *testing.T, dir string, o api.Options) *testServer {
	t.Helper()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bus := events.New()
	tr := service.NativeTrainers(testTrainers())
	tr.Add(jobs.TestMeanTrainer{})
	runner := jobs.NewRunner(st, jobs.Options{DataDir: dir, Trainers: tr, Bus: bus})
	q, err := jobs.NewQueue(ctx, st.DB(), runner, jobs.QueueOptions{Work: true, MaxConcurrent: 1, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o.RatePerSec == 0 {
		o.RatePerSec = -1
	}
	deps := &service.Deps{Store: st, DataDir: dir, Runner: runner, Queue: q, Bus: bus, Key: key}
	if o.App == nil {
		o.App = amlapp.New(deps, amlapp.Options{Now: o.Now})
	}
	if o.MCP == nil {
		o.MCP = amlmcp.HTTPHandler(o.App) // /mcp, as aml serve mounts it
	}
	s := api.NewServer(deps, o)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		s.CloseStreams()
		hs.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := q.Stop(sctx); err != nil {
			t.Errorf("stop the queue: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	ts := &testServer{url: hs.URL, tok: map[string]string{}, srv: s, st: st}
	tk := auth.NewTokens(st.SQL())
	for role, nt := range map[string]auth.NewToken{
		"viewer":   {Name: "vic", Role: auth.RoleViewer},
		"engineer": {Name: "erin", Role: auth.RoleEngineer},
		"approver": {Name: "ada", Role: auth.RoleApprover},
		"admin":    {Name: "root", Role: auth.RoleAdmin},
		"agent":    {Name: "bot", Role: auth.RoleAgent},
	} {
		_, secret, err := tk.Create(ctx, "test", nt)
		if err != nil {
			t.Fatal(err)
		}
		ts.tok[role] = secret
	}
	return ts
}

// as runs the CLI against the server with role's token.
func (s *testServer) as(t *testing.T, role string, args ...string) (string, string, int) {
	t.Helper()
	return aml(t, append(args, "--server", s.url, "--token", s.tok[role])...)
}

// normalize decodes a --json document and blanks what differs between two
// otherwise identical histories: ids (random or time-based), timestamps,
// actors (the local CLI records "cli", the server the token's owner),
// durations, file paths that embed ids, worker names, and the content hash
// of documents whose content includes their author and time (a scene).
func normalize(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return blank(v, "")
}

func volatileKey(k string) bool {
	switch k {
	case "id", "seconds", "path", "file", "worker", "hash", "trainingSec", "at", "ageMs":
		return true
	}
	for _, suf := range []string{"Id", "ID", "At", "By", "Path", "Ids", "IDs"} {
		if strings.HasSuffix(k, suf) {
			return true
		}
	}
	return false
}

func blank(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if volatileKey(k) {
				x[k] = "*"
			} else {
				x[k] = blank(e, k)
			}
		}
	case []any:
		for i := range x {
			x[i] = blank(x[i], key)
		}
	}
	return v
}

// sameJSON asserts two --json documents are equal modulo normalize.
func sameJSON(t *testing.T, what, local, remote string) {
	t.Helper()
	l, r := normalize(t, local), normalize(t, remote)
	if !reflect.DeepEqual(l, r) {
		lb, _ := json.MarshalIndent(l, "", " ")
		rb, _ := json.MarshalIndent(r, "", " ")
		t.Fatalf("%s: local and --server JSON differ:\n%s", what, firstDiff(string(lb), string(rb)))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			lo := max(0, i-3)
			return fmt.Sprintf("line %d\nlocal:  %s\nremote: %s", i, strings.Join(al[lo:min(len(al), i+3)], "\n        "), strings.Join(bl[lo:min(len(bl), i+3)], "\n        "))
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(al), len(bl))
}

// simDir is a data dir with the small simulated line and the shortened
// injection spec at dir/spec.json.
func simDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if _, errs, code := aml(t, "sim", "injection", "--runs", "5", "--seed", "4", "--duration", "8m", "--data", d); code != 0 {
		t.Fatal(errs)
	}
	b, _ := os.ReadFile("../../examples/specs/injection.json")
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	spec["stride"] = 5
	spec["split"].(map[string]any)["valRatio"] = 0.2
	spec["split"].(map[string]any)["testRatio"] = 0.2
	sb, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(d, "spec.json"), sb, 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRemoteParity runs the same history of commands once locally on one
// data dir and once with --server against a server on an identical data
// dir, and compares every --json document (modulo ids, times, actors).
func TestRemoteParity(t *testing.T) {
	t.Setenv("AML_TEST_TRAINERS", "1")
	local, remoteDir := simDir(t), simDir(t)
	srv := startServer(t, remoteDir, api.Options{})
	csvDir := t.TempDir()
	csvFile := filepath.Join(csvDir, "extra-run.csv")
	if err := os.WriteFile(csvFile, []byte("time_ms,aux_a,aux_b\n1000,1,2\n2000,3,4\n3000,5,6\n4000,7,8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := func(d string) string { return filepath.Join(d, "spec.json") }

	// ids learnt from each mode's previous answers
	ids := map[bool]map[string]string{false: {}, true: {}}
	both := func(name, role string, args func(remote bool) []string) (string, string) {
		t.Helper()
		lo, le, lc := aml(t, append(args(false), "--data", local, "--json")...)
		ro, re, rc := srv.as(t, role, append(args(true), "--json")...)
		if lc != 0 || rc != 0 {
			t.Fatalf("%s: local exit %d (%s), remote exit %d (%s)", name, lc, le, rc, re)
		}
		// Each side's ids (learnt below) are named alike where a value
		// embeds them (a retry's change note, a prediction's model).
		sub := func(r bool, s string) string {
			for k, id := range ids[r] {
				if id != "" {
					s = strings.ReplaceAll(s, id, "<"+k+">")
				}
			}
			return s
		}
		sameJSON(t, name, sub(false, lo), sub(true, ro))
		return lo, ro
	}
	fixed := func(a ...string) func(bool) []string { return func(bool) []string { return a } }

	both("ingest csv", "engineer", fixed("ingest", "csv", csvFile, "--line", "injection-line-1", "--product", "P", "--recipe", "R", "--unit", "aux_a=bar"))
	both("runs list", "viewer", fixed("runs", "list"))
	both("runs show", "viewer", fixed("runs", "show", "extra-run"))
	both("nodes list", "viewer", fixed("nodes", "list"))
	both("nodes set", "engineer", fixed("nodes", "set", "aux_a", "--line", "injection-line-1", "--unit", "kPa", "--min", "0", "--max", "10", "--meaning", "auxiliary pressure"))
	lineFile := filepath.Join(csvDir, "line.yaml")
	if err := os.WriteFile(lineFile, []byte("line: injection-line-1\nnodes:\n  - id: aux_a\n    max: 12\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	both("line apply", "engineer", fixed("line", "apply", lineFile))
	mapFile := filepath.Join(csvDir, "topics.json") // converted here: the server gets the line file
	if err := os.WriteFile(mapFile, []byte(`{"line":"injection-line-1","product":"P","recipe":"R","topics":[{"topic":"l/b","node":"aux_b","unit":"bar","kind":"daq","min":0,"max":5}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	both("line apply --from-map", "engineer", fixed("line", "apply", "--from-map", mapFile))
	both("line overview", "viewer", fixed("line", "overview", "--line", "injection-line-1", "--stale-after", "87600h"))
	recipeFile := filepath.Join(csvDir, "recipe.yaml")
	eventsFile := filepath.Join(csvDir, "events.csv")
	if err := os.WriteFile(recipeFile, []byte("setpoint: 0.5\ngain: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(eventsFile, []byte("run,recipe,recipe_version,start,end,confirmed_by\nextra-run,R,1,2026-01-05T06:00:00Z,,Kim\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	both("recipe put", "engineer", fixed("recipe", "put", recipeFile, "--line", "injection-line-1", "--product", "P", "--recipe", "R"))
	both("runs events", "engineer", fixed("runs", "events", eventsFile, "--line", "injection-line-1"))
	both("gate profiles", "viewer", fixed("gate", "profiles"))
	both("ts query", "viewer", fixed("ts", "query", "--node", "part_weight"))
	both("ts query --limit", "viewer", fixed("ts", "query", "--node", "part_weight", "--limit", "7"))
	both("ts query --bucket", "viewer", fixed("ts", "query", "--node", "part_weight", "--bucket", "1m"))

	lo, ro := both("dataset build", "engineer", func(remote bool) []string {
		d := local
		if remote {
			d = remoteDir
		}
		return []string{"dataset", "build", "--spec", spec(d)}
	})
	for r, out := range map[bool]string{false: lo, true: ro} {
		var b struct{ Dataset struct{ ID, SHA256 string } }
		mustJSON(t, out, &b)
		ids[r]["ds"] = b.Dataset.ID
		ids[r]["sha"] = b.Dataset.SHA256
	}
	if ids[false]["sha"] != ids[true]["sha"] {
		t.Fatalf("the same spec on the same data built different datasets: %s vs %s", ids[false]["sha"], ids[true]["sha"])
	}
	with := func(f func(map[string]string) []string) func(bool) []string {
		return func(r bool) []string { return f(ids[r]) }
	}
	both("dataset list", "viewer", fixed("dataset", "list"))
	both("dataset show", "viewer", with(func(m map[string]string) []string { return []string{"dataset", "show", m["ds"]} }))
	both("dataset verify", "viewer", with(func(m map[string]string) []string { return []string{"dataset", "verify", m["ds"]} }))
	both("dataset report", "viewer", with(func(m map[string]string) []string { return []string{"dataset", "report", m["ds"]} }))

	lo, ro = both("job submit --wait", "engineer", with(func(m map[string]string) []string {
		return []string{"job", "submit", "--dataset", m["ds"], "--trainer", "test_mean@1", "--params", `{"steps":3,"stepMs":10}`, "--wait"}
	}))
	for r, out := range map[bool]string{false: lo, true: ro} {
		var j struct{ ID, Status, ModelID string }
		mustJSON(t, out, &j)
		if j.Status != "done" || j.ModelID == "" {
			t.Fatalf("job (remote %v): %+v", r, j)
		}
		ids[r]["job"], ids[r]["model"] = j.ID, j.ModelID
	}
	both("job status", "viewer", with(func(m map[string]string) []string { return []string{"job", "status", m["job"]} }))
	both("job list", "viewer", fixed("job", "list"))
	both("job list --status", "viewer", fixed("job", "list", "--status", "done", "--limit", "5"))
	both("model list", "viewer", fixed("model", "list"))
	both("model list --stage", "viewer", fixed("model", "list", "--stage", "candidate"))
	both("model compare", "viewer", fixed("model", "compare", "--limit", "5"))
	both("model show", "viewer", with(func(m map[string]string) []string { return []string{"model", "show", m["model"]} }))
	both("model replay", "viewer", with(func(m map[string]string) []string { return []string{"model", "replay", m["model"]} }))
	var runs []struct {
		ID      string `json:"id"`
		Started int64  `json:"startedAtMs"`
	}
	out, _, _ := aml(t, "runs", "list", "--data", local, "--json")
	mustJSON(t, out, &runs)
	both("model predict", "viewer", with(func(m map[string]string) []string {
		return []string{"model", "predict", m["model"], "--run", runs[1].ID, "--from", fmt.Sprint(runs[1].Started + 4*60_000), "--steps", "2"}
	}))
	both("connect status", "viewer", fixed("connect", "status"))
	both("audit list --subject", "viewer", fixed("audit", "list", "--subject", "nothing-here"))

	// Reads of the server's own data dir, opened locally beside the
	// running server: the documents are byte for byte the same.
	same := func(name, role string, args ...string) {
		t.Helper()
		lo, le, lc := aml(t, append(args, "--data", remoteDir, "--json")...)
		ro, re, rc := srv.as(t, role, append(args, "--json")...)
		if lc != 0 || rc != 0 || lo != ro {
			t.Fatalf("%s: local (%d %s) and --server (%d %s) differ:\n%s", name, lc, le, rc, re, firstDiff(lo, ro))
		}
	}
	same("audit verify", "viewer", "audit", "verify")
	same("audit list", "viewer", "audit", "list")
	same("audit list --after --limit", "viewer", "audit", "list", "--after", "1", "--limit", "2")
	// db info names the caller: the local OS user as admin, the token's owner.
	lo, _, _ = aml(t, "db", "info", "--data", remoteDir, "--json")
	ro, _, _ = srv.as(t, "viewer", "db", "info", "--json")
	var li, ri map[string]any
	mustJSON(t, lo, &li)
	mustJSON(t, ro, &ri)
	if p := ri["principal"].(map[string]any); p["name"] != "vic" || p["role"] != "viewer" {
		t.Fatalf("db info over --server: %s", ro)
	}
	// The server's paths are an administrator's business: the viewer gets
	// neither; the rest is the same as locally.
	if _, ok := ri["dataDir"]; ok {
		t.Fatalf("db info over --server shows a viewer the data directory: %s", ro)
	}
	if _, ok := ri["database"]; ok {
		t.Fatalf("db info over --server shows a viewer the database: %s", ro)
	}
	if li["dataDir"] == nil || li["database"] == nil {
		t.Fatalf("db info locally (admin) lacks the data directory or database: %s", lo)
	}
	for _, k := range []string{"principal", "dataDir", "database"} {
		delete(li, k)
		delete(ri, k)
	}
	if !reflect.DeepEqual(li, ri) {
		t.Fatalf("db info: local %s, remote %s", lo, ro)
	}
	same("runs list", "viewer", "runs", "list")
	same("dataset show", "viewer", "dataset", "show", ids[true]["ds"])
	same("dataset report", "viewer", "dataset", "report", ids[true]["ds"])
	same("model show", "viewer", "model", "show", ids[true]["model"])
	same("job list", "viewer", "job", "list")
	same("job logs", "viewer", "job", "logs", ids[true]["job"])
	same("token list", "admin", "token", "list")
	same("connect status", "viewer", "connect", "status")

	// Human output goes through the same printers: the job card.
	out, errs, code := srv.as(t, "viewer", "job", "status", ids[true]["job"])
	if code != 0 || !strings.Contains(out, "status    done") || !strings.Contains(out, "computed by the platform") {
		t.Fatalf("human job status over --server: %d %s\n%s", code, errs, out)
	}
	// The server recorded the token's owner as the author.
	out, _, _ = srv.as(t, "viewer", "dataset", "show", ids[true]["ds"], "--json")
	var shown struct{ Dataset struct{ CreatedBy string } }
	mustJSON(t, out, &shown)
	if shown.Dataset.CreatedBy != "erin" {
		t.Fatalf("dataset built over --server by %q, want erin", shown.Dataset.CreatedBy)
	}
	// A retry is answered queued on both sides (the server's worker then
	// runs it, nothing runs the local one: last of the job reads).
	both("job retry", "engineer", with(func(m map[string]string) []string { return []string{"job", "retry", m["job"]} }))
	// job submit (queued) and job cancel: the server's one worker is kept
	// busy meanwhile, so that both sides cancel a queued job.
	out, errs, code = srv.as(t, "engineer", "job", "submit", "--dataset", ids[true]["ds"], "--trainer", "test_mean@1", "--params", `{"steps":600,"stepMs":50}`, "--json")
	var busy struct{ ID string }
	if mustJSON(t, out, &busy); code != 0 {
		t.Fatalf("busy job: %d %s", code, errs)
	}
	lo, ro = both("job submit", "engineer", with(func(m map[string]string) []string {
		return []string{"job", "submit", "--dataset", m["ds"], "--trainer", "test_mean@1", "--seed", "3", "--note", "to be cancelled", "--timeout", "90s"}
	}))
	for r, out := range map[bool]string{false: lo, true: ro} {
		var j struct{ ID, Status string }
		if mustJSON(t, out, &j); j.Status != "queued" {
			t.Fatalf("job submit (remote %v): %s", r, out)
		}
		ids[r]["queued"] = j.ID
	}
	both("job cancel (queued)", "engineer", with(func(m map[string]string) []string { return []string{"job", "cancel", m["queued"]} }))
	if _, errs, code = srv.as(t, "engineer", "job", "cancel", busy.ID); code != 0 {
		t.Fatalf("cancel the busy job: %d %s", code, errs)
	}

	// The twin and certificate commands (last: converted separately).
	_, ro = both("twin scene put", "engineer", fixed("twin", "scene", "put", "--default-injection"))
	var sc struct{ SceneID, SceneVersion, Hash string }
	mustJSON(t, ro, &sc)
	both("twin scene show", "viewer", fixed("twin", "scene", "show", sc.SceneID))
	both("cert list", "viewer", fixed("cert", "list"))
	same("twin scene show", "viewer", "twin", "scene", "show", sc.SceneID)
}

// TestRemoteErrors: server errors keep their code and exit 1; flags that
// cannot mean anything with a server are usage errors (exit 2); commands
// without a route refuse naming themselves.
func TestRemoteErrors(t *testing.T) {
	d := simDir(t)
	srv := startServer(t, d, api.Options{})
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"wrong token", []string{"runs", "list", "--server", srv.url, "--token", "aml_wrong"}, 1, "error: AML_UNAUTHENTICATED:"},
		{"no token", []string{"runs", "list", "--server", srv.url}, 1, "error: AML_UNAUTHENTICATED:"},
		{"agent approves", []string{"cert", "approve", "cert-x", "--server", srv.url, "--token", srv.tok["agent"]}, 1, "error: AML_FORBIDDEN:"},
		{"viewer builds", []string{"dataset", "build", "--spec", filepath.Join(d, "spec.json"), "--server", srv.url, "--token", srv.tok["viewer"]}, 1, "error: AML_FORBIDDEN:"},
		{"not found", []string{"runs", "show", "nope", "--server", srv.url, "--token", srv.tok["viewer"]}, 1, "error: AML_NOT_FOUND:"},
		{"no route", []string{"sim", "injection", "--server", srv.url, "--token", srv.tok["admin"]}, 1, "error: AML_REMOTE_UNSUPPORTED: aml sim injection has no API route"},
		{"no route: demo", []string{"demo", "--server", srv.url}, 1, "AML_REMOTE_UNSUPPORTED: aml demo"},
		{"no route: worker", []string{"worker", "--server", srv.url}, 1, "AML_REMOTE_UNSUPPORTED: aml worker"},
		{"agent promotes to production", []string{"model", "promote", "m-x", "--to", "production", "--server", srv.url, "--token", srv.tok["agent"]}, 1, "error: AML_FORBIDDEN:"},
		{"viewer ingests", []string{"ingest", "csv", filepath.Join(d, "spec.json"), "--line", "L", "--product", "P", "--recipe", "R", "--server", srv.url, "--token", srv.tok["viewer"]}, 1, "error: AML_FORBIDDEN:"},
		{"someone else's name: token", []string{"token", "revoke", "tok-x", "--as", "mallory", "--server", srv.url, "--token", srv.tok["admin"]}, 2, "the actor is the token's owner \"root\""},
		{"usage: dataset build without --spec", []string{"dataset", "build", "--server", srv.url, "--token", srv.tok["engineer"]}, 2, `error: AML_USAGE: required flag(s) "spec" not set`},
		{"usage: audit list --limit 0", []string{"audit", "list", "--limit", "0", "--server", srv.url, "--token", srv.tok["viewer"]}, 2, "error: AML_USAGE: --limit"},
		{"usage: audit verify --expect-head", []string{"audit", "verify", "--expect-head", "5", "--server", srv.url, "--token", srv.tok["viewer"]}, 2, "error: AML_USAGE: --expect-head:"},
		{"usage: job submit --params", []string{"job", "submit", "--dataset", "d", "--trainer", "t", "--params", "{", "--server", srv.url, "--token", srv.tok["engineer"]}, 2, "error: AML_USAGE: --params"},
		{"usage: token create --role", []string{"token", "create", "--name", "x", "--role", "boss", "--server", srv.url, "--token", srv.tok["admin"]}, 2, "error: AML_USAGE: --role: unknown role"},
		{"usage: ingest a missing file", []string{"ingest", "csv", "/nonexistent.csv", "--line", "L", "--product", "P", "--recipe", "R", "--server", srv.url, "--token", srv.tok["engineer"]}, 2, "no such file"},
		{"job of no dataset", []string{"job", "submit", "--dataset", "ds-x", "--trainer", "test_mean@1", "--server", srv.url, "--token", srv.tok["engineer"]}, 1, "error: AML_NOT_FOUND:"},
		{"token without server", []string{"runs", "list", "--data", d, "--token", "x"}, 2, "error: AML_USAGE: --token needs --server"},
		{"server and data", []string{"runs", "list", "--data", d, "--server", srv.url}, 2, "error: AML_USAGE: --server and --data"},
		{"bad url", []string{"runs", "list", "--server", "localhost:1"}, 2, "error: AML_USAGE: --server"},
		{"someone else's name", []string{"cert", "approve", "cert-x", "--as", "mallory", "--server", srv.url, "--token", srv.tok["approver"]}, 2, "the actor is the token's owner \"ada\""},
		{"usage checked here", []string{"ts", "query", "--server", srv.url, "--token", srv.tok["viewer"]}, 2, "error: AML_USAGE: --node is required"},
		{"unreachable", []string{"runs", "list", "--server", "http://127.0.0.1:1", "--token", "x"}, 1, "error: AML_STORE_UNAVAILABLE: server http://127.0.0.1:1 unreachable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs, code := aml(t, c.args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, want %d; stderr %q, want %q", code, c.code, errs, c.want)
			}
		})
	}
	// The environment variables work like the flags.
	t.Setenv("AML_SERVER", srv.url)
	t.Setenv("AML_TOKEN", srv.tok["viewer"])
	out, errs, code := aml(t, "runs", "list", "--json")
	var runs []any
	if mustJSON(t, out, &runs); code != 0 || len(runs) != 5 {
		t.Fatalf("env: %d %s %d runs", code, errs, len(runs))
	}
}

// TestRemoteJobWait: job submit --wait over --server follows the job on
// the event stream; when the stream is refused, or ends right after it
// opened (a proxy cutting long requests), it falls back to polling and
// still reports the job's end.
func TestRemoteJobWait(t *testing.T) {
	d := simDir(t)
	srv := startServer(t, d, api.Options{})
	var streams atomic.Int32
	var mode atomic.Value // "pass", "refuse" or "cut"
	mode.Store("pass")
	target, _ := url.Parse(srv.url)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/events" {
			streams.Add(1)
			switch mode.Load() {
			case "refuse":
				http.Error(w, "no event streams through this proxy", http.StatusBadGateway)
				return
			case "cut":
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.Write([]byte(": connected\n\n"))
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(px.Close)
	cli := func(args ...string) (string, string, int) {
		return aml(t, append(args, "--server", px.URL, "--token", srv.tok["engineer"], "--json")...)
	}
	out, errs, code := cli("dataset", "build", "--spec", filepath.Join(d, "spec.json"))
	if code != 0 {
		t.Fatal(errs)
	}
	var b struct{ Dataset struct{ ID string } }
	mustJSON(t, out, &b)
	for i, m := range []string{"pass", "refuse", "cut"} {
		mode.Store(m)
		out, errs, code = cli("job", "submit", "--dataset", b.Dataset.ID, "--trainer", "test_mean@1", "--params", `{"steps":4,"stepMs":20}`, "--wait")
		var j struct{ ID, Status, ModelID string }
		if code != 0 {
			t.Fatalf("%s: exit %d %s", m, code, errs)
		}
		mustJSON(t, out, &j)
		if j.Status != "done" || j.ModelID == "" {
			t.Fatalf("%s: %+v", m, j)
		}
		if n := streams.Load(); n != int32(i+1) {
			t.Fatalf("%s: %d event stream request(s) so far, want %d", m, n, i+1)
		}
	}
	// A failing job: exit 1 with the job's error code, as locally.
	mode.Store("pass")
	_, errs, code = cli("job", "submit", "--dataset", b.Dataset.ID, "--trainer", "test_mean@1", "--params", `{"fail":true}`, "--wait")
	if code != 1 || !strings.Contains(errs, "AML_TRAINER_FAILED") {
		t.Fatalf("failing job: %d %q", code, errs)
	}
}
