package twinstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

func newKey(t *testing.T) *cert.KeyPair {
	t.Helper()
	k, err := cert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ringOf(t *testing.T, s store.Store, k *cert.KeyPair) *twinstore.Keyring {
	t.Helper()
	r, err := s.Keyring(context.Background(), k.Public)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestKeyRotation: after k1 → k2, certificates signed by k1 and by k2
// verify with the data directory's new key (reads, lists), a certificate
// approved with k1 is still claimed for execution (signed by k2), the
// audit log verifies across the rotation, and a process still holding k1
// is refused (AML_CERT_KEY_RETIRED naming k2) before it signs — while it
// still verifies what k2 signed.
func TestKeyRotation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, k1 := twFixture(t, b)
		old := b.again(t, s) // another process that keeps k1
		if err := s.RegisterSigningKey(ctx, k1, "serve-a"); err != nil {
			t.Fatal(err)
		}
		if err := old.RegisterSigningKey(ctx, k1, "serve-b"); err != nil {
			t.Fatal(err)
		}
		c1 := twIssue(t, s, k1, "trial-1").Cert
		if _, err := s.ApproveCertificateAs(ctx, c1.RecommendationID, twinstore.Approver{Name: "bob", Role: "approver"}, k1, twT0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		k2 := newKey(t)
		wantCode(t, s.RotateSigningKey(ctx, k1, k1, "admin", twT0), core.CodeInvalidArgument)
		if err := s.RotateSigningKey(ctx, k1, k2, "admin", twT0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if id, err := s.DeploymentKeyID(ctx); err != nil || id != k2.ID {
			t.Fatalf("deployment key %q %v, want %s", id, err, k2.ID)
		}
		c2 := twIssue(t, s, k2, "trial-2").Cert
		if c2.KeyID != k2.ID || c1.KeyID != k1.ID {
			t.Fatalf("key ids %s %s", c1.KeyID, c2.KeyID)
		}
		for _, c := range []*contract.RecommendationCertificate{c1, c2} {
			if _, err := s.GetCertificate(ctx, c.RecommendationID, k2.Public); err != nil {
				t.Fatalf("%s (key %s) after rotation: %v", c.RecommendationID, c.KeyID, err)
			}
		}
		items, err := s.ListCertificates(ctx, contract.CertFilter{}, k2.Public)
		if err != nil || len(items) != 2 {
			t.Fatalf("%d items %v", len(items), err)
		}
		for _, it := range items {
			if !it.Verified || it.Problem != "" {
				t.Fatalf("%s not verified: %s", it.Cert.RecommendationID, it.Problem)
			}
		}
		ring := ringOf(t, s, k2)
		if ring.Key(k1.ID) == nil || ring.Key(k2.ID) == nil {
			t.Fatalf("keyring %v", ring.IDs())
		}
		// The approval signed with k1 still holds; the claim is signed
		// with k2.
		a, err := s.GetAttestation(ctx, c1.RecommendationID, twinstore.AttestApprove)
		if err != nil {
			t.Fatal(err)
		}
		r1, err := s.GetCertificate(ctx, c1.RecommendationID, k2.Public)
		if err != nil {
			t.Fatal(err)
		}
		if err := twinstore.CheckApprovalWith(r1.Cert, a, ring); err != nil {
			t.Fatal(err)
		}
		claim := contract.WriteClaimRequest{LineID: twLine, CertificateID: c1.RecommendationID, RunID: "run-1", Actor: "carol", At: twT0.Add(3 * time.Minute)}
		if _, err := s.ClaimCertificateWrite(ctx, claim, k2.Public); err != nil {
			t.Fatal(err)
		}
		x, err := s.GetAttestation(ctx, c1.RecommendationID, twinstore.AttestExecute)
		if err != nil || x.KeyID != k2.ID {
			t.Fatalf("execution statement %+v %v", x, err)
		}
		res, err := twinstore.RingLog(s.AuditLog(), ring).Verify(ctx)
		if err != nil || res.SignedSeq != res.HeadSeq {
			t.Fatalf("audit across the rotation: %v %+v", err, res)
		}

		// The process holding k1: refused before it signs, naming k2.
		retired := func(err error) {
			t.Helper()
			wantCode(t, err, twinstore.CodeKeyRetired)
			if !strings.Contains(err.Error(), k2.ID) || !strings.Contains(err.Error(), k1.ID) {
				t.Fatalf("refusal does not name both keys: %v", err)
			}
		}
		if _, err := old.PutTrial(ctx, twTrial("trial-3"), contract.TrialManual, ""); err != nil {
			t.Fatal(err)
		}
		_, err = old.IssueCertificate(ctx, "trial-3", "alice", k1, time.Hour, twT0.Add(4*time.Minute))
		retired(err)
		_, err = old.ApproveCertificateAs(ctx, c2.RecommendationID, twinstore.Approver{Name: "bob", Role: "approver"}, k1, twT0.Add(4*time.Minute))
		retired(err)
		retired(old.RegisterSigningKey(ctx, k1, "serve-b"))
		retired(s.RotateSigningKey(ctx, k1, newKey(t), "admin", twT0.Add(5*time.Minute)))
		// …but verifies what its successor signed (k1 signed that k2
		// succeeds it).
		if _, err := old.GetCertificate(ctx, c2.RecommendationID, k1.Public); err != nil {
			t.Fatalf("old process reading a k2 certificate: %v", err)
		}
		// Once the key file is copied, the other process registers k2.
		if err := old.RegisterSigningKey(ctx, k2, "serve-b"); err != nil {
			t.Fatal(err)
		}
		// A third key is still a mismatch.
		wantCode(t, old.RegisterSigningKey(ctx, newKey(t), "serve-c"), twinstore.CodeKeyMismatch)

		// A second rotation: k1's certificate verifies with k3 through k2.
		k3 := newKey(t)
		if err := s.RotateSigningKey(ctx, k2, k3, "admin", twT0.Add(6*time.Minute)); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*contract.RecommendationCertificate{c1, c2} {
			if _, err := s.GetCertificate(ctx, c.RecommendationID, k3.Public); err != nil {
				t.Fatalf("%s after two rotations: %v", c.RecommendationID, err)
			}
		}
		if _, err := twinstore.RingLog(s.AuditLog(), ringOf(t, s, k3)).Verify(ctx); err != nil {
			t.Fatalf("audit after two rotations: %v", err)
		}
		wantCode(t, old.RegisterSigningKey(ctx, k1, "serve-b"), twinstore.CodeKeyRetired)
		if err := old.RegisterSigningKey(ctx, k3, "serve-b"); err != nil {
			t.Fatal(err)
		}
	})
}

// insertSuccession inserts a succession row old → next signed by signOld and
// signNew (the keys that should be old and next, or an attacker's).
func insertSuccession(t *testing.T, s store.Store, old, next, signOld, signNew *cert.KeyPair, at time.Time) {
	t.Helper()
	st := twinstore.KeySuccession{OldKeyID: old.ID, OldPublicKey: base64.StdEncoding.EncodeToString(old.Public),
		NewKeyID: next.ID, NewPublicKey: base64.StdEncoding.EncodeToString(next.Public), At: at.UnixMilli()}
	sign := func(k *cert.KeyPair, kind string) string {
		st := st
		st.Kind = kind
		b, err := core.CanonicalJSON(st)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		sig, err := k.SignDigest(hex.EncodeToString(sum[:]))
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	mustExec(t, s, `INSERT INTO twin_key_successions(old_key_id, old_public_key, new_key_id, new_public_key, succeeded_at, old_signature, new_signature, registered_by) VALUES (?,?,?,?,?,?,?,?)`,
		old.ID, st.OldPublicKey, next.ID, st.NewPublicKey, st.At, sign(signOld, twinstore.SuccessionKind), sign(signNew, twinstore.RetirementKind), "mallory")
}

// TestKeyRotationForgedRetiredKey: someone who can write to the database
// registers an attacker's key as "retired" by the deployment key (a
// succession row and a twin_signing_keys row, the deployment key's
// signature forged with the attacker's): a certificate signed by the
// attacker's key fails verification. A forged succession from the
// deployment key to the attacker's neither retires the deployment key nor
// lets the attacker's key register.
func TestKeyRotationForgedRetiredKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, k := twFixture(t, b)
		if err := s.RegisterSigningKey(ctx, k, "serve"); err != nil {
			t.Fatal(err)
		}
		evil := newKey(t)
		attacker := b.again(t, s)
		forged := twIssue(t, attacker, evil, "trial-1").Cert
		mustExec(t, s, `INSERT INTO twin_signing_keys(key_id, public_key, registered_by, registered_at) VALUES (?,?,?,?)`,
			evil.ID, base64.StdEncoding.EncodeToString(evil.Public), "mallory", int64(1)<<52) // after k
		insertSuccession(t, s, evil, k, evil, evil, twT0) // k's "retirement" signed by evil
		_, err := s.GetCertificate(ctx, forged.RecommendationID, k.Public)
		wantCode(t, err, core.CodeCertInvalid)
		items, err := s.ListCertificates(ctx, contract.CertFilter{}, k.Public)
		if err != nil || len(items) != 1 || items[0].Verified {
			t.Fatalf("forged certificate listed as verified: %+v %v", items, err)
		}
		if ring := ringOf(t, s, k); ring.Key(evil.ID) != nil {
			t.Fatalf("forged retired key trusted: %v", ring.IDs())
		}

		// The forward forgery: "k is succeeded by evil" with k's signature
		// forged.
		mustExec(t, s, `DELETE FROM twin_key_successions`)
		insertSuccession(t, s, k, evil, evil, evil, twT0)
		if ring := ringOf(t, s, k); ring.Key(evil.ID) != nil {
			t.Fatalf("forged successor trusted: %v", ring.IDs())
		}
		if id, err := s.DeploymentKeyID(ctx); err != nil || id != k.ID {
			t.Fatalf("deployment key %q %v", id, err)
		}
		wantCode(t, attacker.RegisterSigningKey(ctx, evil, "mallory"), twinstore.CodeKeyMismatch)
		twIssue(t, s, k, "trial-2") // k is not retired
	})
}
