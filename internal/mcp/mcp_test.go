package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/render"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fixture is what "aml demo" leaves in a data directory: the simulated
// injection line, a dataset, the trained hybrid twin model (production,
// passing twin gate), the frozen scene and objective, a snapshot, a trial
// and an executed certificate. It is built once by the real binary, by the
// first test that needs it; every test works on its own copy.
var (
	amlBin   string
	demoDir  string
	demoOnce sync.Once
	demoErr  error
	demo     struct {
		DatasetID string    `json:"datasetId"`
		JobID     string    `json:"jobId"`
		ModelID   string    `json:"modelId"`
		TrialID   string    `json:"trialId"`
		DemoClock time.Time `json:"demoClock"`
	}
)

const (
	line  = "line-injection-01"
	scene = "injection-hold-control"
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		tmp, err := os.MkdirTemp("", "aml-mcp-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() {
			if err := os.RemoveAll(tmp); err != nil {
				fmt.Fprintln(os.Stderr, "remove the test directory:", err)
			}
		}()
		amlBin = filepath.Join(tmp, "aml")
		if out, err := exec.Command("go", "build", "-o", amlBin, "github.com/aml-project/aml/cmd/aml").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build ./cmd/aml: %v\n%s", err, out)
			return 1
		}
		demoDir = filepath.Join(tmp, "demo")
		return m.Run()
	}())
}

// fixture copies the demo's data directory for one test.
func fixture(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("the fixture trains the hybrid twin end to end (aml demo); runs without -short")
	}
	demoOnce.Do(func() {
		cmd := exec.Command(amlBin, "demo", "--data", demoDir, "--json")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			demoErr = fmt.Errorf("aml demo: %v\n%s", err, out)
			return
		}
		if err := json.Unmarshal(out, &demo); err != nil || demo.ModelID == "" || demo.TrialID == "" {
			demoErr = fmt.Errorf("aml demo output: %v\n%s", err, out)
		}
	})
	if demoErr != nil {
		t.Fatal(demoErr)
	}
	dst := t.TempDir()
	err := filepath.WalkDir(demoDir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(demoDir, p)
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// deps opens a data directory the way a serving process does.
func deps(t *testing.T, dir string) *service.Deps {
	t.Helper()
	s, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	bus := events.New()
	r := jobs.NewRunner(s, jobs.Options{DataDir: dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: bus})
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A serving process registers the key it signs with (service.Process).
	if err := s.RegisterSigningKey(context.Background(), key, "aml"); err != nil {
		t.Fatal(err)
	}
	return &service.Deps{Store: s, DataDir: dir, Runner: r, Bus: bus, Key: key}
}

// newApp is the application over d as a serving process builds it.
func newApp(d *service.Deps) *app.App { return app.New(d, app.Options{}) }

func connect(t *testing.T, tr sdk.Transport) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "aml-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Error(err)
		}
	})
	return cs
}

// inMemory connects a client to NewServer(a, p) in this process.
func inMemory(t *testing.T, a *app.App, p auth.Principal) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := NewServer(a, p).Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ss.Close(); err != nil {
			t.Error(err)
		}
	})
	return connect(t, ct)
}

// outSchemas are the resolved output schemas a session lists, by tool.
var outSchemas sync.Map // *sdk.ClientSession → map[string]*jsonschema.Resolved

func outputSchemas(t *testing.T, cs *sdk.ClientSession) map[string]*jsonschema.Resolved {
	t.Helper()
	if m, ok := outSchemas.Load(cs); ok {
		return m.(map[string]*jsonschema.Resolved)
	}
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*jsonschema.Resolved{}
	for _, tool := range res.Tools {
		var s jsonschema.Schema
		b, _ := json.Marshal(tool.OutputSchema)
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: output schema %s: %v", tool.Name, b, err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: resolve the output schema: %v", tool.Name, err)
		}
		m[tool.Name] = r
	}
	outSchemas.Store(cs, m)
	return m
}

// call runs a tool that must succeed, checks its structured result
// against the output schema the tool declares and decodes it into out.
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if err := outputSchemas(t, cs)[name].Validate(v); err != nil {
		t.Errorf("%s: the result does not match the declared output schema: %v", name, err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	checkSummary(t, name, args, b, res)
}

// checkSummary: a tool's second text block is its op's rendering
// (internal/render) of the answer — the lines the CLI prints.
func checkSummary(t *testing.T, name string, args map[string]any, structured []byte, res *sdk.CallToolResult) {
	t.Helper()
	var opName string
	for _, tl := range tools {
		if tl.name == name {
			opName = tl.op
		}
	}
	op, ok := app.Lookup(opName)
	if !ok {
		t.Fatalf("%s: no op %q", name, opName)
	}
	if !render.Has(opName) {
		if len(res.Content) != 1 {
			t.Errorf("%s: %d content blocks for an op without a rendering", name, len(res.Content))
		}
		return
	}
	if len(res.Content) != 2 {
		t.Fatalf("%s: %d content blocks, want the JSON and the summary", name, len(res.Content))
	}
	req, resp := reflect.New(op.Req), reflect.New(op.Resp)
	if ab, err := json.Marshal(args); err == nil && args != nil {
		_ = json.Unmarshal(ab, req.Interface())
	}
	var wrapped struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(structured, &wrapped) == nil && wrapped.Result != nil && op.Resp.Kind() != reflect.Struct {
		structured = wrapped.Result
	}
	if err := json.Unmarshal(structured, resp.Interface()); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	want := render.String(opName, req.Interface(), resp.Elem().Interface())
	if got := res.Content[1].(*sdk.TextContent).Text; got != want || got == "" {
		t.Errorf("%s: summary\n%s\nwant\n%s", name, got, want)
	}
}

// callErr runs a tool that must fail and returns its structured error.
func callErr(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) ToolError {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s: succeeded, want an error: %s", name, text(res))
	}
	var te ToolError
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &te); err != nil || te.Code == "" {
		t.Fatalf("%s: no structured error in %s (%s)", name, b, text(res))
	}
	if want := te.Code + ": "; !strings.HasPrefix(text(res), want) {
		t.Errorf("%s: text %q does not start with the code", name, text(res))
	}
	return te
}

