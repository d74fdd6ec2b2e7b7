package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

// lwT0 is the application's clock in the line-writer tests (the
// simulated tank line's clock starts there too).
var lwT0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// lineWriterEnv is a server over real HTTP whose operator configured, in
// a line-writers file, the injection line and the tank line, each served
// over OPC UA on loopback by the simulator (manual stepping). The tank's
// step tests are paced on the simulated line's clock: waiting a sampling
// period steps the line by it.
type lineWriterEnv struct {
	*env
	inj, tank *opcuasrv.Server
	st        *sqlite.Store
	key       *cert.KeyPair
	lines     *opcua.LineWriters
}

func newLineWriterEnv(t *testing.T) *lineWriterEnv {
	t.Helper()
	ctx := context.Background()
	st, dir := testfix.SQLite(t)
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "ops"); err != nil {
		t.Fatal(err)
	}
	inj, err := opcuasrv.Start(ctx, opcuasrv.Options{Addr: "127.0.0.1:0", Manual: true, Initial: map[string]float64{sim.NodeHoldPressure: 65, sim.NodeHoldTime: 8, sim.NodeMeltTemperatureSetpoint: 245}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inj.Close() })
	tank, err := opcuasrv.Start(ctx, opcuasrv.Options{Kind: opcuasrv.KindTank, Addr: "127.0.0.1:0", Manual: true, Seed: 11, StartMs: lwT0.UnixMilli(), RunSteps: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tank.Close() })

	// The operator's files: one map per line and the line-writers file.
	cfg := t.TempDir()
	writeMap := func(name, line, product, recipe string, srv *opcuasrv.Server, nodes ...string) {
		m := map[string]any{"line": line, "product": product, "recipe": recipe}
		var ns []map[string]string
		for _, n := range nodes {
			ns = append(ns, map[string]string{"opcua": srv.NodeID(n), "node": n})
		}
		m["nodes"] = ns
		b, _ := json.Marshal(m)
		if err := os.WriteFile(filepath.Join(cfg, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeMap("injection.json", simLine, "P", "R", inj, sim.NodeHoldPressure, sim.NodeHoldTime, sim.NodeMeltTemperatureSetpoint, sim.NodePartWeight)
	writeMap("tank.json", "tank-line", "tank-water", "tank-level", tank, sim.TankHeater, sim.TankFeed, sim.TankLevel)
	file := filepath.Join(cfg, "line-writers.json")
	doc := `{"lines":[{"line":"` + simLine + `","endpoint":"` + inj.Endpoint() + `","map":"injection.json"},
		{"line":"tank-line","endpoint":"` + tank.Endpoint() + `","map":"tank.json","sample":"5s"}]}`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err := opcua.LoadLineWriters(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lines.Close() })

	d := &service.Deps{Store: st, DataDir: dir, Key: key}
	clock := func() time.Time { return lwT0 }
	a := app.New(d, app.Options{Now: clock, WallNow: clock, LineWriters: lines,
		LineClock: tank.Now, LineSleep: func(p time.Duration) { tank.Step(int(p / time.Second)) }})
	s := NewServer(d, Options{App: a, RatePerSec: -1})
	srv := httptest.NewServer(s)
	t.Cleanup(func() { s.CloseStreams(); srv.Close() })
	e := &lineWriterEnv{env: &env{t: t, srv: srv, s: s, d: d, dir: dir, tok: map[string]string{}}, inj: inj, tank: tank, st: st, key: key, lines: lines}
	tk := auth.NewTokens(st.SQL())
	for name, nt := range map[string]auth.NewToken{
		"engineer": {Name: "erin", Role: auth.RoleEngineer},
		"approver": {Name: "ada", Role: auth.RoleApprover},
		"tankonly": {Name: "olga", Role: auth.RoleApprover, Lines: []string{"tank-line"}},
	} {
		_, secret, err := tk.Create(ctx, "test", nt)
		if err != nil {
			t.Fatal(err)
		}
		e.tok[name] = secret
	}
	e.seedInjection(t)
	e.seedTank(t)
	return e
}

// seedInjection stores the injection line's frozen default scene, a
// model row, the default objective, its hybrid_twin / hitl_governed
// channel and an active run.
func (e *lineWriterEnv) seedInjection(t *testing.T) {
	ctx := context.Background()
	st := e.st
	sc := contract.DefaultInjectionScene()
	if err := st.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	h, _ := sc.Hash()
	if _, err := st.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, "quality-lead", h); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: simLine, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/ds", SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind, artifact_path, artifact_hash, created_at, stage_changed_at)
		VALUES ('hybrid-1','job-1','ds',?, 'P','R','mpc_surrogate','hybrid_residual@1','candidate','aml.hybrid/1','models/hybrid-1',?,1,1)`, simLine, strings.Repeat("c", 64)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutObjective(ctx, contract.DefaultInjectionObjective()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetChannel(ctx, contract.ChannelRecord{LineID: simLine, Profile: contract.ProfileHybridTwin, ControlPolicy: contract.PolicyHITLGoverned}, "ops"); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, core.Run{ID: "run-1", LineID: simLine, ProductID: "P", RecipeID: "R", StartedMs: 1, Status: core.RunActive}); err != nil {
		t.Fatal(err)
	}
}

// seedTank stores the tank line's frozen scene and its channel.
func (e *lineWriterEnv) seedTank(t *testing.T) {
	ctx := context.Background()
	f := func(x float64) *float64 { return &x }
	sc := &contract.SceneContract{
		SchemaVersion: contract.SceneSchemaVersion, CreatedAt: lwT0.Add(-48 * time.Hour), CreatedBy: "eve",
		SceneID: "tank-level", SceneVersion: "1.0.0", LineID: "tank-line", ProductID: "tank-water", RecipeID: "tank-level", Phases: []string{"running"},
		Controls: []contract.SceneVariable{
			{ID: sim.TankHeater, Role: contract.RoleControl, PhysicalMeaning: "heater setpoint", Unit: "degC", Min: f(40), Max: f(60), MaxStep: f(4)},
			{ID: sim.TankFeed, Role: contract.RoleControl, PhysicalMeaning: "feed setpoint", Unit: "l/min", Min: f(10), Max: f(20), MaxStep: f(4)},
		},
		Observations: []contract.SceneVariable{{ID: sim.TankLevel, Role: contract.RoleTarget, PhysicalMeaning: "tank level", Unit: "cm", Min: f(30), Max: f(70)}},
		Constraints:  []contract.Constraint{{ID: "level", Kind: contract.KindHardRange, Variable: sim.TankLevel, Min: f(30), Max: f(70)}},
		WritePolicy: contract.WritePolicy{MinNodeIntervalSec: 60, MinLineActionIntervalSec: 60, MaxActionsPerRun: 20,
			MaxDeltaPerAction: map[string]float64{sim.TankHeater: 4, sim.TankFeed: 4}},
		Status: contract.SceneDraft,
	}
	if err := e.st.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	h, _ := sc.Hash()
	if _, err := e.st.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, "quality-lead", h); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetChannel(ctx, contract.ChannelRecord{LineID: "tank-line", Profile: contract.ProfileHybridTwin, ControlPolicy: contract.PolicyHITLGoverned}, "ops"); err != nil {
		t.Fatal(err)
	}
}

// certify stores a snapshot at the line's setpoints, a passing trial one
// step from them, and issues its certificate as alice (not approved).
func (e *lineWriterEnv) certify(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	at := lwT0.Add(-5 * time.Second)
	nominal := map[string]float64{sim.NodeHoldPressure: 65, sim.NodeHoldTime: 8, sim.NodeMeltTemperatureSetpoint: 245}
	step0 := map[string]float64{sim.NodeHoldPressure: 66, sim.NodeHoldTime: 8.5, sim.NodeMeltTemperatureSetpoint: 246}
	s := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: at, CreatedBy: "twin-runtime", SnapshotID: "snap-" + name,
		SceneID: "injection-hold-control", SceneVersion: "1.0.0", LineID: simLine, Phase: "holding", CapturedAt: at,
		DAQWatermark: at.UnixMilli(), ControlValues: nominal, DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, EstimatorVersion: "last-valid@1"}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := e.st.PutSnapshot(ctx, s, false); err != nil {
		t.Fatal(err)
	}
	tr := &contract.VirtualTrial{
		SchemaVersion: contract.TrialSchemaVersion, CreatedAt: lwT0.Add(-3 * time.Second), CreatedBy: "twin-runtime",
		TrialID: "trial-" + name, SnapshotID: "snap-" + name, ModelID: "hybrid-1", ObjectiveID: "weight-quality",
		CandidateControlTrajectory: []map[string]float64{step0, step0},
		Uncertainty:                contract.Uncertainty{MaxStd: 0.1, Coverage: 0.92, EnsembleSize: 5},
		OutOfDistribution:          contract.OutOfDistribution{Distance: 0.4, Disagreement: 0.05, Accepted: true},
		ConstraintResults: []contract.ConstraintResult{
			{ID: "weight", Passed: true, Detail: "ok"}, {ID: "flash_rate", Passed: true, Detail: "ok"},
			{ID: "sink_rate", Passed: true, Detail: "ok"}, {ID: "pressure", Passed: true, Detail: "ok"},
			{ID: "temperature", Passed: true, Detail: "ok"},
		},
		BaselineComparison: contract.BaselineComparison{BaselineCost: 1, CandidateCost: 0.6, Improvement: 0.4},
	}
	if _, err := e.st.PutTrial(ctx, tr, contract.TrialManual, ""); err != nil {
		t.Fatal(err)
	}
	r, err := e.st.IssueCertificate(ctx, "trial-"+name, "alice", e.key, 15*time.Minute, lwT0.Add(-2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return r.Cert.RecommendationID
}

// TestLineWriterAttacks are the attacker's moves against the server's
// line writers, each failing with nothing written to either line: a
// request naming an endpoint, a map, a file or a live line (unknown
// fields, refused before anything runs); a caller scoped to the tank
// line executing the injection line's certificate; an unapproved
// certificate.
func TestLineWriterAttacks(t *testing.T) {
	e := newLineWriterEnv(t)
	id := e.certify(t, "a")
	for _, body := range []string{
		`{"endpoint":"opc.tcp://10.9.9.9:4840"}`,
		`{"map":"/etc/passwd"}`,
		`{"writer":{"endpoint":"opc.tcp://10.9.9.9:4840","map":"/tmp/evil.json"}}`,
		`{"line":"tank-line","program":"/bin/sh"}`,
	} {
		r := e.want(e.do("approver", "POST", "/api/v1/certificates/"+id+"/execute", []byte(body)), 400, core.CodeInvalidArgument)
		if !strings.Contains(string(r.body), "unknown field") {
			t.Fatalf("%s: %s", body, r.body)
		}
		e.want(e.do("approver", "POST", "/api/v1/steptests/st-x/execute", []byte(body)), 400, core.CodeInvalidArgument)
	}
	// Not approved: the guard refuses before the line is touched.
	r := e.want(e.do("approver", "POST", "/api/v1/certificates/"+id+"/execute", nil), 403, core.CodeWriteDenied)
	if !strings.Contains(string(r.body), guard.ReasonCertNotApproved) {
		t.Fatalf("unapproved: %s", r.body)
	}
	e.want(e.do("approver", "POST", "/api/v1/certificates/"+id+"/approve", nil), 200, "")
	// A caller of the tank line only cannot reach the injection line's
	// writer, approved certificate or not.
	e.want(e.do("tankonly", "POST", "/api/v1/certificates/"+id+"/execute", nil), 403, core.CodeForbidden)
	if s, s2 := e.inj.Stats(), e.tank.Stats(); s.Writes != 0 || s2.Writes != 0 {
		t.Fatalf("an attack wrote: injection %+v, tank %+v", s, s2)
	}
}

// TestCertExecuteThroughServerLineWriter: an approved certificate
// executed through the API is written to the line's OPC UA server (the
// writer the operator configured for the line) and read back; the line's
// setpoints moved, the certificate is EXECUTED. A server without a
// writer for the line keeps today's behaviour: the recording writer,
// nothing reaching the line.
func TestCertExecuteThroughServerLineWriter(t *testing.T) {
	e := newLineWriterEnv(t)
	id := e.certify(t, "a")
	e.want(e.do("approver", "POST", "/api/v1/certificates/"+id+"/approve", nil), 200, "")
	var res govern.Result
	e.want(e.do("approver", "POST", "/api/v1/certificates/"+id+"/execute", nil), 200, "").json(t, &res)
	if !res.Executed || res.Status != guard.OutcomeVerified || res.Written() != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, m := range res.Writes {
		if !m.Verified || m.Readback != m.To {
			t.Errorf("move %+v not read back", m)
		}
	}
	v := e.inj.Values()
	if v[sim.NodeHoldPressure] != 66 || v[sim.NodeHoldTime] != 8.5 || v[sim.NodeMeltTemperatureSetpoint] != 246 || e.inj.Stats().Writes != 3 {
		t.Fatalf("line after the write: %v, %+v", v, e.inj.Stats())
	}
	// Executed once.
	e.want(e.do("approver", "POST", "/api/v1/certificates/"+id+"/execute", nil), 403, core.CodeWriteDenied)
	if e.inj.Stats().Writes != 3 {
		t.Fatalf("second execution wrote: %+v", e.inj.Stats())
	}

}

// TestLineWithoutWriterAsToday: the same store served by a process
// whose operator configured a writer for another line only: the
// injection line's certificate is executed as today, with the recording
// writer (nothing reaches either line), and a step test on the tank line
// is refused, as today.
func TestLineWithoutWriterAsToday(t *testing.T) {
	e := newLineWriterEnv(t)
	only, err := opcua.NewLineWriters(opcua.LineConfig{Line: "other-line", Endpoint: e.tank.Endpoint(), Map: &opcua.Map{Line: "other-line", Product: "tank-water", Recipe: "tank-level",
		Nodes: []opcua.MapEntry{{OPCUA: e.tank.NodeID(sim.TankHeater), Node: sim.TankHeater}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = only.Close() }()
	clock := func() time.Time { return lwT0 }
	s2 := NewServer(e.d, Options{App: app.New(e.d, app.Options{Now: clock, WallNow: clock, LineWriters: only}), RatePerSec: -1})
	hs := httptest.NewServer(s2)
	defer hs.Close()
	e2 := &env{t: t, srv: hs, s: s2, d: e.d, tok: e.tok}
	id2 := e.certify(t, "a")
	e2.want(e2.do("approver", "POST", "/api/v1/certificates/"+id2+"/approve", nil), 200, "")
	var res govern.Result
	e2.want(e2.do("approver", "POST", "/api/v1/certificates/"+id2+"/execute", nil), 200, "").json(t, &res)
	if !res.Executed || res.Written() != 3 || e.inj.Stats().Writes != 0 || e.tank.Stats().Writes != 0 {
		t.Fatalf("recording fallback: %+v; injection %+v tank %+v", res, e.inj.Stats(), e.tank.Stats())
	}
	e2.want(e2.do("approver", "POST", "/api/v1/steptests/"+e.issueTankTest(t, e2)+"/execute", nil), 400, core.CodeInvalidArgument)

}

// issueTankTest plans and issues (as erin) a steps test on the tank, one
// control at a time around the setpoints the tank's server holds.
func (e *lineWriterEnv) issueTankTest(t *testing.T, via *env) string {
	t.Helper()
	v := e.tank.Values()
	req := map[string]any{"scene": "tank-level", "hold": "5m", "oneAtATime": true,
		"base": map[string]float64{sim.TankHeater: v[sim.TankHeater], sim.TankFeed: v[sim.TankFeed]}}
	var plan struct {
		Moves    []any
		Problems any
	}
	via.want(via.do("engineer", "POST", "/api/v1/steptests/plan", req), 200, "").json(t, &plan)
	if len(plan.Moves) != 8 || plan.Problems != nil {
		t.Fatalf("plan %+v", plan)
	}
	var issued struct {
		Test struct{ TestID, Status, CreatedBy string }
	}
	via.want(via.do("engineer", "POST", "/api/v1/steptests", req), 201, "").json(t, &issued)
	if issued.Test.Status != string(contract.CertIssued) || issued.Test.CreatedBy != "erin" {
		t.Fatalf("issue %+v", issued)
	}
	return issued.Test.TestID
}

// TestStepTestThroughServerLineWriter: a step test through the API on
// the tank line the server's operator configured: planned and issued by
// an engineer, refused without approval with nothing reaching the OPC UA
// server (wait: the call answers with the refusal), refused to the
// proposer's approval, approved by another person, started in the
// background (the call answers at once, status running), executed move
// by move over OPC UA with readback on the line's clock while the client
// follows it with GET /steptests/{id}, and recorded as an identification
// run.
func TestStepTestThroughServerLineWriter(t *testing.T) {
	e := newLineWriterEnv(t)
	id := e.issueTankTest(t, e.env)
	type execution struct {
		Moves []struct {
			Reason, Status string
			Set, Readback  map[string]float64
		}
		Samples   []any
		Completed bool
	}
	type execResp struct {
		Status    string
		Execution *execution
		RunID     string
	}
	var refused struct{ Result execResp }
	r := e.want(e.do("approver", "POST", "/api/v1/steptests/"+id+"/execute", map[string]any{"wait": true}), 403, core.CodeWriteDenied)
	r.json(t, &refused)
	out := refused.Result
	if out.Status != "failed" || out.Execution == nil || len(out.Execution.Moves) != 1 || out.Execution.Moves[0].Reason != guard.ReasonCertNotApproved {
		t.Fatalf("unapproved: %+v %s", out, r.body)
	}
	if s := e.tank.Stats(); s.Writes != 0 || s.Refusals != 0 {
		t.Fatalf("an unapproved test reached the line: %+v", s)
	}
	// erin proposed it; an engineer's token cannot approve anyway, and
	// ada (another person, an approver) can.
	e.want(e.do("engineer", "POST", "/api/v1/steptests/"+id+"/approve", nil), 403, core.CodeForbidden)
	e.want(e.do("approver", "POST", "/api/v1/steptests/"+id+"/approve", nil), 200, "")

	var started struct {
		Status    string
		Execution *execution
		Test      struct {
			Progress struct{ Status, Stage string }
		}
	}
	e.want(e.do("approver", "POST", "/api/v1/steptests/"+id+"/execute", nil), 200, "").json(t, &started)
	if started.Status != "running" || started.Execution != nil || started.Test.Progress.Status != "running" {
		t.Fatalf("start: %+v", started)
	}
	type progress struct {
		Status, Stage string
		Planned       int
		Written       int
		Result        *execResp
		Error         *struct{ Code string }
	}
	var show struct{ Progress progress }
	for i := 0; ; i++ {
		e.want(e.do("approver", "GET", "/api/v1/steptests/"+id, nil), 200, "").json(t, &show)
		if show.Progress.Status != "running" {
			break
		}
		if i == 6000 {
			t.Fatalf("still running: %+v", show.Progress)
		}
		time.Sleep(10 * time.Millisecond)
	}
	pr := show.Progress
	if pr.Status != "done" || pr.Stage != "stored" || pr.Planned != 8 || pr.Written != 8 || pr.Error != nil || pr.Result == nil || pr.Result.Execution == nil {
		t.Fatalf("after the end: %+v", pr)
	}
	ex := pr.Result.Execution
	if !ex.Completed || len(ex.Moves) != 8 || e.tank.Stats().Writes != 8 || ex.Samples != nil {
		t.Fatalf("execute: %d moves, completed %v, server %+v", len(ex.Moves), ex.Completed, e.tank.Stats())
	}
	for i, m := range ex.Moves {
		for v, x := range m.Set {
			if m.Status != guard.OutcomeVerified || m.Readback[v] != x {
				t.Fatalf("move %d not read back over OPC UA: %+v", i, m)
			}
		}
	}
	run, err := e.st.GetRun(context.Background(), pr.Result.RunID)
	if err != nil || run.LineID != "tank-line" || run.EndedMs == nil {
		t.Fatalf("run %+v %v", run, err)
	}
	if n, err := e.st.CountRunSamples(context.Background(), run.ID); err != nil || n[sim.TankLevel] == 0 || n[sim.TankLevel] != n[sim.TankHeater] {
		t.Fatalf("run samples %v %v", n, err)
	}
	// Executed once.
	e.want(e.do("approver", "POST", "/api/v1/steptests/"+id+"/execute", nil), 409, core.CodeConflict)
}
