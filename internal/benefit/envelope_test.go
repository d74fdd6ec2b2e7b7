package benefit

import (
	"context"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// Every refusal path of the study's envelope: outside its bounds, a
// control it does not cover, more moves per hour than it allows, not yet
// valid, expired, and approved by nobody or by its requester.
func TestStudyEnvelopeRefusals(t *testing.T) {
	sc := StudyScene()
	from := map[string]float64{"hold_pressure": 65, "hold_time": 8, "melt_temperature_setpoint": 245}
	move := func(id string, v float64) map[string]float64 {
		m := map[string]float64{}
		for k, x := range from {
			m[k] = x
		}
		m[id] = v
		return m
	}
	const t0 = 1_000_000
	e := NewStudyEnvelope(sc, Engineer, Approver, t0, t0+7_200_000, 2)
	if err := e.Allow(t0, from, move("hold_pressure", 67)); err != nil {
		t.Fatalf("a move inside the envelope: %v", err)
	}
	for _, tc := range []struct {
		name string
		e    *StudyEnvelope
		tMs  int64
		to   map[string]float64
		want string
	}{
		{"above bounds", e, t0, move("hold_pressure", 91), "outside the envelope"},
		{"below bounds", e, t0, move("melt_temperature_setpoint", 230), "outside the envelope"},
		{"not covered", e, t0, move("screw_speed", 1), "not in the envelope"},
		{"not yet valid", e, t0 - 1, move("hold_pressure", 66), "not yet valid"},
		{"expired", e, t0 + 7_200_000, move("hold_pressure", 66), "expired"},
		{"unapproved", NewStudyEnvelope(sc, Engineer, "", t0, t0+1000, 2), t0, move("hold_pressure", 66), "not approved"},
		{"self-approved", NewStudyEnvelope(sc, Engineer, Engineer, t0, t0+1000, 2), t0, move("hold_pressure", 66), "not approved"},
	} {
		if err := tc.e.Allow(tc.tMs, from, tc.to); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	e.Record(t0)
	e.Record(t0 + 60_000)
	if err := e.Allow(t0+120_000, from, move("hold_pressure", 66)); err == nil || !strings.Contains(err.Error(), "moves in the last hour") {
		t.Fatalf("rate: %v", err)
	}
	if err := e.Allow(t0+3_600_001, from, move("hold_pressure", 66)); err != nil {
		t.Fatalf("an hour after the first move: %v", err)
	}
}

// Bad options are refused before any work (nothing is simulated or
// trained: the store is not even read).
func TestOptionsRefusedBeforeWork(t *testing.T) {
	for _, o := range []Options{{Runs: 501}, {Runs: -1}, {HistoryRuns: 5}, {RunSteps: 60}, {CycleSteps: 30}, {SpecHalfWidth: -1}, {MaxMovesPerHour: -1}} {
		if _, err := Run(context.Background(), o); core.CodeOf(err) != core.CodeUsage {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// The terminal report states the spec band and the noise floor and has a
// line per mode.
func TestReport(t *testing.T) {
	r := &Result{Seed: 7, Runs: 60, RunSteps: 600, Wear: true, Target: 32, SpecLow: 31.7, SpecHigh: 32.3, NoiseSD: 0.03, NoiseFloor: 0.0012, TestRMSE: 0.094,
		Modes: []ModeResult{{Name: ModeFixed, MeanAbsError: 0.89}, {Name: ModePerMove}, {Name: ModeEnvelope, Approvals: 1}, {Name: ModeOracle}}, EnvelopeShare: 0.86}
	var b strings.Builder
	r.Report(&b)
	for _, want := range []string{"spec band 31.70–32.30 g", "noise 0.030 g", "noise floor of a run mean 0.0012 g", "fixed", "per_move", "envelope", "oracle", "envelope 86 %"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
}
