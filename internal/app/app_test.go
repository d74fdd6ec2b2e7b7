package app

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/testfix"
)

var (
	admin    = Principal{Name: "ada", Role: auth.RoleAdmin}
	engineer = Principal{Name: "eve", Role: auth.RoleEngineer}
	viewer   = Principal{Name: "vic", Role: auth.RoleViewer}
	agent    = Principal{Name: "bot", Role: auth.RoleAgent}
)

var fixed = time.Date(2026, 1, 5, 6, 0, 0, 0, time.UTC)

func newApp(t *testing.T, o Options) *App {
	t.Helper()
	st, dir := testfix.SQLite(t)
	if o.Now == nil {
		o.Now = func() time.Time { return fixed }
	}
	return New(&service.Deps{Store: st, DataDir: dir}, o)
}

// TestOpsAreComplete: every op has a name, an action, a summary, struct
// request and response types whose JSON schemas build, and request types
// with required fields validate themselves.
func TestOpsAreComplete(t *testing.T) {
	ops := Ops()
	if len(ops) < 50 {
		t.Fatalf("%d ops", len(ops))
	}
	for _, op := range ops {
		if op.Name == "" || op.Act == "" || op.Summary == "" || op.call == nil {
			t.Errorf("op %+v is incomplete", op)
		}
		if op.Req.Kind() != reflect.Struct {
			t.Errorf("%s: request %s is not a struct", op.Name, op.Req)
		}
		if _, err := Schema(op.Req); err != nil {
			t.Errorf("%s: request schema: %v", op.Name, err)
		}
		if _, err := Schema(op.Resp); err != nil {
			t.Errorf("%s: response schema: %v", op.Name, err)
		}
		needs := false
		for _, f := range Fields(op.Req) {
			sf, _ := op.Req.FieldByName(goName(op.Req, f.Name))
			if !strings.Contains(sf.Tag.Get("json"), "omitempty") {
				needs = true
			}
		}
		if _, ok := op.NewRequest().(Validator); needs && !ok {
			t.Errorf("%s: %s has required fields but no Validate method", op.Name, op.Req)
		}
	}
}

func goName(t reflect.Type, jsonName string) string {
	for _, f := range reflect.VisibleFields(t) {
		n, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if n == jsonName {
			return f.Name
		}
	}
	return ""
}

// TestRoleBeforeAnything: a principal whose role may not take the action
// is refused before the request is validated or anything is read.
func TestRoleBeforeAnything(t *testing.T) {
	a := newApp(t, Options{})
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"viewer builds":       func() error { _, err := a.DatasetBuild(ctx, viewer, DatasetBuildRequest{}); return err },
		"viewer submits":      func() error { _, err := a.JobSubmit(ctx, viewer, JobSubmitRequest{}); return err },
		"agent approves":      func() error { _, err := a.CertApprove(ctx, agent, CertRequest{}); return err },
		"agent executes":      func() error { _, err := a.CertExecute(ctx, agent, CertExecuteRequest{}); return err },
		"agent freezes":       func() error { _, err := a.SceneFreeze(ctx, agent, SceneFreezeRequest{}); return err },
		"engineer tokens":     func() error { _, err := a.TokenCreate(ctx, engineer, TokenCreateRequest{}); return err },
		"engineer retention":  func() error { _, err := a.RetentionApply(ctx, engineer, RetentionRequest{}); return err },
		"viewer ingests":      func() error { _, err := a.IngestSamples(ctx, viewer, IngestSamplesRequest{}); return err },
		"viewer optimises":    func() error { _, err := a.Optimize(ctx, viewer, OptimizeRequest{}); return err },
		"engineer sets chan.": func() error { _, err := a.ChannelSet(ctx, engineer, ChannelSetRequest{}); return err },
	} {
		err := call()
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeForbidden || ae.Field != "role" {
			t.Errorf("%s: %v, want AML_FORBIDDEN on role", name, err)
		}
	}
	// An agent may not promote to production, even with a valid request.
	if _, err := a.ModelPromote(ctx, agent, ModelPromoteRequest{ID: "m", To: core.StageProduction}); core.CodeOf(err) != core.CodeForbidden {
		t.Errorf("agent promotes to production: %v", err)
	}
}

