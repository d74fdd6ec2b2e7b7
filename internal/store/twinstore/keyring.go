package twinstore

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Key rotation. The deployment key can be replaced: the old key signs
// "key NEW succeeds me at T" (SuccessionKind) and the new key signs "I
// retired key OLD at T" (RetirementKind); both signatures are stored in
// twin_key_successions. Trust flows along them:
//
//   - a verifier trusts the key of its data directory (the anchor) and,
//     backwards, every key the anchor retired through a succession whose
//     two signatures verify — so old certificates, statements and
//     checkpoints still verify by their key id — and, forwards, every key
//     that succeeded it the same way (Keyring);
//   - the deployment's current key is the end of the chain of valid
//     successions from the first registered key; a process holding a
//     retired key is refused with AML_CERT_KEY_RETIRED naming it, before
//     it signs anything (RegisterSigningKey, and every signing step).
//
// A public key in the database is never trusted on its own: a row naming
// a key the anchor did not sign for is ignored.

// CodeKeyRetired refuses a process whose signing key was rotated out.
const CodeKeyRetired = core.CodeCertKeyRetired

// AuditKeyRotate is the audit action of a key rotation (subject: the new
// key id).
const AuditKeyRotate = "cert.key.rotate"

// The kinds of the two statements of a succession.
const (
	SuccessionKind = "aml.key.succession/1" // signed by the old key
	RetirementKind = "aml.key.retirement/1" // signed by the new key
)

// KeySuccession is what both keys of a rotation sign (with their own
// Kind).
type KeySuccession struct {
	Kind         string `json:"kind"`
	OldKeyID     string `json:"oldKeyId"`
	OldPublicKey string `json:"oldPublicKey"` // base64
	NewKeyID     string `json:"newKeyId"`
	NewPublicKey string `json:"newPublicKey"` // base64
	At           int64  `json:"at"`           // epoch ms
}

// succession is a stored row of twin_key_successions.
type succession struct {
	st             KeySuccession
	oldPub, newPub ed25519.PublicKey
	oldSig, newSig string
}

func (k KeySuccession) digest(kind string) ([]byte, error) {
	k.Kind = kind
	b, err := core.CanonicalJSON(k)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

func verifySig(pub ed25519.PublicKey, digest []byte, sig string) bool {
	b, err := base64.StdEncoding.DecodeString(sig)
	return err == nil && len(pub) == ed25519.PublicKeySize && len(b) == ed25519.SignatureSize && ed25519.Verify(pub, digest, b)
}

// valid reports whether both keys signed the succession and the ids are
// those of the keys.
func (r succession) valid() bool {
	if len(r.oldPub) != ed25519.PublicKeySize || len(r.newPub) != ed25519.PublicKeySize ||
		contract.CertKeyID(r.oldPub) != r.st.OldKeyID || contract.CertKeyID(r.newPub) != r.st.NewKeyID {
		return false
	}
	d1, err1 := r.st.digest(SuccessionKind)
	d2, err2 := r.st.digest(RetirementKind)
	return err1 == nil && err2 == nil && verifySig(r.oldPub, d1, r.oldSig) && verifySig(r.newPub, d2, r.newSig)
}

func decodePub(s string) ed25519.PublicKey {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil
	}
	return ed25519.PublicKey(b)
}

// successions reads every stored succession (the table is tiny: one row
// per rotation).
func successions(ctx context.Context, q sqldb.Querier) ([]succession, error) {
	rows, err := q.QueryContext(ctx, `SELECT old_key_id, old_public_key, new_key_id, new_public_key, succeeded_at, old_signature, new_signature FROM twin_key_successions ORDER BY succeeded_at, old_key_id`)
	if err != nil {
		return nil, sqldb.Err(err, "read key successions")
	}
	defer rows.Close()
	var out []succession
	for rows.Next() {
		var r succession
		if err := rows.Scan(&r.st.OldKeyID, &r.st.OldPublicKey, &r.st.NewKeyID, &r.st.NewPublicKey, &r.st.At, &r.oldSig, &r.newSig); err != nil {
			return nil, sqldb.Err(err, "read key successions")
		}
		r.oldPub, r.newPub = decodePub(r.st.OldPublicKey), decodePub(r.st.NewPublicKey)
		out = append(out, r)
	}
	return out, sqldb.Err(rows.Err(), "read key successions")
}

// Keyring is the set of keys a verifier trusts, by key id: its anchor (the
// data directory's key), the keys the anchor retired and the keys that
// succeeded it, each through a succession both keys signed.
type Keyring struct {
	anchor string
	keys   map[string]ed25519.PublicKey
}

// Key is the trusted public key of id (nil: not trusted).
func (k *Keyring) Key(id string) ed25519.PublicKey {
	if k == nil {
		return nil
	}
	return k.keys[id]
}

// Keys is the keyring as an audit.Keys.
func (k *Keyring) Keys() audit.Keys { return k.Key }