func text(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// wantHints is the behaviour every tool must declare. Every tool acts on
// AML's own store only (openWorldHint false).
var wantHints = map[string]hints{
	"aml_node_catalog":         readOnly,
	"aml_line_apply":           {idempotent: true},
	"aml_dataset_build":        additive,
	"aml_dataset_stats":        readOnly,
	"aml_dataset_check":        readOnly,
	"aml_line_overview":        readOnly,
	"aml_job_submit":           additive,
	"aml_trainer_show":         readOnly,
	"aml_job_status":           readOnly,
	"aml_job_logs":             readOnly,
	"aml_job_cancel":           {destructive: true, idempotent: true},
	"aml_leaderboard":          readOnly,
	"aml_model_reference":      readOnly,
	"aml_model_replay":         readOnly,
	"twin_scene_list":          readOnly,
	"twin_scene_read":          readOnly,
	"twin_scene_draft":         readOnly,
	"twin_scene_check":         readOnly,
	"twin_snapshot_create":     additive,
	"twin_trial_run":           additive,
	"mpc_optimize":             additive,
	"twin_gate_evaluate":       additive,
	"twin_calibration_request": {idempotent: true},
	"twin_certificate_request": additive,
	"twin_envelope_request":    additive,
	"twin_envelope_list":       readOnly,
	"twin_envelope_read":       readOnly,
	"twin_steptest_plan":       readOnly,
	"twin_steptest_request":    additive,
	"twin_steptest_read":       readOnly,
	"twin_steptest_list":       readOnly,
	"aml_benefit_study_start":  additive,
	"aml_benefit_study_read":   readOnly,
	"aml_benefit_study_list":   readOnly,
}

// checkTools lists the tools and checks names, annotations and schemas.
func checkTools(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tool := range res.Tools {
		seen[tool.Name] = true
		want, ok := wantHints[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		for _, bad := range []string{"approve", "promote", "freeze", "execute", "revoke", "write", "channel"} {
			if strings.Contains(tool.Name, bad) {
				t.Errorf("tool %s: an agent tool may not %s", tool.Name, bad)
			}
		}
		a := tool.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: incomplete annotations %+v", tool.Name, a)
			continue
		}
		got := hints{readOnly: a.ReadOnlyHint, destructive: *a.DestructiveHint, idempotent: a.IdempotentHint}
		if got != want || *a.OpenWorldHint {
			t.Errorf("%s: hints %+v openWorld %v, want %+v and false", tool.Name, got, *a.OpenWorldHint, want)
		}
		if tool.Description == "" || a.Title == "" {
			t.Errorf("%s: no description or title", tool.Name)
		}
		var in struct {
			Type       string `json:"type"`
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		}
		b, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(b, &in); err != nil || in.Type != "object" || len(in.Properties) == 0 {
			t.Errorf("%s: input schema %s", tool.Name, b)
		}
		for p, s := range in.Properties {
			if s.Description == "" {
				t.Errorf("%s: input %s has no description", tool.Name, p)
			}
		}
		if b, _ := json.Marshal(tool.OutputSchema); !strings.HasPrefix(string(b), "{") || !strings.Contains(string(b), `"type":"object"`) {
			t.Errorf("%s: output schema %s", tool.Name, b)
		}
	}
	for name := range wantHints {
		if !seen[name] {
			t.Errorf("tool %s missing", name)
		}
	}
}

// emptyApp is the application over a fresh data directory.
func emptyApp(t *testing.T) (*service.Deps, *app.App) {
	t.Helper()
	d := deps(t, t.TempDir())
	return d, newApp(d)
}

func TestToolsAndAnnotations(t *testing.T) {
	_, a := emptyApp(t)
	checkTools(t, inMemory(t, a, auth.Principal{Name: "agent-1", Role: auth.RoleAgent}))
}

// sameJSON reports whether a and b encode to the same JSON value.
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	var va, vb any
	for _, p := range []struct {
		in  any
		out *any
	}{{a, &va}, {b, &vb}} {
		raw, err := json.Marshal(p.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, p.out); err != nil {
			t.Fatal(err)
		}
	}
	return reflect.DeepEqual(va, vb)
}