// TestValidation: each bad request is refused by its one rule, with the
// code and the field named.
func TestValidation(t *testing.T) {
	a := newApp(t, Options{})
	ctx := context.Background()
	neg := Duration(-time.Second)
	cases := []struct {
		name, field string
		call        func() error
	}{
		{"run show without id", "id", func() error { _, err := a.RunShow(ctx, admin, RunShowRequest{}); return err }},
		{"ts without node", "node", func() error { _, err := a.TSQuery(ctx, admin, TSQueryRequest{}); return err }},
		{"ts limit too large", "limit", func() error { _, err := a.TSQuery(ctx, admin, TSQueryRequest{Node: "n", Limit: 100_001}); return err }},
		{"ts bucket under 1ms", "bucket", func() error {
			_, err := a.TSQuery(ctx, admin, TSQueryRequest{Node: "n", Bucket: Duration(time.Microsecond)})
			return err
		}},
		{"ingest without line", "line", func() error { _, err := a.IngestSamples(ctx, admin, IngestSamplesRequest{}); return err }},
		{"ingest without samples", "samples", func() error { _, err := a.IngestSamples(ctx, admin, IngestSamplesRequest{Line: "L"}); return err }},
		{"ingest run without product", "run", func() error {
			_, err := a.IngestSamples(ctx, admin, IngestSamplesRequest{Line: "L", Run: "r", Samples: []IngestSample{{Node: "n"}}})
			return err
		}},
		{"ingest sample without node", "samples[0].node", func() error {
			_, err := a.IngestSamples(ctx, admin, IngestSamplesRequest{Line: "L", Samples: []IngestSample{{}}})
			return err
		}},
		{"csv without run", "run", func() error {
			_, err := a.IngestCSV(ctx, admin, IngestCSVRequest{Line: "L", Product: "P", Recipe: "R", Body: strings.NewReader("")})
			return err
		}},
		{"csv bad unit", "unit", func() error {
			_, err := a.IngestCSV(ctx, admin, IngestCSVRequest{Line: "L", Product: "P", Recipe: "R", Run: "r", Unit: []string{"nounit"}, Body: strings.NewReader("")})
			return err
		}},
		{"dataset limit", "maxWindows", func() error { _, err := a.DatasetBuild(ctx, admin, DatasetBuildRequest{MaxWindows: -1}); return err }},
		{"job without dataset", "datasetId", func() error { _, err := a.JobSubmit(ctx, admin, JobSubmitRequest{Trainer: "t"}); return err }},
		{"job without trainer", "trainer", func() error { _, err := a.JobSubmit(ctx, admin, JobSubmitRequest{DatasetID: "d"}); return err }},
		{"job negative timeout", "timeout", func() error {
			_, err := a.JobSubmit(ctx, admin, JobSubmitRequest{DatasetID: "d", Trainer: "t", Timeout: neg})
			return err
		}},
		{"job list limit", "limit", func() error { _, err := a.JobList(ctx, admin, JobListRequest{Limit: -5}); return err }},
		{"logs negative offset", "offset", func() error { _, err := a.JobLogs(ctx, admin, JobLogsRequest{ID: "j", Offset: -1}); return err }},
		{"promote to retired", "to", func() error {
			_, err := a.ModelPromote(ctx, admin, ModelPromoteRequest{ID: "m", To: "retired"})
			return err
		}},
		{"predict without run", "run", func() error { _, err := a.ModelPredict(ctx, admin, ModelPredictRequest{ID: "m"}); return err }},
		{"scene put empty", "scene", func() error { _, err := a.ScenePut(ctx, admin, ScenePutRequest{}); return err }},
		{"scene put unknown preset", "preset", func() error { _, err := a.ScenePut(ctx, admin, ScenePutRequest{Preset: "x"}); return err }},
		{"freeze without hash", "expectHash", func() error {
			_, err := a.SceneFreeze(ctx, admin, SceneFreezeRequest{ID: "s", Version: "1"})
			return err
		}},
		{"snapshot negative age", "maxAge", func() error {
			_, err := a.SnapshotTake(ctx, admin, SnapshotTakeRequest{Scene: "s", MaxAge: neg})
			return err
		}},
		{"trial set and candidate", "set", func() error {
			_, err := a.TrialRun(ctx, admin, TrialRunRequest{Model: "m", Snapshot: "s"})
			return err
		}},
		{"optimize bad mode", "mode", func() error {
			_, err := a.Optimize(ctx, admin, OptimizeRequest{Model: "m", Snapshot: "s", Mode: "fast"})
			return err
		}},
		{"optimize negative candidates", "maxCandidates", func() error {
			_, err := a.Optimize(ctx, admin, OptimizeRequest{Model: "m", Snapshot: "s", MaxCandidates: -1})
			return err
		}},
		{"gate without scene", "scene", func() error { _, err := a.GateEvaluate(ctx, admin, GateEvaluateRequest{Model: "m"}); return err }},
		{"cert ttl too long", "ttl", func() error {
			_, err := a.CertIssue(ctx, admin, CertIssueRequest{Trial: "t", TTL: Duration(48 * time.Hour)})
			return err
		}},
		{"revoke without reason", "reason", func() error { _, err := a.CertRevoke(ctx, admin, CertRevokeRequest{ID: "c"}); return err }},
		{"cert list bad status", "status", func() error { _, err := a.CertList(ctx, admin, CertListRequest{Status: "DONE"}); return err }},
		{"audit head malformed", "expectHead", func() error { _, err := a.AuditVerify(ctx, admin, AuditVerifyRequest{ExpectHead: "x"}); return err }},
		{"token bad role", "role", func() error {
			_, err := a.TokenCreate(ctx, admin, TokenCreateRequest{Name: "n", Role: "boss"})
			return err
		}},
		{"retention negative age", "jobAge", func() error { _, err := a.RetentionApply(ctx, admin, RetentionRequest{JobAge: neg}); return err }},
	}
	for _, tc := range cases {
		err := tc.call()
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeInvalidArgument || ae.Field != tc.field {
			t.Errorf("%s: %v, want AML_INVALID_ARGUMENT on %s", tc.name, err, tc.field)
		}
	}
}

