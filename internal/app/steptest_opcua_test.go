package app

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
)

// uaTank is the tank line served over OPC UA on loopback (manual
// stepping, the line's own clock from fixed), written and read through
// the governed OPC UA writer the guard uses in production.
type uaTank struct {
	*opcua.Writer
	srv *opcuasrv.Server
}

func (l uaTank) Now() time.Time { return l.srv.Now() }
func (l uaTank) Step() (time.Time, float64) {
	l.srv.Step(1)
	return l.srv.Now(), 0
}

func startUATank(t *testing.T, seed uint64) uaTank {
	t.Helper()
	ctx := context.Background()
	srv, err := opcuasrv.Start(ctx, opcuasrv.Options{Kind: opcuasrv.KindTank, Addr: "127.0.0.1:0", Manual: true, Seed: seed, StartMs: fixed.UnixMilli(), RunSteps: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	m := &opcua.Map{Line: "tank-line"}
	for _, n := range []string{sim.TankHeater, sim.TankFeed, sim.TankLevel} {
		m.Nodes = append(m.Nodes, opcua.MapEntry{OPCUA: srv.NodeID(n), Node: n})
	}
	w, err := opcua.DialWriter(ctx, srv.Endpoint(), m, opcua.Security{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return uaTank{Writer: w, srv: srv}
}

// issueOnUATank plans and issues (as eve, an engineer) a steps test, one
// control at a time, around the setpoints read over OPC UA.
func issueOnUATank(t *testing.T, a *App, l uaTank) string {
	t.Helper()
	ctx := context.Background()
	base := map[string]float64{}
	for _, v := range []string{sim.TankHeater, sim.TankFeed} {
		x, err := l.Read(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		base[v] = x
	}
	plan := StepTestPlanRequest{Scene: "tank-level", Base: base, Hold: Duration(5 * time.Minute), OneAtATime: true}
	p, err := a.StepTestPlan(ctx, engineer, plan)
	if err != nil || len(p.Moves) != 8 || p.Problems != nil {
		t.Fatalf("plan: %v %+v", err, p.Plan)
	}
	r, err := a.StepTestIssue(ctx, engineer, StepTestIssueRequest{StepTestPlanRequest: plan})
	if err != nil || r.Test.Status != contract.CertIssued || len(r.Test.Moves) != len(p.Moves) || r.Test.CreatedBy != engineer.Name {
		t.Fatalf("issue: %v %+v", err, r)
	}
	return r.Test.TestID
}

// TestStepTestFitsTheTankOverOPCUA is issue 21's must-show on the
// simulated OPC UA line: a step test planned and issued on the tank
// served over OPC UA, refused without approval (no write reaches the
// server), approved by a person other than its proposer, executed move by
// move through the guard over the governed OPC UA writer with readback,
// recorded as an identification run, and process_model@1 fitted from it
// within 10 % of the simulator's true gains, time constant and dead times.
func TestStepTestFitsTheTankOverOPCUA(t *testing.T) {
	ctx := context.Background()
	a, st := tankApp(t, 70)
	l := startUATank(t, 11)
	id := issueOnUATank(t, a, l)

	out, err := a.StepTestExecute(ctx, admin, StepTestExecuteRequest{Wait: true, ID: id, Line: l})
	if core.CodeOf(err) != core.CodeWriteDenied || len(out.Execution.Moves) != 1 || out.Execution.Moves[0].Reason != guard.ReasonCertNotApproved {
		t.Fatalf("executed without approval: %v", err)
	}
	if s := l.srv.Stats(); s.Writes != 0 || s.Refusals != 0 {
		t.Fatalf("unapproved test reached the server: %+v", s)
	}
	if _, err := a.StepTestApprove(ctx, Principal{Name: engineer.Name, Role: auth.RoleApprover}, StepTestRequest{ID: id}); core.CodeOf(err) != core.CodeForbidden {
		t.Fatalf("the proposer approved: %v", err)
	}
	bob := Principal{Name: "bob", Role: auth.RoleApprover}
	if r, err := a.StepTestApprove(ctx, bob, StepTestRequest{ID: id}); err != nil || r.Test.ApprovedBy != "bob" {
		t.Fatalf("approve: %v", err)
	}

	// The refused attempt left the line where it was; the next step of
	// the line is the test's start.
	out, err = a.StepTestExecute(ctx, bob, StepTestExecuteRequest{Wait: true, ID: id, Line: l})
	if err != nil || !out.Execution.Completed || out.Fit == nil {
		t.Fatalf("execute: %v %+v", err, out.Execution)
	}
	ex := out.Execution
	if s := l.srv.Stats(); len(ex.Moves) != 8 || s.Writes != 8 || s.Refusals != 0 {
		t.Fatalf("moves %d, server writes %+v", len(ex.Moves), s)
	}
	for i, m := range ex.Moves {
		for v, x := range m.Set {
			if m.Status != guard.OutcomeVerified || m.Readback[v] != x {
				t.Fatalf("move %d not read back over OPC UA: %+v", i, m)
			}
		}
	}
	// Recorded as an identification run, every sample.
	run, err := st.GetRun(ctx, out.RunID)
	if err != nil || run.LineID != "tank-line" || run.EndedMs == nil {
		t.Fatalf("run %+v %v", run, err)
	}
	if n, err := st.CountRunSamples(ctx, run.ID); err != nil || n[sim.TankLevel] != int64(len(ex.Samples)) || n[sim.TankFeed] != int64(len(ex.Samples)) {
		t.Fatalf("run samples %v %v", n, err)
	}
	truth := sim.PlantTruth()
	want := map[string][2]float64{sim.TankHeater: {truth.KHeater, truth.ThetaHeater}, sim.TankFeed: {truth.KFeed, truth.ThetaFeed}}
	if len(out.Fit.Pairs) != 2 {
		t.Fatalf("fitted pairs %+v", out.Fit.Pairs)
	}
	for _, p := range out.Fit.Pairs {
		w := want[p.Input]
		t.Logf("process_model@1 %s: K %.4f (true %.2f, %+.1f %%) τ %.1f s (true %.0f, %+.1f %%) θ %.2f s (true %.0f, %+.1f %%)", p.Input,
			p.K, w[0], 100*(p.K/w[0]-1), p.TauSec, truth.TauSec, 100*(p.TauSec/truth.TauSec-1), p.ThetaSec, w[1], 100*(p.ThetaSec/w[1]-1))
		if math.Abs(p.K-w[0]) > 0.1*math.Abs(w[0]) {
			t.Errorf("%s: gain %.4f, true %.2f", p.Input, p.K, w[0])
		}
		if math.Abs(p.TauSec-truth.TauSec) > 0.1*truth.TauSec {
			t.Errorf("%s: time constant %.1f s, true %.0f", p.Input, p.TauSec, truth.TauSec)
		}
		if math.Abs(p.ThetaSec-w[1]) > 0.1*w[1] {
			t.Errorf("%s: dead time %.2f s, true %.0f", p.Input, p.ThetaSec, w[1])
		}
	}
	// linear_state_space@1 from the same run (its delays from the dead
	// times above, its gains and curves its own).
	ss := out.Fit.StateSpace
	if ss == nil {
		t.Fatalf("no state-space model: %s", out.Fit.StateSpaceError)
	}
	t.Logf("linear_state_space@1: order %d, delays %v samples, free-run RMSE %.4f cm", ss.Order, ss.Delays, ss.RMSE)
	for _, p := range out.Fit.Pairs {
		w := want[p.Input]
		t.Logf("linear_state_space@1 %s: K %.4f (%+.1f %%) dead time %.0f s", p.Input, p.SSK, 100*(p.SSK/w[0]-1), p.SSDeadTimeSec)
		if math.Abs(p.SSK-w[0]) > 0.1*math.Abs(w[0]) || math.Abs(p.SSDeadTimeSec-w[1]) > 0.1*w[1] || len(p.SSStep) != len(out.Fit.StepAtSec) {
			t.Errorf("%s: state-space K %.4f dead time %.0f s", p.Input, p.SSK, p.SSDeadTimeSec)
		}
	}
}

// TestStepTestStoppedByTheLevelOverOPCUA: the level's hard upper limit
// (52 cm) lies below where the feed's down-step takes the tank's level:
// the test over OPC UA stops when the measured level crosses it, with
// AML_WRITE_DENIED, and no write reaches the server after the stop.
func TestStepTestStoppedByTheLevelOverOPCUA(t *testing.T) {
	ctx := context.Background()
	a, _ := tankApp(t, 52)
	l := startUATank(t, 11)
	id := issueOnUATank(t, a, l)
	if _, err := a.StepTestApprove(ctx, Principal{Name: "bob", Role: auth.RoleApprover}, StepTestRequest{ID: id}); err != nil {
		t.Fatal(err)
	}
	out, err := a.StepTestExecute(ctx, admin, StepTestExecuteRequest{Wait: true, ID: id, Line: l})
	ex := out.Execution
	if core.CodeOf(err) != core.CodeWriteDenied || ex.Completed || !strings.Contains(ex.Stopped, "scene limit") || len(ex.Moves) >= 8 {
		t.Fatalf("not stopped: %v %q", err, ex.Stopped)
	}
	last := ex.Samples[len(ex.Samples)-1]
	if last.Values[sim.TankLevel] <= 52 {
		t.Fatalf("stopped at level %v", last.Values[sim.TankLevel])
	}
	t.Logf("stopped after %d moves at %v: %s", len(ex.Moves), last.At.Sub(ex.Start), ex.Stopped)
	if w := l.srv.Stats().Writes; w != len(ex.Moves) {
		t.Fatalf("server writes %d, moves %d", w, len(ex.Moves))
	}
	l.srv.Step(600)
	if w := l.srv.Stats().Writes; w != len(ex.Moves) {
		t.Fatal("written after the stop")
	}
}
