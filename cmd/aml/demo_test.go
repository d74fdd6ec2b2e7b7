package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/demo"
)

// TestDemo runs the README's main command on a fresh data dir and then
// uses the twin commands on what it left: the certificate verifies, the
// audit log verifies, a second demo on the same dir is refused, and trial,
// optimise (auto mode after a passing gate → precise_search), snapshot with
// a model and gate all work from the command line.
func TestDemo(t *testing.T) {
	d, out := sharedDemo(t)
	var r demo.Result
	mustJSON(t, out, &r)
	t.Logf("demo: %.1f s, gate passed %v %v, improvement %.4g, written %d, certificate %s %s",
		r.Seconds, r.GatePassed, r.GateRejects, r.Improvement, r.Written, r.CertificateID, r.CertStatus)
	if r.DatasetID == "" || r.ModelID == "" || r.TrialID == "" || r.CertificateID == "" {
		t.Fatalf("missing ids: %+v", r)
	}
	if !r.ModelGates || !r.GatePassed || r.Stage != "production" || r.ShadowRuns != 3 {
		t.Fatalf("model gates %v, twin gate %v %v, stage %s, shadow runs %d", r.ModelGates, r.GatePassed, r.GateRejects, r.Stage, r.ShadowRuns)
	}
	if !(r.Improvement > 0) || r.Written < 1 || r.WriteOutcome != "readback-verified" || r.CertStatus != "EXECUTED" || !r.CertVerified {
		t.Fatalf("recommendation: %+v", r)
	}
	if r.TuningMode != "precise_search" {
		t.Errorf("tuning mode after a passing gate: %s", r.TuningMode)
	}
	if _, errs, code := aml(t, "cert", "verify", r.CertificateID, "--data", d); code != 0 {
		t.Fatalf("cert verify: %d %s", code, errs)
	}
	if _, errs, code := aml(t, "audit", "verify", "--data", d); code != 0 {
		t.Fatalf("audit verify: %d %s", code, errs)
	}
	if _, errs, code := aml(t, "demo", "--data", d); code != 1 || !strings.Contains(errs, "AML_CONFLICT") {
		t.Fatalf("a second demo on the same dir: %d %s", code, errs)
	}

	// Twin commands on the demo's data.
	at := r.DemoClock.Add(-5 * time.Minute).Format(time.RFC3339)
	out, errs, code := aml(t, "twin", "snapshot", "take", "--scene", "injection-hold-control", "--model", r.ModelID, "--at", at, "--data", d, "--json")
	if code != 0 {
		t.Fatalf("snapshot take --model: %d %s", code, errs)
	}
	var snap struct {
		Snapshot struct {
			SnapshotID       string             `json:"snapshotId"`
			EstimatorVersion string             `json:"estimatorVersion"`
			StateEstimate    map[string]float64 `json:"stateEstimate"`
			ControlValues    map[string]float64 `json:"controlValues"`
		} `json:"snapshot"`
	}
	mustJSON(t, out, &snap)
	if _, ok := snap.Snapshot.StateEstimate["fill_fraction"]; !ok || !strings.Contains(snap.Snapshot.EstimatorVersion, r.ModelID) {
		t.Fatalf("model-based state estimate missing: %+v", snap.Snapshot)
	}
	hp := snap.Snapshot.ControlValues["hold_pressure"]
	out, errs, code = aml(t, "twin", "trial", "--model", r.ModelID, "--snapshot", snap.Snapshot.SnapshotID,
		"--set", fmt.Sprintf("hold_pressure=%g", hp+1), "--data", d, "--json")
	if code != 0 {
		t.Fatalf("twin trial: %d %s", code, errs)
	}
	var tr amlapp.TrialRunResponse
	mustJSON(t, out, &tr)
	if tr.Trial == nil || tr.Detail == nil || len(tr.Trial.CandidateControlTrajectory) != 60 || tr.Trial.CandidateControlTrajectory[0]["hold_pressure"] != hp+1 {
		t.Fatalf("trial: %+v", tr.Record)
	}
	// Too large a move is recorded as rejected, not refused.
	out, errs, code = aml(t, "twin", "trial", "--model", r.ModelID, "--snapshot", snap.Snapshot.SnapshotID,
		"--set", fmt.Sprintf("hold_pressure=%g", hp+10), "--data", d, "--json")
	mustJSON(t, out, &tr)
	if code != 0 || tr.Record.Passed || tr.Record.RejectCode != "CONTROL_SAFETY" {
		t.Fatalf("large move: %d %s %+v", code, errs, tr.Record)
	}
	if _, errs, code := aml(t, "twin", "trial", "--model", r.ModelID, "--snapshot", snap.Snapshot.SnapshotID, "--set", "no_such=1", "--data", d); code != 1 || !strings.Contains(errs, "AML_INVALID_ARGUMENT") {
		t.Fatalf("unknown control: %d %s", code, errs)
	}
	out, errs, code = aml(t, "twin", "optimize", "--model", r.ModelID, "--snapshot", snap.Snapshot.SnapshotID, "--data", d, "--json")
	if code != 0 {
		t.Fatalf("twin optimize: %d %s", code, errs)
	}
	var opt amlapp.OptimizeResponse
	mustJSON(t, out, &opt)
	if opt.Result == nil || opt.Result.Mode != "precise_search" || opt.Result.Evaluated < 2 {
		t.Fatalf("optimize: %+v", opt.Result)
	}
	out, errs, code = aml(t, "twin", "gate", "--model", r.ModelID, "--scene", "injection-hold-control", "--snapshots", "10", "--data", d)
	if code != 0 || !strings.Contains(out, "G8_SHADOW_RUNS") || !strings.Contains(out, "G6_TRIAL_COUNT") {
		t.Fatalf("twin gate: %d %s\n%s", code, errs, out)
	}
}

