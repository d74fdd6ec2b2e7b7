package app

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/testfix"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

// tankApp is an application over a fresh SQLite store with the tank
// line's frozen scene (level hard range [30, levelMax]) and a
// hitl_governed channel.
func tankApp(t *testing.T, levelMax float64) (*App, *sqlite.Store) {
	t.Helper()
	st, dir := testfix.SQLite(t)
	return tankAppOn(t, st, dir, levelMax), st
}

// tankAppOn is tankApp on store st (its key in dir).
func tankAppOn(t *testing.T, st store.Store, dir string, levelMax float64) *App {
	t.Helper()
	ctx := context.Background()
	key, err := cert.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterSigningKey(ctx, key, "ops"); err != nil {
		t.Fatal(err)
	}
	a := New(&service.Deps{Store: st, DataDir: dir, Key: key}, Options{Now: func() time.Time { return fixed }, WallNow: func() time.Time { return fixed }})
	f := func(x float64) *float64 { return &x }
	sc := &contract.SceneContract{
		SchemaVersion: contract.SceneSchemaVersion, CreatedAt: fixed.Add(-48 * time.Hour), CreatedBy: "eve",
		SceneID: "tank-level", SceneVersion: "1.0.0", LineID: "tank-line", ProductID: "tank-water", RecipeID: "tank-level", Phases: []string{"running"},
		Controls: []contract.SceneVariable{
			{ID: sim.TankHeater, Role: contract.RoleControl, PhysicalMeaning: "heater setpoint", Unit: "degC", Min: f(40), Max: f(60), MaxStep: f(4)},
			{ID: sim.TankFeed, Role: contract.RoleControl, PhysicalMeaning: "feed setpoint", Unit: "l/min", Min: f(10), Max: f(20), MaxStep: f(4)},
		},
		Observations: []contract.SceneVariable{{ID: sim.TankLevel, Role: contract.RoleTarget, PhysicalMeaning: "tank level", Unit: "cm", Min: f(30), Max: f(70)}},
		Constraints:  []contract.Constraint{{ID: "level", Kind: contract.KindHardRange, Variable: sim.TankLevel, Min: f(30), Max: f(levelMax)}},
		WritePolicy: contract.WritePolicy{MinNodeIntervalSec: 60, MinLineActionIntervalSec: 60, MaxActionsPerRun: 20,
			MaxDeltaPerAction: map[string]float64{sim.TankHeater: 4, sim.TankFeed: 4}},
		Status: contract.SceneDraft,
	}
	if err := st.PutScene(ctx, sc); err != nil {
		t.Fatal(err)
	}
	h, _ := sc.Hash()
	if _, err := st.FreezeScene(ctx, sc.SceneID, sc.SceneVersion, "quality-lead", h); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ChannelSet(ctx, admin, ChannelSetRequest{Line: "tank-line", Profile: "hybrid_twin", ControlPolicy: contract.PolicyHITLGoverned}); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestStepTestOps: a step test on the plant's tank line end to end
// through the application: issued by an engineer, approval refused to
// the engineer's role, an agent and the proposer, approved by an
// approver; execution refused without the line's connector; executed on
// the live tank (injected clock) through the guard, the fitted
// process model within 10 % of the tank's true gains and dead times;
// executed only once.
func TestStepTestOps(t *testing.T) {
	ctx := context.Background()
	a, st := tankApp(t, 70)
	req := StepTestIssueRequest{StepTestPlanRequest: StepTestPlanRequest{Scene: "tank-level", Base: map[string]float64{sim.TankHeater: 50, sim.TankFeed: 15},
		Hold: Duration(5 * time.Minute), OneAtATime: true}}
	if _, err := a.StepTestIssue(ctx, viewer, req); core.CodeOf(err) != core.CodeForbidden {
		t.Fatalf("a viewer issued: %v", err)
	}
	r, err := a.StepTestIssue(ctx, engineer, req)
	if err != nil || r.Test.Status != contract.CertIssued || len(r.Test.Moves) != 8 {
		t.Fatalf("issue: %v %+v", err, r)
	}
	id := r.Test.TestID
	if out, err := a.StepTestExecute(ctx, admin, StepTestExecuteRequest{Wait: true, ID: id, Line: sim.NewTankLine(11, 1, fixed)}); core.CodeOf(err) != core.CodeWriteDenied ||
		len(out.Execution.Moves) != 1 || out.Execution.Moves[0].Allowed || out.Execution.Moves[0].Reason != "CERT_NOT_APPROVED" {
		t.Fatalf("executed without approval: %v", err)
	}
	proposer := Principal{Name: engineer.Name, Role: auth.RoleApprover}
	for _, p := range []Principal{engineer, agent, proposer} {
		if _, err := a.StepTestApprove(ctx, p, StepTestRequest{ID: id}); core.CodeOf(err) != core.CodeForbidden {
			t.Fatalf("%s (%s) approved: %v", p.Name, p.Role, err)
		}
	}
	bob := Principal{Name: "bob", Role: auth.RoleApprover}
	// The refused attempt is audited and wrote nothing: once approved,
	// the test runs.
	if r, err = a.StepTestApprove(ctx, bob, StepTestRequest{ID: id}); err != nil || r.Test.Status != contract.CertApproved {
		t.Fatalf("approve: %v", err)
	}
	if _, err := a.StepTestExecute(ctx, agent, StepTestExecuteRequest{Wait: true, ID: id, Line: sim.NewTankLine(11, 1, fixed)}); core.CodeOf(err) != core.CodeForbidden {
		t.Fatalf("an agent executed: %v", err)
	}
	if _, err := a.StepTestExecute(ctx, bob, StepTestExecuteRequest{Wait: true, ID: id}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("executed without a line: %v", err)
	}
	out, err := a.StepTestExecute(ctx, bob, StepTestExecuteRequest{Wait: true, ID: id, Line: sim.NewTankLine(11, 1, fixed)})
	if err != nil || !out.Execution.Completed || out.Fit == nil {
		t.Fatalf("execute: %v %+v", err, out)
	}
	truth := sim.PlantTruth()
	for _, p := range out.Fit.Pairs {
		k, th := truth.KHeater, truth.ThetaHeater
		if p.Input == sim.TankFeed {
			k, th = truth.KFeed, truth.ThetaFeed
		}
		if math.Abs(p.K-k) > 0.1*math.Abs(k) || math.Abs(p.ThetaSec-th) > 0.1*th {
			t.Errorf("%s: K %.4f θ %.2f, true %.2f %.0f", p.Input, p.K, p.ThetaSec, k, th)
		}
	}
	// The run is stored as an identification run with every sample.
	run, err := st.GetRun(ctx, out.RunID)
	if err != nil || run.LineID != "tank-line" || run.RecipeID != "tank-level" || run.EndedMs == nil {
		t.Fatalf("run %+v %v", run, err)
	}
	if n, err := st.CountRunSamples(ctx, run.ID); err != nil || n[sim.TankLevel] != int64(len(out.Execution.Samples)) || n[sim.TankHeater] == 0 {
		t.Fatalf("run samples %v %v", n, err)
	}
	if s, err := a.StepTestShow(ctx, viewer, StepTestRequest{ID: id}); err != nil || s.Moves != 8 || s.Refused != 1 || s.Executed == 0 {
		t.Fatalf("show: %v %+v", err, s)
	}
	if _, err := a.StepTestExecute(ctx, bob, StepTestExecuteRequest{Wait: true, ID: id, Line: sim.NewTankLine(11, 1, fixed)}); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("executed twice: %v", err)
	}
}