// IDs are the trusted key ids, the anchor first.
func (k *Keyring) IDs() []string {
	if k == nil {
		return nil
	}
	out := []string{k.anchor}
	for id := range k.keys {
		if id != k.anchor {
			out = append(out, id)
		}
	}
	return out
}

// Anchor is the id of the key the keyring was built from.
func (k *Keyring) Anchor() string {
	if k == nil {
		return ""
	}
	return k.anchor
}

// VerifyCert verifies c's hash and signature with the trusted key its
// keyId names (AML_CERT_INVALID when that key is not trusted).
func (k *Keyring) VerifyCert(c *contract.RecommendationCertificate) error {
	pub := k.Key(c.KeyID)
	if pub == nil {
		return certInvalid("certificate %s is signed by key %s, which is neither the deployment key %s nor a key it retired or was succeeded by", c.RecommendationID, c.KeyID, k.Anchor())
	}
	return c.Verify(pub)
}

// keyringOf builds the keyring of anchor from the stored successions.
func keyringOf(ctx context.Context, q sqldb.Querier, anchor ed25519.PublicKey) (*Keyring, error) {
	if len(anchor) != ed25519.PublicKeySize {
		return nil, core.Errorf(core.CodeInvalidArgument, "a certificate verification key is required")
	}
	rs, err := successions(ctx, q)
	if err != nil {
		return nil, err
	}
	byNew := map[string]succession{}
	for _, r := range rs {
		byNew[r.st.NewKeyID] = r
	}
	id := contract.CertKeyID(anchor)
	k := &Keyring{anchor: id, keys: map[string]ed25519.PublicKey{id: anchor}}
	for cur := anchor; ; {
		r, ok := byNew[contract.CertKeyID(cur)]
		if !ok || !r.newPub.Equal(cur) || !r.valid() {
			break
		}
		if _, seen := k.keys[r.st.OldKeyID]; seen {
			break
		}
		k.keys[r.st.OldKeyID] = r.oldPub
		cur = r.oldPub
	}
	// Forwards: the keys that succeeded the anchor, each through a
	// succession the key before it signed (a process still holding a
	// retired key verifies what its successors signed; it signs nothing).
	byOld := map[string]succession{}
	for _, r := range rs {
		byOld[r.st.OldKeyID] = r
	}
	for cur := anchor; ; {
		r, ok := byOld[contract.CertKeyID(cur)]
		if !ok || !r.oldPub.Equal(cur) || !r.valid() {
			break
		}
		if _, seen := k.keys[r.st.NewKeyID]; seen {
			break
		}
		k.keys[r.st.NewKeyID] = r.newPub
		cur = r.newPub
	}
	return k, nil
}

// Keyring is the keyring of anchor, the data directory's public key: the
// keys certificates, statements and checkpoints verify with.
func (s *Store) Keyring(ctx context.Context, anchor ed25519.PublicKey) (*Keyring, error) {
	return keyringOf(ctx, s.db, anchor)
}

// successorOf is the id of the key that replaced pub through a chain of
// valid successions signed from pub onwards ("" when pub is current).
func successorOf(rs []succession, pub ed25519.PublicKey) (string, time.Time) {
	byOld := map[string]succession{}
	for _, r := range rs {
		byOld[r.st.OldKeyID] = r
	}
	last, at := "", time.Time{}
	seen := map[string]bool{}
	for cur := pub; ; {
		id := contract.CertKeyID(cur)
		r, ok := byOld[id]
		if !ok || seen[id] || !r.oldPub.Equal(cur) || !r.valid() {
			return last, at
		}
		seen[id] = true
		last, at, cur = r.st.NewKeyID, msTime(r.st.At), r.newPub
	}
}

func retiredError(keyID, current string, at time.Time) error {
	return &core.Error{Code: CodeKeyRetired, Field: "keyId",
		Message: "this data directory's certificate signing key " + keyID + " was retired at " + at.UTC().Format(time.RFC3339) +
			" and no longer signs: the deployment's current key is " + current + " — copy cert-key.json from the data directory that rotated the key (aml cert key shows key " + current + ") into this one"}
}

// checkSigner refuses (AML_CERT_KEY_RETIRED) a signing key that a valid
// succession replaced.
func checkSigner(ctx context.Context, q sqldb.Querier, key CertSigner) error {
	id, pub := key.SigningKey()
	rs, err := successions(ctx, q)
	if err != nil {
		return err
	}
	if next, at := successorOf(rs, pub); next != "" {
		return retiredError(id, next, at)
	}
	return nil
}

// deploymentKey is the original deployment key's id and public half ("",
// nil: none registered): the first registered key that no succession
// installed.
func deploymentKey(ctx context.Context, q sqldb.Querier) (string, ed25519.PublicKey, error) {
	var id, pub string
	switch err := q.QueryRowContext(ctx, `SELECT key_id, public_key FROM twin_signing_keys WHERE key_id NOT IN (SELECT new_key_id FROM twin_key_successions)
		ORDER BY registered_at, key_id LIMIT 1`).Scan(&id, &pub); {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil, nil
	case err != nil:
		return "", nil, sqldb.Err(err, "read the deployment's signing key")
	}
	return id, decodePub(pub), nil
}

