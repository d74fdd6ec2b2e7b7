package audit_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// edSigner is an Ed25519 checkpoint signer; fail makes SignDigest fail.
type edSigner struct {
	priv ed25519.PrivateKey
	fail bool
}

func (s edSigner) SigningKey() (string, ed25519.PublicKey) {
	return "k1", s.priv.Public().(ed25519.PublicKey)
}

func (s edSigner) SignDigest(h string) (string, error) {
	if s.fail {
		return "", errors.New("no key")
	}
	d, err := hex.DecodeString(h)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, d)), nil
}

// TestAppendSigned: the entry is appended and the new head is signed (a
// checkpoint at its seq that verifies with the key); when signing fails
// the entry stays appended, unsigned, and the error is returned.
func TestAppendSigned(t *testing.T) {
	ctx := context.Background()
	l, _ := newLog(t)
	key := edSigner{priv: ed25519.NewKeyFromSeed([]byte(strings.Repeat("s", ed25519.SeedSize)))}
	fill(t, l, 3)
	e, err := l.AppendSigned(ctx, key, "alice", "steptest.issue", "st-1", "L1", map[string]any{"k": 1})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 4 || e.Action != "steptest.issue" || e.Subject != "st-1" {
		t.Fatalf("entry %+v", e)
	}
	cps, err := l.Checkpoints(ctx)
	if err != nil || len(cps) != 1 || cps[0].Seq != e.Seq || cps[0].Hash != e.Hash {
		t.Fatalf("checkpoints %+v, %v; want one at entry %d", cps, err, e.Seq)
	}
	_, pub := key.SigningKey()
	keys := func(id string) ed25519.PublicKey {
		if id == "k1" {
			return pub
		}
		return nil
	}
	res, err := l.WithKeys(keys).Verify(ctx)
	if err != nil || res.Checkpoints != 1 || res.SignedSeq != e.Seq {
		t.Fatalf("verify %+v, %v", res, err)
	}
	key.fail = true
	e2, err := l.AppendSigned(ctx, key, "bob", "steptest.revoke", "st-1", "L1", nil)
	if err == nil || e2.Seq != 5 {
		t.Fatalf("failing signer: entry %+v, error %v; want entry 5 and an error", e2, err)
	}
	if cps, _ := l.Checkpoints(ctx); len(cps) != 1 {
		t.Fatalf("failing signer wrote a checkpoint: %+v", cps)
	}
}