// TestStepTestRevokeAndList: step tests listed per line within the
// caller's scope; revoked by its proposer or an approver — not by
// another engineer, a viewer, an agent or a caller outside the line —
// and a revoked test is refused by the guard with nothing written.
func TestStepTestRevokeAndList(t *testing.T) {
	ctx := context.Background()
	a, _ := tankApp(t, 70)
	req := StepTestIssueRequest{StepTestPlanRequest: StepTestPlanRequest{Scene: "tank-level", Base: map[string]float64{sim.TankHeater: 50, sim.TankFeed: 15},
		Hold: Duration(5 * time.Minute), OneAtATime: true}}
	var ids []string
	for range 2 {
		r, err := a.StepTestIssue(ctx, engineer, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Test.TestID)
	}
	bob := Principal{Name: "bob", Role: auth.RoleApprover}
	if _, err := a.StepTestApprove(ctx, bob, StepTestRequest{ID: ids[0]}); err != nil {
		t.Fatal(err)
	}
	l, err := a.StepTestList(ctx, viewer, StepTestListRequest{Line: "tank-line"})
	if err != nil || len(l.Items) != 2 || l.Items[0].Test.TestID != ids[1] || l.Items[1].Test.Status != contract.CertApproved {
		t.Fatalf("list: %v %+v", err, l)
	}
	outside := Principal{Name: "olga", Role: auth.RoleApprover, Lines: []string{"other-line"}}
	if _, err := a.StepTestList(ctx, outside, StepTestListRequest{Line: "tank-line"}); core.CodeOf(err) != core.CodeForbidden {
		t.Fatalf("listed outside the scope: %v", err)
	}
	if l, err := a.StepTestList(ctx, outside, StepTestListRequest{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("unscoped list outside the line: %v %+v", err, l.Items)
	}
	for _, p := range []Principal{{Name: "fred", Role: auth.RoleEngineer}, viewer, agent, {Name: engineer.Name, Role: auth.RoleAgent}, outside} {
		if _, err := a.StepTestRevoke(ctx, p, StepTestRevokeRequest{ID: ids[0], Reason: "no"}); core.CodeOf(err) != core.CodeForbidden {
			t.Fatalf("%s (%s) revoked: %v", p.Name, p.Role, err)
		}
	}
	if _, err := a.StepTestRevoke(ctx, engineer, StepTestRevokeRequest{ID: ids[0]}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("revoked without a reason: %v", err)
	}
	// The proposer revokes the approved test; an approver the other one.
	r, err := a.StepTestRevoke(ctx, engineer, StepTestRevokeRequest{ID: ids[0], Reason: "the tank is being cleaned"})
	if err != nil || r.Test.Status != contract.CertRevoked || r.Test.RevokedBy != engineer.Name {
		t.Fatalf("proposer's revoke: %v %+v", err, r)
	}
	if r, err := a.StepTestRevoke(ctx, bob, StepTestRevokeRequest{ID: ids[1], Reason: "superseded"}); err != nil || r.Test.RevokedBy != "bob" {
		t.Fatalf("approver's revoke: %v", err)
	}
	if _, err := a.StepTestRevoke(ctx, bob, StepTestRevokeRequest{ID: ids[0], Reason: "again"}); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("revoked twice: %v", err)
	}
	line := sim.NewTankLine(11, 1, fixed)
	out, err := a.StepTestExecute(ctx, bob, StepTestExecuteRequest{Wait: true, ID: ids[0], Line: line})
	if core.CodeOf(err) != core.CodeWriteDenied || len(out.Execution.Moves) != 1 || out.Execution.Moves[0].Reason != "CERT_REVOKED" {
		t.Fatalf("revoked test executed: %v %+v", err, out.Execution)
	}
	if v, _ := line.Read(ctx, sim.TankHeater); v != 50 {
		t.Fatalf("heater %v written", v)
	}
	if _, err := a.StepTestApprove(ctx, bob, StepTestRequest{ID: ids[1]}); err == nil {
		t.Fatal("a revoked test was approved")
	}
}