// currentKey is the deployment's current key: the end of the chain of
// valid successions from the first registered key (its id; "" when none
// is registered), and the keys the chain retired.
func currentKey(ctx context.Context, q sqldb.Querier) (id string, pub ed25519.PublicKey, retired map[string]time.Time, err error) {
	id, pub, err = deploymentKey(ctx, q)
	if err != nil || id == "" {
		return id, pub, nil, err
	}
	rs, err := successions(ctx, q)
	if err != nil {
		return "", nil, nil, err
	}
	byOld := map[string]succession{}
	for _, r := range rs {
		byOld[r.st.OldKeyID] = r
	}
	retired = map[string]time.Time{}
	for {
		r, ok := byOld[id]
		if !ok || pub == nil || !r.oldPub.Equal(pub) || !r.valid() {
			return id, pub, retired, nil
		}
		if _, seen := retired[id]; seen {
			return id, pub, retired, nil
		}
		retired[id] = msTime(r.st.At)
		id, pub = r.st.NewKeyID, r.newPub
	}
}

// RotateSigningKey replaces the deployment key old (the current one) by
// next: old signs that next succeeds it at now, next signs that it
// retired old, both are stored (twin_key_successions) with next's
// registration and audited ("cert.key.rotate", actor by) in one
// transaction, whose audit head next signs. From then on this handle
// signs with next, and a process holding old is refused
// (AML_CERT_KEY_RETIRED). Only the current key rotates: another is
// AML_CERT_KEY_MISMATCH or AML_CERT_KEY_RETIRED.
func (s *Store) RotateSigningKey(ctx context.Context, old, next CertSigner, by string, now time.Time) error {
	if old == nil || next == nil {
		return core.Errorf(core.CodeInvalidArgument, "rotate: the old and the new signing key are required")
	}
	oldID, oldPub := old.SigningKey()
	newID, newPub := next.SigningKey()
	if len(oldPub) != ed25519.PublicKeySize || len(newPub) != ed25519.PublicKeySize {
		return core.Errorf(core.CodeInvalidArgument, "rotate: the old and the new signing key are required")
	}
	if oldID == newID {
		return core.Errorf(core.CodeInvalidArgument, "rotate: the new key is the old key %s", oldID)
	}
	if by == "" {
		by = "aml"
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	cur, curPub, retired, err := currentKey(ctx, tx)
	if err != nil {
		return err
	}
	if cur == "" {
		return core.Errorf(core.CodeConflict, "rotate: no deployment key is registered yet (the first process that signs registers it)")
	}
	if at, ok := retired[oldID]; ok {
		return retiredError(oldID, cur, at)
	}
	if _, ok := retired[newID]; ok || newID == cur {
		return core.Errorf(core.CodeConflict, "rotate: key %s was used already", newID)
	}
	if cur != oldID || !curPub.Equal(oldPub) {
		return mismatchError(oldID, cur)
	}
	st := KeySuccession{OldKeyID: oldID, OldPublicKey: base64.StdEncoding.EncodeToString(oldPub),
		NewKeyID: newID, NewPublicKey: base64.StdEncoding.EncodeToString(newPub), At: now.UnixMilli()}
	d1, err := st.digest(SuccessionKind)
	if err != nil {
		return err
	}
	d2, err := st.digest(RetirementKind)
	if err != nil {
		return err
	}
	oldSig, err := old.SignDigest(hex.EncodeToString(d1))
	if err != nil {
		return err
	}
	newSig, err := next.SignDigest(hex.EncodeToString(d2))
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO twin_key_successions(old_key_id, old_public_key, new_key_id, new_public_key, succeeded_at, old_signature, new_signature, registered_by) VALUES (?,?,?,?,?,?,?,?)`,
		oldID, st.OldPublicKey, newID, st.NewPublicKey, st.At, oldSig, newSig, by); err != nil {
		if sqldb.IsUnique(err) {
			return core.Errorf(core.CodeConflict, "rotate: key %s was rotated already", oldID)
		}
		return sqldb.Err(err, "store the succession of key %s", oldID)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO twin_signing_keys(key_id, public_key, registered_by, registered_at) VALUES (?,?,?,?)`,
		newID, st.NewPublicKey, by, now.UnixMilli()); err != nil {
		return sqldb.Err(err, "register signing key %s", newID)
	}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, by, AuditKeyRotate, newID, "", map[string]any{"oldKeyId": oldID, "newKeyId": newID,
		"newPublicKey": st.NewPublicKey, "at": st.At}); err != nil {
		return err
	}
	if _, err := audit.New(s.db).CheckpointTx(ctx, tx, next); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return sqldb.Err(err, "commit the rotation to key %s", newID)
	}
	s.useSigner(next)
	return nil
}