// TestToolsAreOps walks the tool list a client sees: every tool is backed
// by an application op (named in its _meta), takes exactly the op's
// request type (input schema = app.Schema(op.Req)) and returns the op's
// response type; and no tool reaches an op the agent role may not take —
// certificate approval, revocation and execution, promotion, stage moves,
// scene freezing, channel settings, administration.
func TestToolsAreOps(t *testing.T) {
	_, a := emptyApp(t)
	cs := inMemory(t, a, auth.Principal{Name: "agent-1", Role: auth.RoleAgent})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != len(tools) {
		t.Errorf("%d tools listed, %d in the table", len(res.Tools), len(tools))
	}
	table := map[string]string{}
	for _, row := range tools {
		table[row.name] = row.op
	}
	never := map[string]bool{"cert.approve": true, "cert.revoke": true, "cert.execute": true, "model.promote": true, "model.retire": true,
		"scene.freeze": true, "channel.set": true, "token.create": true, "token.revoke": true, "retention.apply": true,
		"envelope.approve": true, "envelope.revoke": true, "envelope.cycle": true,
		"steptest.approve": true, "steptest.execute": true, "steptest.revoke": true}
	forbidden := map[auth.Action]bool{auth.ActCertApprove: true, auth.ActPromoteProduction: true, auth.ActSceneFreeze: true, auth.ActWrite: true,
		auth.ActModelStage: true, auth.ActAdmin: true}
	ops := map[string]string{}
	for _, tool := range res.Tools {
		name, _ := tool.Meta[MetaOp].(string)
		op, ok := app.Lookup(name)
		if !ok {
			t.Errorf("%s: not backed by an app op (_meta %v)", tool.Name, tool.Meta)
			continue
		}
		if table[tool.Name] != op.Name {
			t.Errorf("%s: lists op %s, the table says %s", tool.Name, op.Name, table[tool.Name])
		}
		if prev, dup := ops[op.Name]; dup {
			t.Errorf("%s and %s both call %s", prev, tool.Name, op.Name)
		}
		ops[op.Name] = tool.Name
		if never[op.Name] || forbidden[op.Act] || !auth.RoleAllows(auth.RoleAgent, op.Act) {
			t.Errorf("%s calls %s (action %s), which no agent may take", tool.Name, op.Name, op.Act)
		}
		if !sameJSON(t, tool.InputSchema, app.MustSchema(op.Req)) {
			b, _ := json.Marshal(tool.InputSchema)
			t.Errorf("%s: input schema is not app.Schema(%s):\n%s", tool.Name, op.Req, b)
		}
		out, _, err := OutputSchema(op)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, tool.OutputSchema, out) {
			t.Errorf("%s: output schema is not that of %s", tool.Name, op.Resp)
		}
		if tool.Annotations.ReadOnlyHint && op.Act != auth.ActRead {
			t.Errorf("%s: read-only, but its op takes action %s", tool.Name, op.Act)
		}
	}
	// The agent's limits are those of the role table too.
	for _, act := range []auth.Action{auth.ActCertApprove, auth.ActPromoteProduction, auth.ActSceneFreeze, auth.ActWrite} {
		if auth.RoleAllows(auth.RoleAgent, act) {
			t.Errorf("the role table lets an agent %s", act)
		}
	}
}

// TestArguments: tool arguments are the op's request fields, decoded
// strictly (unknown and old argument names refused, types checked, the
// op's validation applied), and the role check runs before anything else.
func TestArguments(t *testing.T) {
	_, a := emptyApp(t)
	agent := inMemory(t, a, auth.Principal{Name: "agent-1", Role: auth.RoleAgent})
	for _, c := range []struct {
		tool        string
		args        map[string]any
		code, field string
	}{
		{"twin_trial_run", map[string]any{"model": "m", "snapshot": "s", "set": map[string]float64{"x": 1}, "bogus": 1}, core.CodeInvalidArgument, "arguments"},
		{"twin_trial_run", map[string]any{"modelId": "m", "snapshotId": "s"}, core.CodeInvalidArgument, "arguments"},
		{"twin_trial_run", map[string]any{"model": "m", "snapshot": "s"}, core.CodeInvalidArgument, "set"},
		{"aml_job_logs", map[string]any{"id": "j", "offset": "x"}, core.CodeInvalidArgument, "offset"},
		{"aml_job_logs", map[string]any{"id": "j", "maxBytes": 2 << 20}, core.CodeInvalidArgument, "maxBytes"},
		{"aml_job_status", nil, core.CodeInvalidArgument, "id"},
		{"aml_job_status", map[string]any{"id": "no-such-job"}, core.CodeNotFound, ""},
		{"twin_snapshot_create", map[string]any{"scene": "s", "maxAge": 60}, core.CodeInvalidArgument, "maxAge"},
		{"twin_snapshot_create", map[string]any{"scene": "s", "at": "yesterday"}, core.CodeInvalidArgument, "at"},
		{"aml_node_catalog", map[string]any{"line": 7}, core.CodeInvalidArgument, "line"},
		{"twin_snapshot_create", map[string]any{"scene": "s", "maxAge": "-1s"}, core.CodeInvalidArgument, "maxAge"},
		{"twin_certificate_request", map[string]any{"trial": "t", "ttl": "48h"}, core.CodeInvalidArgument, "ttl"},
		{"twin_envelope_request", map[string]any{"scene": "s", "model": "m", "bounds": map[string]any{"hold_time": map[string]any{"min": 6, "max": 7}}, "maxMovesPerHour": 0}, core.CodeInvalidArgument, "maxMovesPerHour"},
		{"twin_envelope_request", map[string]any{"scene": "s", "model": "m", "bounds": map[string]any{"hold_time": map[string]any{"min": 8, "max": 7}}, "maxMovesPerHour": 4}, core.CodeInvalidArgument, "bounds.hold_time"},
		{"aml_model_reference", nil, core.CodeInvalidArgument, "id"},
		{"aml_model_replay", nil, core.CodeInvalidArgument, "id"},
		{"aml_leaderboard", map[string]any{"limit": 500}, core.CodeInvalidArgument, "limit"},
		{"mpc_optimize", map[string]any{"model": "m", "snapshot": "s", "mode": "fast"}, core.CodeInvalidArgument, "mode"},
		{"aml_dataset_build", map[string]any{"lineId": "line-1"}, core.CodeInvalidArgument, "arguments"},
	} {
		te := callErr(t, agent, c.tool, c.args)
		t.Logf("%s: %s: %s: %s", c.tool, te.Code, te.Field, te.Message)
		if te.Code != c.code || (c.field != "" && te.Field != c.field) || te.Status != auth.HTTPStatus(core.KindOfCode(c.code)) {
			t.Errorf("%s %v: %+v, want %s on %q", c.tool, c.args, te, c.code, c.field)
		}
	}
	var lb app.ModelCompareResponse
	call(t, agent, "aml_leaderboard", map[string]any{"limit": 5}, &lb)
	if lb.Total != 0 || lb.Entries == nil || lb.RankedBy == "" {
		t.Errorf("empty leaderboard: %+v", lb)
	}
	var scenes app.List[app.SceneSummary]
	call(t, agent, "twin_scene_list", nil, &scenes)
	if scenes.Count != 0 || scenes.Items == nil {
		t.Errorf("empty scene list: %+v", scenes)
	}
	// A viewer is refused by role before the request is even validated.
	viewer := inMemory(t, a, auth.Principal{Name: "viewer-1", Role: auth.RoleViewer})
	if te := callErr(t, viewer, "twin_snapshot_create", nil); te.Code != core.CodeForbidden || te.Field != "role" {
		t.Errorf("viewer snapshot: %+v", te)
	}
}

