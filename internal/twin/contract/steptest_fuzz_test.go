package contract

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func stepTestSeed() StepTestCertificate {
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	return StepTestCertificate{SchemaVersion: 1, TestID: "st-1", CreatedAt: at, CreatedBy: "alice", LineID: "line-1", SceneID: "s",
		SceneVersion: "1.0.0", SceneHash: strings.Repeat("a", 64), PlanHash: strings.Repeat("d", 64), Signal: "steps",
		Base: map[string]float64{"hold_time": 8}, Bounds: map[string]ChannelBound{"hold_time": {Min: 7.5, Max: 8.5}}, HoldSec: 60,
		Moves:    []StepTestMove{{AtSec: 0, Set: map[string]float64{"hold_time": 8.5}}, {AtSec: 60, Set: map[string]float64{"hold_time": 8}}},
		IssuedAt: at, ExpiresAt: at.Add(time.Hour), KeyID: strings.Repeat("b", 16), CertificateHash: strings.Repeat("c", 64),
		Signature: strings.Repeat("A", 86) + "==", Status: CertIssued}
}

// FuzzParseStepTest: ParseStepTest never panics; a certificate it
// accepts hashes, survives a JSON round trip with the same body hash,
// and keeps its invariants (moves in order at least holdSec apart, each
// target within the bounds, expiry within StepTestMaxTTL).
func FuzzParseStepTest(f *testing.F) {
	c := stepTestSeed()
	b, _ := json.Marshal(c)
	f.Add(b)
	c.Status, c.ApprovedBy, c.ApprovedAt = CertApproved, "bob", c.IssuedAt.Add(time.Minute)
	b, _ = json.Marshal(c)
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"moves":[{"atSec":-1,"set":{"x":1e308}}],"holdSec":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseStepTest(data)
		if err != nil {
			if ProblemsOf(err) == nil {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		h1, err := c.BodyHash()
		if err != nil {
			t.Fatalf("valid step test does not hash: %v", err)
		}
		for i, m := range c.Moves {
			if i > 0 && m.AtSec-c.Moves[i-1].AtSec < c.HoldSec-1e-9 {
				t.Fatalf("accepted moves out of order: %+v", c.Moves)
			}
			for v, x := range m.Set {
				if b, ok := c.Bounds[v]; !ok || x < b.Min || x > b.Max {
					t.Fatalf("accepted move %d %s=%v outside %+v", i, v, x, b)
				}
			}
		}
		if !c.ExpiresAt.After(c.IssuedAt) || c.ExpiresAt.Sub(c.IssuedAt) > StepTestMaxTTL {
			t.Fatalf("accepted expiry %+v", c)
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := ParseStepTest(b)
		if err != nil {
			t.Fatalf("round trip refused: %v", err)
		}
		if h2, _ := c2.BodyHash(); h2 != h1 {
			t.Fatalf("round trip changed the body hash")
		}
	})
}

// TestStepTestValidation: each broken field is named.
func TestStepTestValidation(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		mutate      func(c *StepTestCertificate)
	}{
		{"move outside the bounds", "moves[0].set.hold_time", func(c *StepTestCertificate) { c.Moves[0].Set["hold_time"] = 9 }},
		{"moves closer than the hold", "moves[1].atSec", func(c *StepTestCertificate) { c.Moves[1].AtSec = 30 }},
		{"unbounded variable", "moves[0].set.hold_pressure", func(c *StepTestCertificate) { c.Moves[0].Set = map[string]float64{"hold_pressure": 1} }},
		{"no moves", "moves", func(c *StepTestCertificate) { c.Moves = nil }},
		{"base outside the bounds", "base.hold_time", func(c *StepTestCertificate) { c.Base["hold_time"] = 9 }},
		{"expiry too far", "expiresAt", func(c *StepTestCertificate) { c.ExpiresAt = c.IssuedAt.Add(25 * time.Hour) }},
		{"self-approved", "approvedBy", func(c *StepTestCertificate) {
			c.Status, c.ApprovedBy, c.ApprovedAt = CertApproved, "Alice", c.IssuedAt.Add(time.Minute)
		}},
		{"no hold", "holdSec", func(c *StepTestCertificate) { c.HoldSec = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := stepTestSeed()
			if err := c.Validate(); err != nil {
				t.Fatalf("seed invalid: %v", err)
			}
			tc.mutate(&c)
			err := c.Validate()
			found := false
			for _, p := range ProblemsOf(err) {
				found = found || p.Field == tc.field
			}
			if !found {
				t.Fatalf("want a problem at %s, got %v", tc.field, err)
			}
		})
	}
}
