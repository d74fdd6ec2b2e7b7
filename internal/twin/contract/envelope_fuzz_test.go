package contract

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzParseEnvelope: ParseEnvelope never panics; an envelope it accepts
// hashes, survives a JSON round trip with the same body hash, and keeps
// its invariants (bounds finite with min ≤ max, a rate in range, an
// expiry after issue within EnvelopeMaxTTL).
func FuzzParseEnvelope(f *testing.F) {
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	e := EnvelopeCertificate{SchemaVersion: 1, EnvelopeID: "env-1", CreatedAt: at, CreatedBy: "alice", LineID: "line-1", SceneID: "s",
		SceneVersion: "1.0.0", SceneHash: strings.Repeat("a", 64), ModelID: "m", Bounds: map[string]ChannelBound{"hold_time": {Min: 6, Max: 10}},
		MaxMovesPerHour: 6, IssuedAt: at, ExpiresAt: at.Add(time.Hour), KeyID: strings.Repeat("b", 16), CertificateHash: strings.Repeat("c", 64),
		Signature: strings.Repeat("A", 86) + "==", Status: CertIssued}
	b, _ := json.Marshal(e)
	f.Add(b)
	e.Status, e.ApprovedBy, e.ApprovedAt = CertApproved, "bob", at.Add(time.Minute)
	b, _ = json.Marshal(e)
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"bounds":{"x":{"min":1e308,"max":-1e308}},"maxMovesPerHour":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEnvelope(data)
		if err != nil {
			if ProblemsOf(err) == nil {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		h1, err := e.BodyHash()
		if err != nil {
			t.Fatalf("valid envelope does not hash: %v", err)
		}
		for v, b := range e.Bounds {
			if !(b.Min <= b.Max) || !finite(b.Min) || !finite(b.Max) {
				t.Fatalf("accepted bounds %s %+v", v, b)
			}
		}
		if e.MaxMovesPerHour < 1 || e.MaxMovesPerHour > EnvelopeMaxMovesPerHour || !e.ExpiresAt.After(e.IssuedAt) || e.ExpiresAt.Sub(e.IssuedAt) > EnvelopeMaxTTL {
			t.Fatalf("accepted %+v", e)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := ParseEnvelope(b)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, b)
		}
		if h2, _ := e2.BodyHash(); h2 != h1 {
			t.Fatal("hash changed by a round trip")
		}
	})
}

// TestEnvelopeValidate: a well-formed envelope parses; each broken field
// is named.
func TestEnvelopeValidate(t *testing.T) {
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	good := func() EnvelopeCertificate {
		return EnvelopeCertificate{SchemaVersion: 1, EnvelopeID: "env-1", CreatedAt: at, CreatedBy: "alice", LineID: "line-1", SceneID: "s",
			SceneVersion: "1.0.0", SceneHash: strings.Repeat("a", 64), ModelID: "m", Bounds: map[string]ChannelBound{"hold_time": {Min: 6, Max: 10}},
			MaxMovesPerHour: 6, IssuedAt: at, ExpiresAt: at.Add(time.Hour), KeyID: strings.Repeat("b", 16), CertificateHash: strings.Repeat("c", 64),
			Signature: strings.Repeat("A", 86) + "==", Status: CertIssued}
	}
	e := good()
	b, _ := json.Marshal(e)
	if _, err := ParseEnvelope(b); err != nil {
		t.Fatal(err)
	}
	for field, mutate := range map[string]func(e *EnvelopeCertificate){
		"bounds":           func(e *EnvelopeCertificate) { e.Bounds = nil },
		"bounds.hold_time": func(e *EnvelopeCertificate) { e.Bounds["hold_time"] = ChannelBound{Min: 11, Max: 10} },
		"maxMovesPerHour":  func(e *EnvelopeCertificate) { e.MaxMovesPerHour = 0 },
		"expiresAt":        func(e *EnvelopeCertificate) { e.ExpiresAt = at.Add(13 * time.Hour) },
		"approvedBy":       func(e *EnvelopeCertificate) { e.Status, e.ApprovedBy, e.ApprovedAt = CertApproved, "ALICE", at },
		"status":           func(e *EnvelopeCertificate) { e.Status = CertExecuted },
		"signature":        func(e *EnvelopeCertificate) { e.Signature = "nope" },
	} {
		e := good()
		mutate(&e)
		err := e.Validate()
		found := false
		for _, p := range ProblemsOf(err) {
			found = found || p.Field == field
		}
		if !found {
			t.Errorf("%s: %v", field, err)
		}
	}
}