// blockingStore holds every GetScene until release is closed, telling
// entered each time one starts.
type blockingStore struct {
	store.Store
	entered chan string
	release chan struct{}
}

func (s *blockingStore) GetScene(ctx context.Context, id, version string) (*contract.SceneContract, error) {
	s.entered <- id
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.GetScene(ctx, id, version)
}

// TestHeavySlots: MCP calls take the application's heavy-operation slots.
// With one slot held by a snapshot blocked in the store, a second heavy
// call waits (and never reaches the store) until the slot is free, a heavy
// call whose context ends while waiting fails with AML_STORE_UNAVAILABLE,
// and light calls are not held up.
func TestHeavySlots(t *testing.T) {
	d := deps(t, t.TempDir())
	bs := &blockingStore{Store: d.Store, entered: make(chan string, 8), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(bs.release) }) }
	t.Cleanup(release) // never leave a call blocked behind a failed check
	bd := *d
	bd.Store = bs
	a := app.New(&bd, app.Options{HeavyConcurrent: 1})
	p := auth.Principal{Name: "agent-1", Role: auth.RoleAgent}
	cs := inMemory(t, a, p)

	type result struct {
		name string
		res  *sdk.CallToolResult
		err  error
	}
	done := make(chan result, 2)
	start := func(name, sceneID string) {
		go func() {
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "twin_snapshot_create", Arguments: map[string]any{"scene": sceneID}})
			done <- result{name, res, err}
		}()
	}
	start("first", "scene-first")
	select {
	case id := <-bs.entered:
		if id != "scene-first" {
			t.Fatalf("entered %s", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first snapshot never reached the store")
	}

	// The slot is held: a heavy call whose context ends gives up.
	var snapTool toolDef
	defs, err := toolDefs()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		if d.tool.Name == "twin_snapshot_create" {
			snapTool = d
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	res, err := handler(a, p, snapTool)(ctx, &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "twin_snapshot_create", Arguments: json.RawMessage(`{"scene":"scene-cancelled"}`)}})
	cancel()
	var ae *core.Error
	if err != nil || res == nil || !res.IsError || !errors.As(res.GetError(), &ae) || ae.Code != core.CodeStoreUnavailable || !strings.Contains(ae.Message, "compute slot") {
		t.Fatalf("a heavy call while the slot is held: %v %+v (%v)", err, res, ae)
	}
	// A light call runs meanwhile.
	var nodes app.List[core.Node]
	call(t, cs, "aml_node_catalog", nil, &nodes)

	// A second heavy call over MCP waits for the slot.
	start("second", "scene-second")
	select {
	case r := <-done:
		t.Fatalf("%s returned while the slot was held: %v %s", r.name, r.err, text(r.res))
	case id := <-bs.entered:
		t.Fatalf("%s reached the store while the slot was held", id)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	for range 2 {
		r := <-done
		if r.err != nil || !r.res.IsError {
			t.Fatalf("%s: %v %s", r.name, r.err, text(r.res))
		}
		// Both ran: the empty store has no such scene.
		if txt := text(r.res); !strings.HasPrefix(txt, core.CodeNotFound) {
			t.Errorf("%s: %s", r.name, txt)
		}
	}
	if got := []string{<-bs.entered}; got[0] != "scene-second" || len(bs.entered) != 0 {
		t.Errorf("store reached by %v and %d more, want scene-second only", got, len(bs.entered))
	}
}

// snapshotAndTrial takes a snapshot 5 minutes before the demo's clock with
// the model's state estimate and runs a trial moving hold_pressure by 1 bar
// (and one by 10 bar, beyond the step limit, recorded as rejected).
func snapshotAndTrial(t *testing.T, cs *sdk.ClientSession) (app.SnapshotTakeResponse, app.TrialRunResponse) {
	t.Helper()
	var snap app.SnapshotTakeResponse
	call(t, cs, "twin_snapshot_create", map[string]any{"scene": scene, "model": demo.ModelID,
		"at": demo.DemoClock.Add(-5 * time.Minute).UnixMilli()}, &snap)
	if snap.Snapshot == nil || snap.Snapshot.SnapshotID == "" || !strings.Contains(snap.Snapshot.EstimatorVersion, demo.ModelID) {
		t.Fatalf("snapshot: %+v", snap.Snapshot)
	}
	hp, ok := snap.Snapshot.ControlValues["hold_pressure"]
	if !ok {
		t.Fatalf("snapshot has no hold_pressure: %v", snap.Snapshot.ControlValues)
	}
	var tr app.TrialRunResponse
	call(t, cs, "twin_trial_run", map[string]any{"model": demo.ModelID, "snapshot": snap.Snapshot.SnapshotID,
		"set": map[string]float64{"hold_pressure": hp + 1}}, &tr)
	vt := tr.Record.Trial
	if vt == nil || tr.Detail == nil || len(vt.CandidateControlTrajectory) != 60 || vt.CandidateControlTrajectory[0]["hold_pressure"] != hp+1 {
		t.Fatalf("trial: %+v", tr.Record)
	}
	if vt.Executed() || tr.Record.Hash == "" || len(tr.Detail.Traces) == 0 {
		t.Fatalf("trial record: executed %v, hash %q, %d traces", vt.Executed(), tr.Record.Hash, len(tr.Detail.Traces))
	}
	var big app.TrialRunResponse
	call(t, cs, "twin_trial_run", map[string]any{"model": demo.ModelID, "snapshot": snap.Snapshot.SnapshotID,
		"set": map[string]float64{"hold_pressure": hp + 10}}, &big)
	if big.Record.Passed || big.Record.RejectCode != contract.RejectControlSafety {
		t.Fatalf("a move beyond the step limit: passed %v, reject %q", big.Record.Passed, big.Record.RejectCode)
	}
	return snap, tr
}

// TestStdioAgent runs "aml mcp" as a subprocess the way an agent host does
// and, as a local agent: lists the tools, takes a snapshot, runs trials,
// optimises and requests a certificate for the best trial. The certificate
// stays ISSUED: the agent can neither approve it (the store refuses the
// requester, the role table refuses the agent role) nor reach any tool that
// moves it further; a person with the approver role can.
func TestStdioAgent(t *testing.T) {
	dir := fixture(t)
	cmd := exec.Command(amlBin, "mcp", "--data", dir, "--as-agent", "agent-7", "--lines", line)
	cmd.Stderr = os.Stderr
	cs := connect(t, &sdk.CommandTransport{Command: cmd})
	checkTools(t, cs)
	snap, _ := snapshotAndTrial(t, cs)

	var opt app.OptimizeResponse
	call(t, cs, "mpc_optimize", map[string]any{"model": demo.ModelID, "snapshot": snap.Snapshot.SnapshotID, "seed": 7}, &opt)
	if opt.Result == nil || opt.Result.Mode != "precise_search" || opt.Result.Evaluated < 2 {
		t.Fatalf("optimize: %+v", opt.Result)
	}
	if opt.Record == nil || !opt.Record.Passed || opt.Record.Trial == nil || opt.Record.Trial.Executed() {
		t.Fatalf("optimize found no passing candidate: %s", opt.Result.NoPass)
	}
	t.Logf("optimize: %s, %d candidates, best improvement %.4g", opt.Result.Mode, opt.Result.Evaluated, opt.Record.Improvement)
	if !(opt.Record.Improvement > 0) {
		t.Fatalf("the best trial does not improve (%.4g): nothing to certify", opt.Record.Improvement)
	}
	var cr contract.CertRecord
	call(t, cs, "twin_certificate_request", map[string]any{"trial": opt.Record.Trial.TrialID}, &cr)
	if cr.Cert == nil || cr.Cert.Status != contract.CertIssued || cr.Cert.CreatedBy != "agent-7" || cr.Cert.Signature == "" {
		t.Fatalf("certificate: %+v", cr)
	}
	id := cr.Cert.RecommendationID
	// Out of scope: another line's agent is refused before anything runs.
	if te := callErr(t, cs, "aml_node_catalog", map[string]any{"line": "line-other"}); te.Code != core.CodeForbidden || te.Field != "lineId" {
		t.Fatalf("other line: %+v", te)
	}
	if err := cs.Close(); err != nil {
		t.Logf("aml mcp exit: %v", err)
	}

	d := deps(t, dir)
	ctx := context.Background()
	got, err := d.Store.GetCertificate(ctx, id, d.Key.Public)
	if err != nil || got.Cert.Status != contract.CertIssued || got.Cert.ApprovedBy != "" {
		t.Fatalf("certificate after the agent's session: %v %+v", err, got)
	}
	agent := auth.Principal{Name: "agent-7", Role: auth.RoleAgent, Lines: []string{line}}
	for _, a := range []auth.Action{auth.ActCertApprove, auth.ActPromoteProduction, auth.ActSceneFreeze, auth.ActWrite} {
		if err := agent.Allow(a, line); core.CodeOf(err) != core.CodeForbidden {
			t.Errorf("agent may %s: %v", a, err)
		}
	}
	// Approvals a minute after issue: the certificate's own clock (the aml
	// mcp process stamped it), well inside its validity.
	at := got.Cert.IssuedAt.Add(time.Minute)
	if _, err := d.Store.ApproveCertificate(ctx, id, "agent-7", d.Key.Public, at); err == nil {
		t.Fatal("the requesting agent approved its own certificate")
	} else {
		t.Logf("approval by the requester refused: %v", err)
	}
	if got, _ := d.Store.GetCertificate(ctx, id, d.Key.Public); got.Cert.Status != contract.CertIssued {
		t.Fatalf("status after the refused approval: %s", got.Cert.Status)
	}
	// A person with the approver role can: the certificate was real.
	if r, err := d.Store.ApproveCertificate(ctx, id, "person-approver", d.Key.Public, at); err != nil || r.Cert.Status != contract.CertApproved {
		t.Fatalf("approval by a person: %v", err)
	}
}

// withPrincipal is the stand-in for the API's auth middleware: the test
// names the principal in headers.
func withPrincipal(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if role := r.Header.Get("X-Test-Role"); role != "" {
			p := auth.Principal{Name: r.Header.Get("X-Test-Name"), Role: auth.Role(role)}
			if l := r.Header.Get("X-Test-Lines"); l != "" {
				p.Lines = strings.Split(l, ",")
			}
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

func overHTTP(t *testing.T, url, name, role, lines string) *sdk.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headers{h: map[string]string{"X-Test-Name": name, "X-Test-Role": role, "X-Test-Lines": lines}, next: http.DefaultTransport}}
	return connect(t, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true})
}