// TestHeavySlots: heavy ops wait for one of the fixed slots, after their
// request is validated, and give up when the caller's context ends.
func TestHeavySlots(t *testing.T) {
	a := newApp(t, Options{HeavyConcurrent: 1})
	release, err := a.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = a.SnapshotTake(ctx, engineer, SnapshotTakeRequest{Scene: "no-such-scene"})
	if core.CodeOf(err) != core.CodeStoreUnavailable || !strings.Contains(err.Error(), "compute slot") {
		t.Fatalf("with the only slot held: %v", err)
	}
	// A bad request is refused at once, slot or not.
	if _, err := a.SnapshotTake(context.Background(), engineer, SnapshotTakeRequest{}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("invalid request while the slot is held: %v", err)
	}
	// A light op does not wait.
	if _, err := a.LineList(context.Background(), viewer, LineListRequest{}); err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := a.SnapshotTake(context.Background(), engineer, SnapshotTakeRequest{Scene: "no-such-scene"}); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("after release: %v", err)
	}
}

// TestLineScope: lists are filtered to the principal's lines, a filter or
// a resource on another line is refused on lineId.
func TestLineScope(t *testing.T) {
	a := newApp(t, Options{})
	ctx := context.Background()
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs = 2
	cfg.RunDuration = 2 * time.Minute
	out := testfix.Injection(t, cfg)
	if _, err := out.Write(ctx, a.d.Store, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.IngestSamples(ctx, admin, IngestSamplesRequest{Line: "other", Product: "p", Recipe: "r", Run: "o1", Samples: []IngestSample{{Node: "o_n", TsMs: 1, Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	scoped := Principal{Name: "sam", Role: auth.RoleEngineer, Lines: []string{"other"}}
	runs, err := a.RunList(ctx, scoped, RunListRequest{})
	if err != nil || runs.Count != 1 || runs.Items[0].ID != "o1" {
		t.Fatalf("scoped runs %+v %v", runs, err)
	}
	all, err := a.RunList(ctx, admin, RunListRequest{})
	if err != nil || all.Count != 3 {
		t.Fatalf("all runs %d %v", all.Count, err)
	}
	simLine := all.Items[0].LineID
	if simLine == "other" {
		simLine = all.Items[1].LineID
	}
	for name, err := range map[string]error{
		"filter": func() error { _, err := a.RunList(ctx, scoped, RunListRequest{Line: simLine}); return err }(),
		"show":   func() error { _, err := a.RunShow(ctx, scoped, RunShowRequest{ID: out.Runs[0].Run.ID}); return err }(),
		"ingest": func() error {
			_, err := a.IngestSamples(ctx, scoped, IngestSamplesRequest{Line: simLine, Samples: []IngestSample{{Node: "x", TsMs: 1}}})
			return err
		}(),
		"other line's node": func() error {
			_, err := a.IngestSamples(ctx, scoped, IngestSamplesRequest{Line: "other", Samples: []IngestSample{{Node: "part_weight", TsMs: 1}}})
			return err
		}(),
	} {
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeForbidden || ae.Field != "lineId" {
			t.Errorf("%s: %v, want AML_FORBIDDEN on lineId", name, err)
		}
	}
}

// TestDurationAndInstant: one spelling each — duration strings (a bare
// number is refused), instants as epoch ms or RFC 3339.
func TestDurationAndInstant(t *testing.T) {
	var d Duration
	if err := json.Unmarshal([]byte(`"1m30s"`), &d); err != nil || d.D() != 90*time.Second {
		t.Fatalf("%v %v", d, err)
	}
	for _, bad := range []string{`90`, `"90"`, `"soon"`, `null`} {
		var x Duration
		if err := json.Unmarshal([]byte(bad), &x); err == nil && bad != `null` {
			t.Errorf("duration %s accepted as %v", bad, x)
		}
	}
	if b, _ := json.Marshal(Duration(15 * time.Minute)); string(b) != `"15m0s"` {
		t.Errorf("marshal %s", b)
	}
	for in, want := range map[string]int64{`1767592800000`: 1767592800000, `"2026-01-05T06:00:00Z"`: 1767592800000, `"2026-01-05T07:00:00.5+01:00"`: 1767592800500} {
		var i Instant
		if err := json.Unmarshal([]byte(in), &i); err != nil || int64(i) != want {
			t.Errorf("instant %s: %d %v", in, i, err)
		}
	}
	var i Instant
	if err := json.Unmarshal([]byte(`"yesterday"`), &i); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Errorf("bad instant: %v", err)
	}
}

// TestParamsRoundTrip: every request of a GET op survives the URL codec
// (ParamValues then SetParam), the one the API server and the CLI's client
// share.
func TestParamsRoundTrip(t *testing.T) {
	from := Instant(1767592800000)
	reqs := []any{
		&TSQueryRequest{Node: "n", Run: "r", From: &from, Limit: 5, Bucket: Duration(2 * time.Second)},
		&RunListRequest{Line: "L", Status: "ended"},
		&JobListRequest{Status: "done", Dataset: "d", Limit: 3},
		&CertListRequest{Line: "L", Status: "ISSUED", Limit: 9},
		&AuditListRequest{After: 7, Limit: 2, Subject: "s"},
		&AuditListRequest{Actor: "alice", Action: "cert.*", From: &from, To: &from, Newest: true, Before: 9},
		&JobLogsRequest{ID: "j", Offset: 10, MaxBytes: 100},
		&SceneShowRequest{ID: "s", Version: "1.0.0"},
		// One value per repetition, commas and all.
		&IngestCSVRequest{Line: "L", IgnoreCol: []string{"temp, C", "x"}, Unit: []string{"flow=m3/h,std"}},
	}
	for _, r := range reqs {
		vals := ParamValues(r, nil)
		back := reflect.New(reflect.TypeOf(r).Elem()).Interface()
		for name, v := range vals {
			if err := SetParam(back, name, v...); err != nil {
				t.Fatalf("%T %s: %v", r, name, err)
			}
		}
		if !reflect.DeepEqual(r, back) {
			t.Errorf("%T: %+v → %v → %+v", r, r, vals, back)
		}
	}
	var r TSQueryRequest
	// An empty value is a parameter not given (…&from=&limit=).
	for _, name := range []string{"from", "limit", "bucket"} {
		if err := SetParam(&r, name, ""); err != nil {
			t.Errorf("empty %s: %v", name, err)
		}
	}
	if r.From != nil || r.Limit != 0 || r.Bucket != 0 {
		t.Errorf("empty values set %+v", r)
	}
	if err := SetParam(&r, "limit", "ten"); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Errorf("bad integer: %v", err)
	}
	if err := SetParam(&r, "nope", "1"); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Errorf("unknown parameter: %v", err)
	}
}

// TestStoredGateReport: the latest gate evaluation answers the stored
// result's report, not an empty one.
func TestStoredGateReport(t *testing.T) {
	raw := json.RawMessage(`{"gateEvalId":"g1","modelId":"m","report":{"profile":"twin-v2","version":2,"passed":true,"checks":[{"id":"G0_ROWS","passed":true}]}}`)
	rep, err := storedGateReport(raw)
	if err != nil || rep.Profile != "twin-v2" || !rep.Passed || len(rep.Checks) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestDocumentsParsedStrictly: a dataset spec and a scene in a request go
// through their own parsers, so their errors keep their codes and fields.
func TestDocumentsParsedStrictly(t *testing.T) {
	var d DatasetBuildRequest
	err := json.Unmarshal([]byte(`{"spec":{"lineId":"L","bogus":1}}`), &d)
	var ae *core.Error
	if !errors.As(err, &ae) || ae.Code != core.CodeSpecInvalid {
		t.Fatalf("spec with an unknown field: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"spec":{},"extra":1}`), &d); err == nil {
		t.Fatal("unknown envelope field accepted")
	}
	var s ScenePutRequest
	if err := json.Unmarshal([]byte(`{"scene":{"sceneId":"s","bogus":true}}`), &s); core.CodeOf(err) != core.CodeContractInvalid {
		t.Fatalf("scene with an unknown field: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"preset":"default-injection"}`), &s); err != nil || s.Preset != PresetDefaultInjection || s.Scene != nil {
		t.Fatalf("preset: %+v %v", s, err)
	}
}
