package guard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

// toEnvelope turns the fixture's request into one action under an
// approved operating envelope on a bounded_auto channel (allowed as is).
func toEnvelope(t testing.TB, f *fixture) {
	t.Helper()
	f.ch.p.ControlPolicy = contract.PolicyBoundedAuto
	f.ch.p.Bounds = map[string]contract.Bound{"hold_pressure": {Min: 50, Max: 90}, "hold_time": {Min: 4, Max: 14}, "melt_temperature_setpoint": {Min: 235, Max: 260}}
	e, err := cert.IssueEnvelope(cert.EnvelopeInput{EnvelopeID: "env-1", CreatedBy: "alice", Scene: f.req.Scene, ModelID: "hybrid-1",
		Bounds:          map[string]contract.ChannelBound{"hold_pressure": {Min: 60, Max: 70}, "hold_time": {Min: 6, Max: 10}, "melt_temperature_setpoint": {Min: 240, Max: 250}},
		MaxMovesPerHour: 6}, f.key, t0, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Approve("bob", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.req.Cert, f.req.Envelope, f.req.ActionID = nil, e, "cycle-1"
}

func TestEnvelopeHappyPathAndExecute(t *testing.T) {
	f := newFixture(t)
	toEnvelope(t, f)
	d := f.check()
	if !d.Allowed {
		t.Fatalf("want allowed, got %s: %s", d.Reason, d.Detail)
	}
	w := NewRecordingWriter(map[string]float64{"n-hp": 64, "n-ht": 7.8, "n-mt": 246})
	out, err := Execute(context.Background(), w, f.hist, d, f.req)
	if err != nil || out.Status != OutcomeVerified {
		t.Fatalf("execute: %v %+v", err, out)
	}
	for _, r := range f.hist.Records {
		if r.CertificateID != contract.EnvelopeActionPrefix("env-1")+"cycle-1" {
			t.Fatalf("write recorded under %q", r.CertificateID)
		}
	}
	// The same action id cannot be written twice.
	f.req.Now, f.req.SnapshotAt = f.req.Now.Add(10*time.Minute), f.req.Now.Add(10*time.Minute-time.Second)
	if d := f.check(); d.Allowed || d.Reason != ReasonCertAlreadyUsed {
		t.Fatalf("replayed action: %+v", d)
	}
	// A decision for one action does not authorise another.
	f.req.ActionID = "cycle-2"
	if _, err := Execute(context.Background(), w, f.hist, d, f.req); err == nil {
		t.Fatal("executed a decision made for another action")
	}
}

// TestEnvelopeDenyReasons: every refusal path of a write under an
// operating envelope.
func TestEnvelopeDenyReasons(t *testing.T) {
	other, err := cert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		want   string
		mutate func(t *testing.T, f *fixture)
	}{
		{"hitl_governed refuses an envelope", ReasonEnvelopeNotAllowed, func(_ *testing.T, f *fixture) { f.ch.p.ControlPolicy = contract.PolicyHITLGoverned }},
		{"action id without envelope", ReasonNoCertificate, func(_ *testing.T, f *fixture) { f.req.Envelope = nil }},
		{"certificate and envelope", ReasonInvalidRequest, func(_ *testing.T, f *fixture) { f.req.Cert = &contract.RecommendationCertificate{} }},
		{"no action id", ReasonInvalidRequest, func(_ *testing.T, f *fixture) { f.req.ActionID = "" }},
		{"action id with slash", ReasonInvalidRequest, func(_ *testing.T, f *fixture) { f.req.ActionID = "a/b" }},
		{"unsigned", ReasonCertInvalid, func(_ *testing.T, f *fixture) { f.req.Envelope.Signature = "" }},
		{"tampered bounds", ReasonCertInvalid, func(_ *testing.T, f *fixture) {
			f.req.Envelope.Bounds["hold_pressure"] = contract.ChannelBound{Min: 0, Max: 1000}
		}},
		{"tampered rate", ReasonCertInvalid, func(_ *testing.T, f *fixture) { f.req.Envelope.MaxMovesPerHour = 3600 }},
		{"tampered expiry", ReasonCertInvalid, func(_ *testing.T, f *fixture) { f.req.Envelope.ExpiresAt = f.req.Envelope.ExpiresAt.Add(time.Hour) }},
		{"signed by another key", ReasonCertInvalid, func(_ *testing.T, f *fixture) { f.req.PublicKey = other.Public }},
		{"approved by its proposer", ReasonCertInvalid, func(_ *testing.T, f *fixture) { f.req.Envelope.ApprovedBy = " ALICE " }},
		{"not approved", ReasonCertNotApproved, func(_ *testing.T, f *fixture) {
			f.req.Envelope.Status, f.req.Envelope.ApprovedBy, f.req.Envelope.ApprovedAt = contract.CertIssued, "", time.Time{}
		}},
		{"revoked", ReasonCertRevoked, func(t *testing.T, f *fixture) {
			if err := f.req.Envelope.Revoke("carol", "mould change", t0.Add(2*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}},
		{"expired", ReasonCertExpired, func(_ *testing.T, f *fixture) {
			f.req.Now = f.req.Envelope.ExpiresAt
			f.req.SnapshotAt = f.req.Now.Add(-time.Second)
		}},
		{"other line", ReasonLineMismatch, func(_ *testing.T, f *fixture) {
			f.req.LineID, f.ch.p.LineID, f.req.Scene.LineID = "line-2", "line-2", "line-2"
		}},
		{"other scene", ReasonSceneMismatch, func(t *testing.T, f *fixture) {
			s := contract.DefaultInjectionScene()
			s.WritePolicy.MaxActionsPerRun = 100
			h, _ := s.Hash()
			if err := s.Freeze("mallory", h, t0); err != nil {
				t.Fatal(err)
			}
			f.req.Scene = s
		}},
		{"stale snapshot (stale connector)", ReasonSnapshotStale, func(_ *testing.T, f *fixture) { f.req.SnapshotAt = f.req.Now.Add(-2 * time.Minute) }},
		{"no moves", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves = nil }},
		{"not a control", ReasonMovesMismatch, func(_ *testing.T, f *fixture) { f.req.Moves[2].VariableID = "weight" }},
		{"above the envelope", ReasonOutsideEnvelope, func(_ *testing.T, f *fixture) { f.req.Moves[0].From, f.req.Moves[0].To = 70, 70.5 }},
		{"below the envelope", ReasonOutsideEnvelope, func(_ *testing.T, f *fixture) { f.req.Moves[1].From, f.req.Moves[1].To = 6, 5.9 }},
		{"control not in the envelope", ReasonOutsideEnvelope, func(_ *testing.T, f *fixture) { delete(f.req.Envelope.Bounds, "hold_time"); resign(t, f) }},
		{"delta too large inside the envelope", ReasonDeltaTooLarge, func(_ *testing.T, f *fixture) { f.req.Moves[0].From = 60 }},
		{"channel bounds tighter than the envelope", ReasonOutOfBounds, func(_ *testing.T, f *fixture) {
			f.ch.p.Bounds["hold_pressure"] = contract.Bound{Min: 50, Max: 64.5}
		}},
		{"rate exceeded", ReasonRateExceeded, func(_ *testing.T, f *fixture) {
			for i := range 4 { // 4 writes in the hour + 3 moves > 6
				f.rec("n-old", contract.EnvelopeActionPrefix("env-1")+"c0", "run-0", time.Duration(59-i)*time.Minute)
			}
		}},
		{"node interval still applies", ReasonNodeInterval, func(_ *testing.T, f *fixture) {
			f.rec("n-hp", contract.EnvelopeActionPrefix("env-1")+"c0", "run-1", 30*time.Second)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			toEnvelope(t, f)
			tc.mutate(t, f)
			d := f.check()
			if d.Allowed || d.Reason != tc.want || d.Detail == "" {
				t.Fatalf("want denied %s, got allowed=%v reason=%s (%s)", tc.want, d.Allowed, d.Reason, d.Detail)
			}
		})
	}
}

// resign re-signs the fixture's envelope after a test changed its body
// (as its issuer would), keeping its approval.
func resign(t testing.TB, f *fixture) {
	t.Helper()
	e := f.req.Envelope
	in := cert.EnvelopeInput{EnvelopeID: e.EnvelopeID, CreatedBy: e.CreatedBy, Scene: f.req.Scene, ModelID: e.ModelID, Bounds: e.Bounds, MaxMovesPerHour: e.MaxMovesPerHour}
	n, err := cert.IssueEnvelope(in, f.key, e.IssuedAt, e.ExpiresAt.Sub(e.IssuedAt))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Approve(e.ApprovedBy, e.ApprovedAt); err != nil {
		t.Fatal(err)
	}
	f.req.Envelope = n
}

// TestEnvelopeRateWindow: writes older than the rolling hour do not count.
func TestEnvelopeRateWindow(t *testing.T) {
	f := newFixture(t)
	toEnvelope(t, f)
	for i := range 10 {
		f.rec("n-old", contract.EnvelopeActionPrefix("env-1")+"c0", "run-0", time.Hour+time.Duration(i)*time.Minute)
	}
	f.rec("n-old", contract.EnvelopeActionPrefix("env-10")+"c0", "run-0", 2*time.Minute) // another envelope's write
	if d := f.check(); !d.Allowed {
		t.Fatalf("old writes counted: %s %s", d.Reason, d.Detail)
	}
	f.rec("n-old", contract.EnvelopeActionPrefix("env-1")+"c0", "run-0", 59*time.Minute)
	f.rec("n-old", contract.EnvelopeActionPrefix("env-1")+"c0", "run-0", 58*time.Minute)
	f.rec("n-old", contract.EnvelopeActionPrefix("env-1")+"c0", "run-0", 57*time.Minute)
	if d := f.check(); !d.Allowed { // 3 + 3 = 6: at the limit
		t.Fatalf("at the limit: %s %s", d.Reason, d.Detail)
	}
	f.rec("n-old", contract.EnvelopeActionPrefix("env-1")+"c0", "run-0", 56*time.Minute)
	if d := f.check(); d.Allowed || d.Reason != ReasonRateExceeded || !strings.Contains(d.Detail, "4 were written") {
		t.Fatalf("want RATE_EXCEEDED at 4+3 > 6, got %+v", d)
	}
}