// TestStepTestComparedWithTheRegisteredModel: process_model@1 trained
// (by the job runner) on the run a first step test recorded, registered,
// and named as the previous model of a second step test: the report holds
// its step responses and gains beside the new fits, and they agree.
func TestStepTestComparedWithTheRegisteredModel(t *testing.T) {
	if testing.Short() {
		t.Skip("two step tests and a training job")
	}
	ctx := context.Background()
	a, st := tankApp(t, 70)
	bob := Principal{Name: "bob", Role: auth.RoleApprover}
	req := StepTestIssueRequest{StepTestPlanRequest: StepTestPlanRequest{Scene: "tank-level", Base: map[string]float64{sim.TankHeater: 50, sim.TankFeed: 15},
		Hold: Duration(5 * time.Minute), OneAtATime: true}}
	execute := func(line *sim.TankLine, previous string) StepTestExecuteResponse {
		r, err := a.StepTestIssue(ctx, engineer, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.StepTestApprove(ctx, bob, StepTestRequest{ID: r.Test.TestID}); err != nil {
			t.Fatal(err)
		}
		out, err := a.StepTestExecute(ctx, bob, StepTestExecuteRequest{Wait: true, ID: r.Test.TestID, Line: line, Previous: previous})
		if err != nil || out.Fit == nil || out.RunID == "" {
			t.Fatalf("execute: %v %+v", err, out)
		}
		return out
	}
	first := execute(sim.NewTankLine(11, 1, fixed), "")

	// A dataset of the recorded run and process_model@1 trained on it.
	spec, err := dataset.ParseSpec([]byte(`{"lineId":"tank-line","productId":"tank-water","recipeId":"tank-level","nodes":[
		{"nodeId":"heater_sp","role":"control","unitContract":{"unit":"degC","modelUnit":"degC","scale":1,"offset":0}},
		{"nodeId":"feed_sp","role":"control","unitContract":{"unit":"l/min","modelUnit":"l/min","scale":1,"offset":0}},
		{"nodeId":"level","role":"target","unitContract":{"unit":"cm","modelUnit":"cm","scale":1,"offset":0}}],
		"beatMs":1000,"historySteps":5,"horizonSteps":10,"stride":5,"split":{"mode":"time_blocks","seed":1},"purpose":"mpc_surrogate"}`))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dataset.Build(ctx, st, spec, dataset.Options{DataDir: a.d.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Manifest.Runs) != 1 || ds.Manifest.Runs[0].RunID != first.RunID {
		t.Fatalf("dataset runs %+v", ds.Manifest.Runs)
	}
	runner := jobs.NewRunner(st, jobs.Options{DataDir: a.d.DataDir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: events.New(),
		Now: func() time.Time { return fixed }})
	j, err := runner.Submit(ctx, jobs.SubmitRequest{DatasetID: ds.Dataset.ID, TrainerRef: "process_model@1", Seed: 1, Params: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Run(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
	if j, err = st.GetJob(ctx, j.ID); err != nil || j.Status != core.JobDone {
		t.Fatalf("training: %v %+v", err, j)
	}

	// The second test, two hours later on a fresh tank, against it.
	second := execute(sim.NewTankLine(12, 1, fixed.Add(2*time.Hour)), j.ModelID)
	f := second.Fit
	if f.Previous != j.ModelID || f.PreviousError != "" {
		t.Fatalf("previous %q: %s", f.Previous, f.PreviousError)
	}
	for _, p := range f.Pairs {
		t.Logf("%s: fitted K %.4f, registered model's K %.4f (its step at 60 s %.4f, the new fit's %.4f)", p.Input, p.K, p.PrevK, p.PrevStep[6], p.Step[6])
		if math.Abs(p.PrevK-p.K) > 0.05*math.Abs(p.K) || len(p.PrevStep) != len(p.Step) || p.PrevStep[0] != 0 {
			t.Errorf("%s: registered model's K %.4f, fitted %.4f", p.Input, p.PrevK, p.K)
		}
		for i := range p.Step {
			if math.Abs(p.PrevStep[i]-p.Step[i]) > 0.05*math.Abs(p.K) {
				t.Errorf("%s at %gs: registered model's step %.4f, fitted %.4f", p.Input, f.StepAtSec[i], p.PrevStep[i], p.Step[i])
			}
		}
	}
	// A model that does not exist, or is not of the line, is reported,
	// not fatal: the fit stands.
	third := execute(sim.NewTankLine(13, 1, fixed.Add(4*time.Hour)), "no-such-model")
	if third.Fit.PreviousError == "" || third.Fit.Pairs[0].PrevStep != nil || third.Fit.Pairs[0].K == 0 {
		t.Fatalf("unknown previous model: %+v", third.Fit)
	}
}