// TestHTTP serves HTTPHandler behind a principal-injecting middleware and
// uses every tool over streamable HTTP: as an agent (allowed), as a viewer
// (read only), as an agent of another line (refused by line scope) and
// without a principal (401).
func TestHTTP(t *testing.T) {
	dir := fixture(t)
	d := deps(t, dir)
	srv := httptest.NewServer(withPrincipal(HTTPHandler(newApp(d))))
	defer srv.Close()
	ctx := context.Background()

	agent := overHTTP(t, srv.URL, "agent-http", string(auth.RoleAgent), line)
	checkTools(t, agent)

	var nodes app.List[core.Node]
	call(t, agent, "aml_node_catalog", nil, &nodes)
	if len(nodes.Items) < 10 || nodes.Count != len(nodes.Items) {
		t.Fatalf("node catalog: %d nodes", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		if n.LineID != line {
			t.Fatalf("node catalog: node %s of line %s", n.ID, n.LineID)
		}
	}
	var stats dataset.Report
	call(t, agent, "aml_dataset_stats", map[string]any{"id": demo.DatasetID}, &stats)
	// The operator's overview and the spec check, as the API and UI have them.
	var ov app.LineOverview
	call(t, agent, "aml_line_overview", map[string]any{"line": line}, &ov)
	if ov.Line != line || len(ov.Nodes) != len(nodes.Items) || ov.Run == nil {
		t.Fatalf("line overview: %s, %d nodes (catalog %d), run %v", ov.Line, len(ov.Nodes), len(nodes.Items), ov.Run)
	}
	var chk app.DatasetCheckResponse
	call(t, agent, "aml_dataset_check", map[string]any{"spec": exampleSpec(t)}, &chk)
	if !chk.OK || chk.Spec == nil {
		t.Fatalf("dataset check of the example spec: %+v", chk)
	}
	call(t, agent, "aml_dataset_check", map[string]any{"spec": map[string]any{"lineId": line, "beatMs": -1}}, &chk)
	if chk.OK || len(chk.Problems) == 0 {
		t.Fatalf("dataset check of a bad spec: %+v", chk)
	}
	if len(stats.Nodes) == 0 || stats.Windows.Train == 0 {
		t.Fatalf("dataset stats: %+v", stats)
	}
	var lb app.ModelCompareResponse
	call(t, agent, "aml_leaderboard", map[string]any{"line": line}, &lb)
	if len(lb.Entries) == 0 || lb.Entries[0].ModelID != demo.ModelID || lb.Entries[0].Stage != core.StageProduction || lb.Entries[0].TestNRMSE == nil || lb.Entries[0].Rank != 1 {
		t.Fatalf("leaderboard: %+v", lb)
	}
	var js core.Job
	call(t, agent, "aml_job_status", map[string]any{"id": demo.JobID}, &js)
	if js.Status != core.JobDone || js.ModelID != demo.ModelID {
		t.Fatalf("job status: %+v", js)
	}
	// The hybrid trainer logs nothing; give the demo job a rotated log
	// (trainer.log.1 is older than trainer.log) to page through.
	logDir := filepath.Join(dir, "jobs", demo.JobID, "logs")
	older, newer := strings.Repeat("older line\n", 20), strings.Repeat("newer line\n", 20)
	if err := os.WriteFile(filepath.Join(logDir, "trainer.log.1"), []byte(older), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, "trainer.log"), []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for off, pages := int64(0), 0; ; pages++ {
		var logs app.JobLogsResponse
		call(t, agent, "aml_job_logs", map[string]any{"id": demo.JobID, "offset": off, "maxBytes": 100}, &logs)
		if len(logs.Text) > 100 || logs.NextOffset != off+int64(len(logs.Text)) || logs.Size != int64(len(older)+len(newer)) || pages > 10 {
			t.Fatalf("job logs page %d: %+v", pages, logs)
		}
		all.WriteString(logs.Text)
		off = logs.NextOffset
		if !logs.More {
			break
		}
	}
	if all.String() != older+newer {
		t.Fatalf("job logs read back %q", all.String())
	}

	var ref app.ModelReferenceResponse
	call(t, agent, "aml_model_reference", map[string]any{"line": line, "product": "product-injection-a", "recipe": "recipe-injection-a",
		"controls": map[string]float64{"hold_pressure": 75}}, &ref)
	if ref.Model != demo.ModelID || len(ref.Steps) == 0 || !ref.Proposed || len(ref.Steps[0].Baseline) != len(ref.Targets) || len(ref.Steps[0].Proposed) != len(ref.Targets) || len(ref.Warnings) != 0 {
		t.Fatalf("model reference: %+v", ref)
	}
	last := ref.Steps[len(ref.Steps)-1]
	t.Logf("model reference on %s: %s baseline %.4g, proposed %.4g (hold_pressure 75), interval [%.4g, %.4g]", ref.Run, ref.Targets[0], last.Baseline[0], last.Proposed[0], last.Lo[0], last.Hi[0])
	call(t, agent, "aml_model_reference", map[string]any{"id": demo.ModelID, "run": ref.Run, "from": ref.From, "steps": 3, "controls": map[string]float64{"hold_pressure": 700}}, &ref)
	if len(ref.Steps) != 3 {
		t.Fatalf("model reference with steps 3: %d steps", len(ref.Steps))
	}
	if len(ref.Warnings) != 1 || !strings.Contains(ref.Warnings[0], "hold_pressure") {
		t.Fatalf("extrapolation not flagged: %v", ref.Warnings)
	}
	if te := callErr(t, agent, "aml_model_reference", map[string]any{"id": demo.ModelID, "controls": map[string]float64{"no_such": 1}}); te.Field != "controls.no_such" {
		t.Fatalf("unknown control: %+v", te)
	}

	// Predicted vs actual on the model's first test run: windows with
	// predictions, the band's coverage on that run.
	var rp app.ModelReplayResponse
	call(t, agent, "aml_model_replay", map[string]any{"id": demo.ModelID}, &rp)
	if !rp.IsTest || rp.Replay.Windows == 0 || len(rp.Replay.Coverage) != len(rp.Replay.Targets) || !(rp.Replay.Coverage[0] > 0.5) {
		t.Fatalf("model replay: %+v", rp)
	}

	var sc app.SceneShowResponse
	call(t, agent, "twin_scene_read", map[string]any{"id": scene}, &sc)
	if sc.Scene == nil || sc.Scene.Status != contract.SceneFrozen || sc.Hash == "" {
		t.Fatalf("scene: %+v", sc)
	}
	var list app.List[app.SceneSummary]
	call(t, agent, "twin_scene_list", nil, &list)
	if len(list.Items) != 1 || list.Items[0].Hash != sc.Hash || list.Items[0].Status != string(contract.SceneFrozen) {
		t.Fatalf("scene list: %+v", list.Items)
	}

	// Dataset build, job submit and cancel as the agent.
	var built app.DatasetBuildResponse
	call(t, agent, "aml_dataset_build", map[string]any{"spec": exampleSpec(t)}, &built)
	if built.Dataset.ID == "" || built.Dataset.CreatedBy != "agent-http" || built.Dataset.TrainWindows == 0 {
		t.Fatalf("dataset build: %+v", built.Dataset)
	}
	var sub core.Job
	call(t, agent, "aml_job_submit", map[string]any{"datasetId": built.Dataset.ID, "trainer": "linear_state_space@1", "seed": 3,
		"parentId": demo.JobID, "note": "linear baseline", "timeout": "10m"}, &sub)
	if sub.Status != core.JobQueued || sub.CreatedBy != "agent-http" || sub.ParentID != demo.JobID || sub.ChangeNote != "linear baseline" {
		t.Fatalf("job submit: %+v", sub)
	}
	var cancelled core.Job
	call(t, agent, "aml_job_cancel", map[string]any{"id": sub.ID}, &cancelled)
	if cancelled.Status != core.JobCancelled {
		t.Fatalf("job cancel: %+v", cancelled)
	}
	if te := callErr(t, agent, "aml_job_submit", map[string]any{"datasetId": built.Dataset.ID, "trainer": "no_such@9"}); te.Field == "" && te.Code == "" {
		t.Fatalf("unknown trainer: %+v", te)
	}
	var ts app.TrainerShowResponse
	call(t, agent, "aml_trainer_show", map[string]any{"name": "linear_state_space@1"}, &ts)
	if ts.Kind != app.TrainerNative || ts.Params == nil || ts.Params.Properties["order"] == nil {
		t.Fatalf("trainer show: %+v", ts)
	}
	if te := callErr(t, agent, "aml_job_submit", map[string]any{"datasetId": built.Dataset.ID, "trainer": "linear_state_space@1", "params": map[string]any{"ordr": 2}}); te.Code != core.CodeInvalidArgument || te.Field != "params.ordr" {
		t.Fatalf("misspelt param: %+v", te)
	}

	// The twin over HTTP: snapshot, trials, calibration request, gate.
	snap, tr := snapshotAndTrial(t, agent)
	var cal app.CalibrateResponse
	call(t, agent, "twin_calibration_request", map[string]any{"model": demo.ModelID, "scene": scene}, &cal)
	if cal.Decision == nil || cal.Decision.Reason == "" || cal.Decision.Signal.ModelID != demo.ModelID {
		t.Fatalf("calibration: %+v", cal.Decision)
	}
	var g gate.Result
	call(t, agent, "twin_gate_evaluate", map[string]any{"model": demo.ModelID, "scene": scene, "snapshots": 2}, &g)
	if g.GateEvalID == "" || len(g.Report.Checks) == 0 || g.CreatedBy != "agent-http" {
		t.Fatalf("gate: %+v", g)
	}
	// A trial that does not improve is refused a certificate, as an error
	// with its code.
	if !(tr.Record.Passed && tr.Record.Improvement > 0) {
		if te := callErr(t, agent, "twin_certificate_request", map[string]any{"trial": tr.Record.Trial.TrialID}); te.Code != core.CodeCertRefused {
			t.Fatalf("certificate for a non-improving trial: %+v", te)
		}
	}

	// Schema violations are AML_INVALID_ARGUMENT on "arguments".
	if te := callErr(t, agent, "twin_trial_run", map[string]any{"model": demo.ModelID, "snapshot": snap.Snapshot.SnapshotID, "bogus": 1}); te.Code != core.CodeInvalidArgument || te.Field != "arguments" {
		t.Fatalf("unknown argument: %+v", te)
	}

	// A viewer reads but may not run trials or request certificates.
	viewer := overHTTP(t, srv.URL, "viewer-1", string(auth.RoleViewer), "")
	call(t, viewer, "aml_leaderboard", nil, &lb)
	for name, args := range map[string]map[string]any{
		"twin_trial_run":           {"model": demo.ModelID, "snapshot": snap.Snapshot.SnapshotID, "set": map[string]float64{"hold_pressure": 1}},
		"twin_certificate_request": {"trial": demo.TrialID},
		"aml_job_submit":           {"datasetId": demo.DatasetID, "trainer": "linear_state_space@1"},
		"twin_snapshot_create":     {"scene": scene},
		"mpc_optimize":             {"model": demo.ModelID, "snapshot": snap.Snapshot.SnapshotID},
		"aml_dataset_build":        {"spec": exampleSpec(t)},
	} {
		if te := callErr(t, viewer, name, args); te.Code != core.CodeForbidden || te.Field != "role" || te.Status != http.StatusForbidden || te.Kind != core.KindForbidden {
			t.Errorf("viewer %s: %+v", name, te)
		}
	}
	// An agent of another line sees nothing of this one.
	other := overHTTP(t, srv.URL, "agent-other", string(auth.RoleAgent), "line-other")
	call(t, other, "aml_node_catalog", nil, &nodes)
	if len(nodes.Items) != 0 {
		t.Fatalf("other line's agent sees %d nodes", len(nodes.Items))
	}
	call(t, other, "aml_leaderboard", nil, &lb)
	if lb.Total != 0 {
		t.Fatalf("other line's agent sees %d models", lb.Total)
	}
	call(t, other, "twin_scene_list", nil, &list)
	if list.Count != 0 {
		t.Fatalf("other line's agent sees %d scenes", list.Count)
	}
	for name, args := range map[string]map[string]any{
		"aml_dataset_stats":        {"id": demo.DatasetID},
		"aml_job_logs":             {"id": demo.JobID},
		"aml_job_status":           {"id": demo.JobID},
		"twin_scene_read":          {"id": scene},
		"twin_scene_draft":         {"model": demo.ModelID},
		"twin_trial_run":           {"model": demo.ModelID, "snapshot": snap.Snapshot.SnapshotID, "set": map[string]float64{"hold_pressure": 1}},
		"twin_certificate_request": {"trial": demo.TrialID},
		"aml_model_reference":      {"id": demo.ModelID},
		"aml_model_replay":         {"id": demo.ModelID},
		"aml_leaderboard":          {"line": line},
		"aml_line_overview":        {"line": line},
	} {
		if te := callErr(t, other, name, args); te.Code != core.CodeForbidden || te.Field != "lineId" {
			t.Errorf("other line %s: %+v", name, te)
		}
	}

	// No principal: 401 with the AML error body.
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), auth.CodeUnauthenticated) {
		t.Fatalf("no principal: %d %s", resp.StatusCode, body)
	}

	// Whatever the agents did, no certificate of theirs moved past ISSUED.
	items, err := d.Store.ListCertificates(ctx, contract.CertFilter{}, d.Key.Public)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if strings.HasPrefix(it.Cert.CreatedBy, "agent") && it.Cert.Status != contract.CertIssued {
			t.Errorf("certificate %s requested by %s is %s", it.Cert.RecommendationID, it.Cert.CreatedBy, it.Cert.Status)
		}
		if strings.HasPrefix(it.Cert.ApprovedBy, "agent") {
			t.Errorf("certificate %s approved by %s", it.Cert.RecommendationID, it.Cert.ApprovedBy)
		}
	}
}

