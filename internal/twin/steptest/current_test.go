package steptest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
	"github.com/aml-project/aml/internal/twin/steptest"
)

// TestStepTestCurrentCertificate: with ExecInput.Current set, every move
// is checked against the certificate Current returns. A test revoked
// after its first move stops at the second (CERT_REVOKED); a Current
// that fails, or returns another certificate, stops the test before
// its move; nothing is written after the stop.
func TestStepTestCurrentCertificate(t *testing.T) {
	approved := func(r *rig) *contract.StepTestCertificate {
		c := *r.cert
		if c.Status == contract.CertApproved {
			return &c
		}
		if err := c.Approve("bob", start.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	cases := []struct {
		name   string
		writes int // moves written before the stop
		reason string
		cur    func(r *rig, calls int) (*contract.StepTestCertificate, error)
	}{
		{"revoked after move 0", 1, guard.ReasonCertRevoked, func(r *rig, calls int) (*contract.StepTestCertificate, error) {
			c := approved(r)
			if calls > 1 {
				c.ApprovedBy, c.ApprovedAt = "", time.Time{}
				c.Status = contract.CertIssued
				if err := c.Revoke("alice", "stop", start.Add(2*time.Minute)); err != nil {
					return nil, err
				}
			}
			return c, nil
		}},
		{"reload fails", 0, guard.ReasonCertInvalid, func(*rig, int) (*contract.StepTestCertificate, error) {
			return nil, errors.New("database is locked")
		}},
		{"another certificate", 0, guard.ReasonCertInvalid, func(r *rig, _ int) (*contract.StepTestCertificate, error) {
			c := approved(r)
			c.CertificateHash = "0000000000000000000000000000000000000000000000000000000000000000"
			return c, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 70, 300)
			r.cert = approved(r)
			calls := 0
			_, pub := r.key.SigningKey()
			ex, err := steptest.Execute(context.Background(), steptest.ExecInput{Cert: r.cert, Scene: r.scene, PublicKey: pub, Channels: hitl,
				History: r.hist, Line: r.line, RunID: "steptest-st-1", Current: func(context.Context) (*contract.StepTestCertificate, error) {
					calls++
					return tc.cur(r, calls)
				}})
			if err != nil {
				t.Fatal(err)
			}
			last := ex.Moves[len(ex.Moves)-1]
			if ex.Completed || len(ex.Moves) != tc.writes+1 || last.Allowed || last.Reason != tc.reason || len(r.hist.Records) != tc.writes {
				t.Fatalf("completed %v, %d moves, last %s %s, %d writes", ex.Completed, len(ex.Moves), last.Reason, last.Detail, len(r.hist.Records))
			}
		})
	}
	// Without a stop, Current is asked once per move and the test completes.
	r := newRig(t, 70, 300)
	r.cert = approved(r)
	calls := 0
	_, pub := r.key.SigningKey()
	ex, err := steptest.Execute(context.Background(), steptest.ExecInput{Cert: r.cert, Scene: r.scene, PublicKey: pub, Channels: hitl,
		History: r.hist, Line: r.line, RunID: "steptest-st-1", Current: func(context.Context) (*contract.StepTestCertificate, error) {
			calls++
			return r.cert, nil
		}})
	if err != nil || !ex.Completed || calls != len(r.cert.Moves) {
		t.Fatalf("completed %v, Current asked %d times for %d moves: %v", ex.Completed, calls, len(r.cert.Moves), err)
	}
	if v, _ := r.line.Read(context.Background(), sim.TankHeater); v != 50 {
		t.Fatalf("heater ends at %v", v)
	}
}
