package contract

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// TestSignedDocumentsVerify: an envelope and a step test signed with a
// key verify with it; a changed signed field, hash or signature, or
// another key fails with AML_CERT_INVALID on the field at fault, with the
// document's own name in the message.
func TestSignedDocumentsVerify(t *testing.T) {
	priv := ed25519.NewKeyFromSeed([]byte(strings.Repeat("k", ed25519.SeedSize)))
	pub := priv.Public().(ed25519.PublicKey)
	other := ed25519.NewKeyFromSeed([]byte(strings.Repeat("o", ed25519.SeedSize))).Public().(ed25519.PublicKey)
	sign := func(t *testing.T, keyID, hash, sig *string, bodyHash func() (string, error)) {
		t.Helper()
		*keyID = CertKeyID(pub)
		h, err := bodyHash()
		if err != nil {
			t.Fatal(err)
		}
		d, _ := hex.DecodeString(h)
		*hash, *sig = h, base64.StdEncoding.EncodeToString(ed25519.Sign(priv, d))
	}
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	type doc interface{ Verify(ed25519.PublicKey) error }
	// each document, and a fresh copy of it with its line, hash and
	// signature fields to change
	type copyOf func() (d doc, line, hash, sig *string)
	docs := []struct {
		name string
		make func(t *testing.T) (doc, copyOf)
	}{
		{"envelope", func(t *testing.T) (doc, copyOf) {
			e := EnvelopeCertificate{SchemaVersion: 1, EnvelopeID: "env-1", CreatedAt: at, CreatedBy: "alice", LineID: "line-1", SceneID: "s",
				SceneVersion: "1.0.0", SceneHash: strings.Repeat("a", 64), ModelID: "m", Bounds: map[string]ChannelBound{"hold_time": {Min: 6, Max: 10}},
				MaxMovesPerHour: 6, IssuedAt: at, ExpiresAt: at.Add(time.Hour), Status: CertIssued}
			sign(t, &e.KeyID, &e.CertificateHash, &e.Signature, e.BodyHash)
			return &e, func() (doc, *string, *string, *string) {
				c := e
				return &c, &c.LineID, &c.CertificateHash, &c.Signature
			}
		}},
		{"step test", func(t *testing.T) (doc, copyOf) {
			s := stepTestSeed()
			sign(t, &s.KeyID, &s.CertificateHash, &s.Signature, s.BodyHash)
			return &s, func() (doc, *string, *string, *string) {
				c := s
				return &c, &c.LineID, &c.CertificateHash, &c.Signature
			}
		}},
	}
	for _, d := range docs {
		good, copyDoc := d.make(t)
		tamper := func(what string) doc {
			c, line, hash, sig := copyDoc()
			switch what {
			case "field":
				*line = "line-2"
			case "hash":
				*hash = strings.Repeat("0", 64)
			case "signature":
				*sig = base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))
			}
			return c
		}
		if err := good.Verify(pub); err != nil {
			t.Fatalf("%s: a signed document does not verify: %v", d.name, err)
		}
		for _, c := range []struct {
			what, field, says string
			doc               doc
			key               ed25519.PublicKey
		}{
			{"another key", "keyId", d.name + " names key", good, other},
			{"a changed signed field", "certificateHash", "the " + d.name + " says", tamper("field"), pub},
			{"a changed hash", "certificateHash", "the " + d.name + " says", tamper("hash"), pub},
			{"a changed signature", "signature", "signature does not verify", tamper("signature"), pub},
			{"a short key", "keyId", "not an Ed25519 public key", good, pub[:8]},
		} {
			err := c.doc.Verify(c.key)
			var ae *core.Error
			if err == nil || core.CodeOf(err) != core.CodeCertInvalid || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s with %s: %v, want %s mentioning %q", d.name, c.what, err, core.CodeCertInvalid, c.says)
				continue
			}
			if errors.As(err, &ae) && ae.Field != c.field {
				t.Errorf("%s with %s: field %q, want %q", d.name, c.what, ae.Field, c.field)
			}
		}
	}
}