// TestDemoLive: aml demo --live runs the recommendation on the simulated
// line served over OPC UA: live ingest without gaps, the approved move
// written over OPC UA and read back, and the part weight closer to its
// target afterwards.
func TestDemoLive(t *testing.T) {
	skipTraining(t, "aml demo --live")
	d := t.TempDir()
	out, errs, code := aml(t, "demo", "--live", "--data", d, "--json")
	if code != 0 {
		t.Fatalf("demo --live: exit %d\n%s", code, errs)
	}
	var r demo.Result
	mustJSON(t, out, &r)
	if r.Live == nil || r.Before == nil || r.After == nil {
		t.Fatalf("no live figures: %s", out)
	}
	t.Logf("live: %d samples ingested (%d read back), %d gaps; weight %.3f → %.3f g, target error %.3f → %.3f g; %d written (%s via %s); %.1f s",
		r.Live.Ingested, r.Live.Backfilled, r.Live.Gaps, r.Before.MeanWeight, r.After.MeanWeight, r.Before.TargetError, r.After.TargetError, r.Written, r.WriteOutcome, r.Writer, r.Seconds)
	if r.Written < 1 || r.Writer != "opcua" || r.WriteOutcome != "readback-verified" || r.Live.LineWrites != r.Written || !r.CertVerified || r.CertStatus != "EXECUTED" {
		t.Fatalf("write: %+v", r)
	}
	if r.Live.Ingested < 1000 || r.Live.Gaps != 0 || r.Before.Samples < 30 || r.After.Samples < 30 {
		t.Fatalf("ingest: %+v before %+v after %+v", r.Live, r.Before, r.After)
	}
	if !(r.After.TargetError < r.Before.TargetError) {
		t.Fatalf("the approved move did not bring the part weight closer to its target: %.3f → %.3f g", r.Before.TargetError, r.After.TargetError)
	}
	if _, errs, code := aml(t, "cert", "verify", r.CertificateID, "--data", d); code != 0 {
		t.Fatalf("cert verify: %d %s", code, errs)
	}
	// The live connector reported its status like aml connect does.
	out, _, _ = aml(t, "connect", "status", "--data", d, "--json")
	var rows []connect.Status
	mustJSON(t, out, &rows)
	if len(rows) != 1 || rows[0].ID != "opcua:"+r.Live.Endpoint || rows[0].State != connect.StateStopped || rows[0].Stored != r.Live.Ingested {
		t.Fatalf("connector status after demo --live: %+v", rows)
	}
}

// demoAnchor: the history starts at 06:00 UTC (sim.DefaultStartMs's time
// of day) whatever the hour, on the latest day that ends the demo's
// timeline (history + two shadow rounds, under 3 h past it) an hour before
// now.
func TestDemoAnchor(t *testing.T) {
	span := 24 * 40 * time.Minute
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for m := 0; m < 48*60; m += 7 {
		now := base.Add(time.Duration(m) * time.Minute)
		a := demo.Anchor(now, span)
		if h, mi, sec := a.Clock(); h != 6 || mi != 0 || sec != 0 || a.Nanosecond() != 0 {
			t.Fatalf("now %v: anchor %v is not at 06:00 UTC", now, a)
		}
		latest := now.Add(-span - 3*time.Hour)
		if a.After(latest) || !a.After(latest.Add(-24*time.Hour)) {
			t.Fatalf("now %v: anchor %v, want the latest 06:00 at or before %v", now, a, latest)
		}
	}
}

// aml demo --trainer: an unknown trainer is a usage error before anything
// is simulated; --trainer narx_mlp@1 runs the whole loop with a NARX twin
// model on the column scene (the gate passes, the certificate is
// executed).
func TestDemoTrainer(t *testing.T) {
	d := t.TempDir()
	if _, errs, code := aml(t, "demo", "--trainer", "static_forest@1", "--data", d); code != 2 || !strings.Contains(errs, "error: AML_USAGE: ") || !strings.Contains(errs, "narx_mlp@1") || !strings.Contains(errs, "neural_state_space@1") {
		t.Fatalf("an unknown trainer: exit %d %s", code, errs)
	}
	if out, errs, code := aml(t, "runs", "list", "--data", d, "--json"); code != 0 || strings.TrimSpace(out) != "[]" && !strings.Contains(out, `"items":[]`) {
		t.Fatalf("after the refusal: %d %s %s", code, errs, out)
	}
	skipTraining(t, "aml demo --trainer narx_mlp@1")
	demoWall = func() time.Time { return time.Now().Add(-2 * time.Minute) }
	defer func() { demoWall = nil }()
	out, errs, code := aml(t, "demo", "--trainer", "narx_mlp@1", "--runs", "16", "--data", t.TempDir(), "--json")
	if code != 0 {
		t.Fatalf("demo --trainer narx_mlp@1: exit %d\n%s", code, errs)
	}
	var r demo.Result
	mustJSON(t, out, &r)
	if !r.GatePassed || r.Stage != "production" || !(r.Improvement > 0) || r.CertStatus != "EXECUTED" || !r.CertVerified || r.WriteOutcome != "readback-verified" {
		t.Fatalf("demo --trainer narx_mlp@1: %+v", r)
	}
}