// exampleSpec is examples/specs/injection_weight.json, the spec argument
// of aml_dataset_build.
func exampleSpec(t *testing.T) map[string]any {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "examples", "specs", "injection_weight.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "note")
	m["note"] = "built by an agent over MCP"
	return m
}

// TestTokens uses real API tokens: "aml mcp --token" over stdio and the
// API's auth.Middleware in front of HTTPHandler. The token's role and
// line scope bind the tools; a bad token never reaches them.
func TestTokens(t *testing.T) {
	dir := fixture(t)
	d := deps(t, dir)
	ctx := context.Background()
	tokens := auth.NewTokens(d.Store.SQL())
	_, viewerTok, err := tokens.Create(ctx, "admin", auth.NewToken{Name: "viewer-tok", Role: auth.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	_, agentTok, err := tokens.Create(ctx, "admin", auth.NewToken{Name: "agent-tok", Role: auth.RoleAgent, Lines: []string{line}})
	if err != nil {
		t.Fatal(err)
	}

	// stdio: the viewer token reads and is refused a snapshot.
	cmd := exec.Command(amlBin, "mcp", "--data", dir, "--token", viewerTok)
	cmd.Stderr = os.Stderr
	cs := connect(t, &sdk.CommandTransport{Command: cmd})
	var sc app.SceneShowResponse
	call(t, cs, "twin_scene_read", map[string]any{"id": scene}, &sc)
	if te := callErr(t, cs, "twin_snapshot_create", map[string]any{"scene": scene}); te.Code != core.CodeForbidden || te.Field != "role" || !strings.Contains(te.Message, "viewer-tok") {
		t.Fatalf("viewer token snapshot: %+v", te)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close the stdio session: %v", err)
	}
	// A bad token: aml mcp refuses to start (exit 1, AML_UNAUTHENTICATED).
	out, err := exec.Command(amlBin, "mcp", "--data", dir, "--token", "aml_not-a-token").CombinedOutput()
	if err == nil || !strings.Contains(string(out), auth.CodeUnauthenticated) {
		t.Fatalf("bad token: %v %s", err, out)
	}
	// --token with --as-agent is a usage error (exit 2).
	if err := exec.Command(amlBin, "mcp", "--data", dir, "--token", agentTok, "--as-agent", "x").Run(); err == nil || err.(*exec.ExitError).ExitCode() != 2 {
		t.Fatalf("--token with --as-agent: %v", err)
	}

	// HTTP behind the API's middleware.
	srv := httptest.NewServer(auth.Middleware(tokens, false)(HTTPHandler(newApp(d))))
	defer srv.Close()
	hc := &http.Client{Transport: headers{h: map[string]string{"Authorization": "Bearer " + agentTok}, next: http.DefaultTransport}}
	agent := connect(t, &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, DisableStandaloneSSE: true})
	_, tr := snapshotAndTrial(t, agent)
	if tr.Record.Trial.CreatedBy != "agent-tok" {
		t.Fatalf("trial actor %q, want the token's name", tr.Record.Trial.CreatedBy)
	}
	bad := &http.Client{Transport: headers{h: map[string]string{"Authorization": "Bearer aml_not-a-token"}, next: http.DefaultTransport}}
	c := sdk.NewClient(&sdk.Implementation{Name: "aml-test", Version: "1"}, nil)
	if _, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: bad, DisableStandaloneSSE: true, MaxRetries: -1}, nil); err == nil {
		t.Fatal("a bad token connected")
	}
}
