package guard

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/twin/contract"
)

// toStepTest turns the fixture into move 0 of an approved step test
// (hold_pressure 64 → 66 at 0 s, back to 64 at 60 s) started 10 s ago.
func toStepTest(t testing.TB, f *fixture) {
	t.Helper()
	s := f.req.Scene
	h, _ := s.Hash()
	kid, _ := f.key.SigningKey()
	c := &contract.StepTestCertificate{SchemaVersion: contract.StepTestSchemaVersion, TestID: "st-1", CreatedAt: t0, CreatedBy: "alice",
		LineID: line, SceneID: s.SceneID, SceneVersion: s.SceneVersion, SceneHash: h, PlanHash: hMod, Signal: "steps",
		Base: map[string]float64{"hold_pressure": 64}, Bounds: map[string]contract.ChannelBound{"hold_pressure": {Min: 62, Max: 66}},
		HoldSec: 60, Moves: []contract.StepTestMove{{AtSec: 0, Set: map[string]float64{"hold_pressure": 66}}, {AtSec: 60, Set: map[string]float64{"hold_pressure": 64}}},
		IssuedAt: t0, ExpiresAt: t0.Add(2 * time.Hour), KeyID: kid, Status: contract.CertIssued}
	var err error
	if c.CertificateHash, err = c.BodyHash(); err != nil {
		t.Fatal(err)
	}
	if c.Signature, err = f.key.SignDigest(c.CertificateHash); err != nil {
		t.Fatal(err)
	}
	if err := c.Approve("bob", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.req.Cert, f.req.StepTest, f.req.StepIndex, f.req.StepStart = nil, c, 0, f.req.Now.Add(-10*time.Second)
	f.req.Moves = []Move{{NodeID: "n-hp", VariableID: "hold_pressure", From: 64, To: 66}}
}

func TestStepTestMoves(t *testing.T) {
	f := newFixture(t)
	toStepTest(t, f)
	if d := f.check(); !d.Allowed {
		t.Fatalf("move 0 in its slot denied: %s %s", d.Reason, d.Detail)
	}
	cases := []struct {
		name, want string
		mutate     func(f *fixture)
	}{
		{"not approved", ReasonCertNotApproved, func(f *fixture) {
			f.req.StepTest.Status, f.req.StepTest.ApprovedBy, f.req.StepTest.ApprovedAt = contract.CertIssued, "", time.Time{}
		}},
		{"approved by its proposer", ReasonCertInvalid, func(f *fixture) { f.req.StepTest.ApprovedBy = "alice" }},
		{"revoked", ReasonCertRevoked, func(f *fixture) {
			c := f.req.StepTest
			c.ApprovedBy, c.ApprovedAt = "", time.Time{}
			if err := c.Revoke("carol", "line down", t0.Add(2*time.Minute)); err != nil {
				panic(err)
			}
		}},
		{"a signed field changed", ReasonCertInvalid, func(f *fixture) { f.req.StepTest.Moves[0].Set["hold_pressure"] = 65 }},
		{"expired", ReasonCertExpired, func(f *fixture) {
			f.req.Now = t0.Add(3 * time.Hour)
			f.req.SnapshotAt = f.req.Now
			f.req.StepStart = f.req.Now
		}},
		{"another value than the plan's", ReasonMovesMismatch, func(f *fixture) { f.req.Moves[0].To = 65.5 }},
		{"another variable than the plan's", ReasonMovesMismatch, func(f *fixture) {
			f.req.Moves[0] = Move{NodeID: "n-mt", VariableID: "melt_temperature_setpoint", From: 246, To: 66}
		}},
		{"no such move", ReasonMovesMismatch, func(f *fixture) { f.req.StepIndex = 2 }},
		{"before its slot", ReasonOutsideSlot, func(f *fixture) { f.req.StepIndex = 1; f.req.Moves[0].From, f.req.Moves[0].To = 66, 64 }},
		{"after its slot", ReasonOutsideSlot, func(f *fixture) { f.req.StepStart = f.req.Now.Add(-31 * time.Second) }},
		{"written twice", ReasonCertAlreadyUsed, func(f *fixture) {
			f.rec("n-hp", contract.StepTestActionID("st-1", 0), "run-0", 61*time.Minute)
		}},
		{"with a certificate too", ReasonInvalidRequest, func(f *fixture) { f.req.ActionID = "x" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			toStepTest(t, f)
			tc.mutate(f)
			if d := Check(context.Background(), f.ch, f.hist, f.req); d.Allowed || d.Reason != tc.want {
				t.Fatalf("want %s, got allowed=%v %s (%s)", tc.want, d.Allowed, d.Reason, d.Detail)
			}
		})
	}
}
