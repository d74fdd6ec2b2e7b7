package benefit

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
)

func study(t *testing.T, o Options) *Result {
	t.Helper()
	o.Store, o.DataDir = studyStore(t)
	o.Trainers = jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats())
	o.Logf = t.Logf
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(r, "", " ")
	if p := os.Getenv("AML_BENEFIT_OUT"); p != "" {
		_ = os.WriteFile(p, b, 0o644)
	}
	return r
}

// TestBenefitWearingLine is the must-show of the benefit study: on the
// wearing line over 60 runs the supervised twin (envelope mode) achieves
// at least 80 % of the oracle's reduction of mean |run-mean part weight −
// target| relative to the fixed recipe, with no hard-constraint violation
// and no write outside the envelope (every write through envelope.Cycle,
// the write guard and the audit log), and the recalibration trigger fires
// on the drift.
func TestBenefitWearingLine(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the hybrid twin and runs 4 × 60 simulated runs")
	}
	runs := 60
	if v, err := strconv.Atoi(os.Getenv("AML_BENEFIT_RUNS")); err == nil {
		runs = v
	}
	r := study(t, Options{Runs: runs, Wear: true})
	for _, m := range r.Modes {
		t.Logf("%-9s mae %.4f inSpec %.3f viol %d certs %d appr %d writes %d moves %d audited %d held %d stops %v denials %v triggers %d recal %d refused %d maxDrift %.3f", m.Name, m.MeanAbsError, m.InSpecFraction, m.Violations, m.Certificates, m.Approvals, m.Writes, m.Moves, m.AuditedMoves, m.Held, m.Stops, m.Denials, m.RecalibrationTriggers, m.Recalibrations, m.Refused, m.MaxDrift)
	}
	t.Logf("envelope share %.3f, per_move share %.3f, noise floor %.4f", r.EnvelopeShare, r.PerMoveShare, r.NoiseFloor)
	env := r.Mode(ModeEnvelope)
	if !(r.EnvelopeShare >= 0.8) {
		t.Errorf("the envelope mode reaches %.1f %% of the oracle's reduction, want ≥ 80 %%", 100*r.EnvelopeShare)
	}
	if env.Violations != 0 || env.OutsideEnvelope != 0 {
		t.Errorf("envelope: %d violations, %d writes outside the envelope", env.Violations, env.OutsideEnvelope)
	}
	// every envelope write went through envelope.Cycle and the guard and
	// is in the audit log; every envelope was approved by a person
	if env.Writes == 0 || env.Moves < env.Writes || env.AuditedMoves != env.Moves {
		t.Errorf("envelope: %d writes, %d moves, %d audited moves", env.Writes, env.Moves, env.AuditedMoves)
	}
	stops := 0
	for _, n := range env.Stops {
		stops += n
	}
	if env.Approvals != 1+stops {
		t.Errorf("envelope: %d approvals for %d stops %v: want one per envelope", env.Approvals, stops, env.Stops)
	}
	if env.RecalibrationTriggers == 0 {
		t.Errorf("the recalibration trigger never fired on the drift (largest estimate %.3f g, test RMSE %.3f g)", env.MaxDrift, r.TestRMSE)
	}
	// the trigger recalibrated through the scheduler (the stored study
	// runs), and the new model's twin gate (twin-v3) was evaluated on its
	// shadow evidence and passes, as does the replaced model's on its
	// disturbance-corrected shadow evidence of the wearing line. The
	// recalibration's rebuild keeps the old runs' split and trains on the
	// new runs (internal/twin/recal, RebuildSpec): before, it re-drew the
	// by_run split over old and new runs, and the new model failed
	// G1_SINGLE_STEP (0.115 > 0.10) and G6 (7 trials of 10) on the
	// history runs the re-draw had moved into test. Since the engine
	// judges the temperature guard on the physics started at the measured
	// melt temperature, no replayed gate point is refused on it (the
	// line's melt temperature stays inside 235–260 °C; before, 15 of 24
	// points were, at 142–231 °C computed from the model's fitted state).
	if len(env.RecalibrationDetails) != 1 {
		t.Fatalf("envelope: %d recalibrations carried out, want 1: %+v", len(env.RecalibrationDetails), env.RecalibrationDetails)
	}
	rc := env.RecalibrationDetails[0]
	// the report counts what was carried out, apart from the triggers:
	// one retrain that produced a model, however often the trigger fired;
	// the modes that never retrain report none
	if env.Recalibrations != 1 || env.RecalibrationTriggers < env.Recalibrations {
		t.Errorf("envelope: %d recalibrations, %d triggers; want 1 recalibration carried out", env.Recalibrations, env.RecalibrationTriggers)
	}
	for _, m := range r.Modes {
		if m.Name != ModeEnvelope && m.Recalibrations != 0 {
			t.Errorf("%s reports %d recalibrations but never retrains", m.Name, m.Recalibrations)
		}
	}
	t.Logf("recalibration after run %d: %+v", rc.Run, rc)
	if rc.NewModelID == "" || rc.NewModelID == r.ModelID || rc.RequestID == "" || rc.GateEvalID == "" || rc.GateProfile != "twin-v3" || rc.ShadowRuns < 1 {
		t.Errorf("recalibration: %+v", rc)
	}
	for _, p := range rc.GateNoRecommendationPoints {
		t.Logf("  no recommendation at %s %d: %s", p.RunID, p.AtMs, p.Error)
		if !strings.Contains(p.Error, "holding the baseline: ") {
			t.Errorf("no-recommendation point %s %d does not say why holding fails: %s", p.RunID, p.AtMs, p.Error)
		}
		if strings.Contains(p.Error, "temperature value") {
			t.Errorf("no-recommendation point %s %d is refused on the temperature guard the line keeps in range: %s", p.RunID, p.AtMs, p.Error)
		}
	}
	if !rc.PreviousGatePassed {
		t.Errorf("the replaced model fails twin-v3 on its shadow evidence: %v", rc.PreviousGateRejects)
	}
	if !rc.GatePassed || len(rc.GateRejects) != 0 || len(rc.GateFailures) != 0 || rc.GateTrials < 10 {
		t.Errorf("the recalibrated model fails twin-v3: passed %v, rejects %v, failures %+v, %d trials", rc.GatePassed, rc.GateRejects, rc.GateFailures, rc.GateTrials)
	}
	// per_move: every write is a certificate the engineer issued, another
	// person approved (signed) and the guard let through, read back and
	// audited; every other certificate was denied (counted by reason) or
	// is still waiting for its approval at the study's end
	pm := r.Mode(ModePerMove)
	denied := 0
	for reason, n := range pm.Denials {
		if reason != "CERT_REFUSED" {
			denied += n
		}
	}
	if pm.Writes == 0 || pm.Violations != 0 || pm.AuditedMoves != pm.Moves || pm.Moves < pm.Writes || pm.Approvals < pm.Writes ||
		pm.Writes+denied > pm.Certificates || pm.Writes+denied < pm.Certificates-1 {
		t.Errorf("per_move: %d certificates, %d approvals, %d writes, %d moves, %d audited, denials %v", pm.Certificates, pm.Approvals, pm.Writes, pm.Moves, pm.AuditedMoves, pm.Denials)
	}
	if math.IsNaN(r.NoiseFloor) || r.Mode(ModeFixed).Writes != 0 || r.Mode(ModeFixed).Approvals != 0 {
		t.Errorf("fixed: %+v", r.Mode(ModeFixed))
	}
}
