package steptest_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
	"github.com/aml-project/aml/internal/twin/steptest"
)

// uaLine is the simulated injection line served over OPC UA on loopback,
// advanced step by step (Manual), written and read through the OPC UA
// writer the guard uses in production.
type uaLine struct {
	*opcua.Writer
	srv *opcuasrv.Server
}

func (l uaLine) Now() time.Time { return l.srv.Now() }
func (l uaLine) Step() (time.Time, float64) {
	l.srv.Step(1)
	return l.srv.Now(), 0
}

func startUALine(t *testing.T) uaLine {
	t.Helper()
	ctx := context.Background()
	srv, err := opcuasrv.Start(ctx, opcuasrv.Options{Addr: "127.0.0.1:0", Manual: true, Seed: 7, StartMs: start.UnixMilli(), RunSteps: 100000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	m := &opcua.Map{Line: sim.DefaultLineID, Product: sim.DefaultProductID, Recipe: sim.DefaultRecipeID}
	for _, n := range sim.InjectionNodes(sim.DefaultLineID, time.Time{}) {
		m.Nodes = append(m.Nodes, opcua.MapEntry{OPCUA: srv.NodeID(n.ID), Node: n.ID})
	}
	w, err := opcua.DialWriter(ctx, srv.Endpoint(), m, opcua.Security{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	srv.Step(1)
	return uaLine{Writer: w, srv: srv}
}

// TestStepTestOverOPCUA: a step test on the simulated OPC UA line through
// the guard: refused without approval (nothing reaches the line);
// approved, every move written over OPC UA and read back; with the part
// weight's hard range drawn tight around its current value, the live
// weight leaving it stops the test and nothing is written after.
func TestStepTestOverOPCUA(t *testing.T) {
	ctx := context.Background()
	key, err := cert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, approve bool, weightRange [2]float64) (*steptest.Execution, uaLine) {
		l := startUALine(t)
		base, err := l.Read(ctx, sim.NodeHoldPressure)
		if err != nil {
			t.Fatal(err)
		}
		s := contract.DefaultInjectionScene()
		s.WritePolicy.MaxActionsPerRun = 10
		for i := range s.Constraints {
			if s.Constraints[i].Variable == "weight" {
				s.Constraints[i].Min, s.Constraints[i].Max = &weightRange[0], &weightRange[1]
			}
		}
		h, _ := s.Hash()
		if err := s.Freeze("quality-lead", h, start.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		p, err := steptest.Design(s, steptest.Options{Variables: []string{"hold_pressure"}, Base: map[string]float64{"hold_pressure": base}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := steptest.Issue(p, s, steptest.IssueInput{TestID: "st-ua", CreatedBy: "alice", Now: start.Add(-time.Minute)}, key)
		if err != nil {
			t.Fatal(err)
		}
		if approve {
			if err := steptest.Approve(c, twinstore.Approver{Name: "bob", Role: twinstore.RoleApprover}, nil, start); err != nil {
				t.Fatal(err)
			}
		}
		ch := channels{contract.ChannelProfile{ChannelID: "opc", LineID: s.LineID, Profile: contract.ProfileHybridTwin, ControlPolicy: contract.PolicyHITLGoverned}}
		ex, err := steptest.Execute(ctx, steptest.ExecInput{Cert: c, Scene: s, PublicKey: key.Public, Channels: ch, History: &guard.MemoryHistory{},
			Line: l, RunID: "steptest-st-ua", Nodes: map[string]string{"weight": sim.NodePartWeight}})
		if err != nil {
			t.Fatal(err)
		}
		return ex, l
	}
	t.Run("refused without approval", func(t *testing.T) {
		ex, l := run(t, false, [2]float64{31, 34})
		if ex.Completed || len(ex.Moves) != 1 || ex.Moves[0].Reason != guard.ReasonCertNotApproved || l.srv.Stats().Writes != 0 {
			t.Fatalf("moves %+v, line writes %d", ex.Moves, l.srv.Stats().Writes)
		}
	})
	t.Run("executed", func(t *testing.T) {
		ex, l := run(t, true, [2]float64{20, 45})
		if !ex.Completed || len(ex.Moves) != 4 || l.srv.Stats().Writes != 4 {
			t.Fatalf("completed %v stopped %q moves %d line writes %d", ex.Completed, ex.Stopped, len(ex.Moves), l.srv.Stats().Writes)
		}
		for _, m := range ex.Moves {
			if m.Status != guard.OutcomeVerified || m.Readback["hold_pressure"] != m.Set["hold_pressure"] {
				t.Fatalf("move %+v", m)
			}
		}
	})
	t.Run("stopped by the weight limit", func(t *testing.T) {
		l0 := startUALine(t)
		w0, err := l0.Read(ctx, sim.NodePartWeight)
		if err != nil {
			t.Fatal(err)
		}
		ex, l := run(t, true, [2]float64{w0 - 0.3, w0 + 0.3})
		if ex.Completed || !strings.Contains(ex.Stopped, "scene limit") || l.srv.Stats().Writes != len(ex.Moves) || len(ex.Moves) >= 4 {
			t.Fatalf("completed %v stopped %q moves %d line writes %d", ex.Completed, ex.Stopped, len(ex.Moves), l.srv.Stats().Writes)
		}
		t.Logf("weight %.3f g, stopped after %d moves: %s", w0, len(ex.Moves), ex.Stopped)
		l.srv.Step(120)
		if l.srv.Stats().Writes != len(ex.Moves) {
			t.Fatal("written after the stop")
		}
	})
}

// TestStepTestPacedOverOPCUA: the production line adapter (PacedLine:
// the governed OPC UA writer on a clock that waits one sampling period
// per step) runs the tank's step test served over OPC UA — the clock and
// the wait injected, each wait advancing the served tank by as many
// steps — through the guard, every move read back over OPC UA, and the
// fitted process model within 10 % of the tank's truth.
func TestStepTestPacedOverOPCUA(t *testing.T) {
	ctx := context.Background()
	srv, err := opcuasrv.Start(ctx, opcuasrv.Options{Kind: opcuasrv.KindTank, Addr: "127.0.0.1:0", Manual: true, Seed: 11, StartMs: start.UnixMilli(), RunSteps: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	m := &opcua.Map{Line: tankLine}
	for _, n := range []string{sim.TankHeater, sim.TankFeed, sim.TankLevel} {
		m.Nodes = append(m.Nodes, opcua.MapEntry{OPCUA: srv.NodeID(n), Node: n})
	}
	w, err := opcua.DialWriter(ctx, srv.Endpoint(), m, opcua.Security{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	clock, waits := start, 0
	line := &steptest.PacedLine{Writer: w, Period: time.Second, Clock: func() time.Time { return clock },
		Sleep: func(d time.Duration) { clock = clock.Add(d); srv.Step(int(d / time.Second)); waits++ }}

	r := newRig(t, 70, 300)
	if err := steptest.Approve(r.cert, twinstore.Approver{Name: "bob", Role: twinstore.RoleApprover}, nil, start); err != nil {
		t.Fatal(err)
	}
	_, pub := r.key.SigningKey()
	ex, err := steptest.Execute(ctx, steptest.ExecInput{Cert: r.cert, Scene: r.scene, PublicKey: pub, Channels: hitl, History: r.hist, Line: line, RunID: "steptest-st-1"})
	if err != nil || !ex.Completed || len(ex.Moves) != 8 || srv.Stats().Writes != 8 {
		t.Fatalf("execute: %v completed %v stopped %q writes %d", err, ex.Completed, ex.Stopped, srv.Stats().Writes)
	}
	if ex.StepSec != 1 || waits != len(ex.Samples) || !srv.Now().Equal(ex.End) {
		t.Fatalf("step %vs, %d waits for %d samples, line at %v, test ended %v", ex.StepSec, waits, len(ex.Samples), srv.Now(), ex.End)
	}
	fit, err := steptest.Fit(ctx, ex, sim.TankLevel, nil)
	if err != nil {
		t.Fatal(err)
	}
	truth := sim.PlantTruth()
	want := map[string][2]float64{sim.TankFeed: {truth.KFeed, truth.ThetaFeed}, sim.TankHeater: {truth.KHeater, truth.ThetaHeater}}
	for _, p := range fit.Pairs {
		w := want[p.Input]
		t.Logf("%s: K %.4f θ %.2f s τ %.1f s", p.Input, p.K, p.ThetaSec, p.TauSec)
		if math.Abs(p.K-w[0]) > 0.1*math.Abs(w[0]) || math.Abs(p.ThetaSec-w[1]) > 0.1*w[1] || math.Abs(p.TauSec-truth.TauSec) > 0.1*truth.TauSec {
			t.Errorf("%s: K %.4f θ %.2f τ %.1f", p.Input, p.K, p.ThetaSec, p.TauSec)
		}
	}
}

// TestPacedLineCadence: Step waits for the next instant a period after
// the last; when the caller comes late it does not wait and the cadence
// restarts from the late instant.
func TestPacedLineCadence(t *testing.T) {
	clock := start
	var slept []time.Duration
	l := &steptest.PacedLine{Period: 5 * time.Second, Clock: func() time.Time { return clock },
		Sleep: func(d time.Duration) { slept = append(slept, d); clock = clock.Add(d) }}
	at, _ := l.Step() // t0+5
	clock = clock.Add(2 * time.Second)
	at2, _ := l.Step() // waits 3 s: t0+10
	clock = clock.Add(7 * time.Second)
	at3, _ := l.Step() // late (t0+17 > t0+15): no wait, t0+17
	at4, _ := l.Step() // t0+22
	want := []time.Time{start.Add(5 * time.Second), start.Add(10 * time.Second), start.Add(17 * time.Second), start.Add(22 * time.Second)}
	for i, got := range []time.Time{at, at2, at3, at4} {
		if !got.Equal(want[i]) {
			t.Fatalf("step %d at %v, want %v", i, got.Sub(start), want[i].Sub(start))
		}
	}
	if len(slept) != 3 || slept[0] != 5*time.Second || slept[1] != 3*time.Second || slept[2] != 5*time.Second {
		t.Fatalf("slept %v", slept)
	}
}
