package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
)

// Signed checkpoints. The hash chain shows that entries were changed only
// to someone who cannot recompute it; anyone with write access to the
// database can rewrite an entry and every hash after it. A checkpoint is
// the log's head (seq, hash) signed with the deployment's certificate key,
// which lives outside the database (cert-key.json): a rewrite of any entry
// at or before a checkpoint no longer matches the signed hash, and a
// checkpoint cannot be forged. Checkpoints are written at every
// certificate lifecycle step (by the record store, in the step's
// transaction) and every CheckpointEvery entries appended through a log
// with a signer (WithSigner). Verify checks them when the log has keys
// (WithKeys).

// CheckpointEvery is the period, in entries, of the checkpoints a log
// with a signer writes on its own.
const CheckpointEvery = 64

// CheckpointKind is the kind of the signed checkpoint statement.
const CheckpointKind = "aml.audit.checkpoint/1"

// Checkpoint is one signed head of the log.
type Checkpoint struct {
	Seq       int64     `json:"seq"`
	Hash      string    `json:"hash"`
	KeyID     string    `json:"keyId"`
	Signature string    `json:"signature"` // base64 Ed25519 of the 32 bytes of CheckpointDigest
	At        time.Time `json:"at"`
}

// Signer signs checkpoints: the deployment's certificate key
// (*cert.KeyPair).
type Signer interface {
	// SigningKey is the key's id and public half.
	SigningKey() (id string, pub ed25519.PublicKey)
	// SignDigest signs the 32 raw bytes of a hex sha256 (base64 Ed25519).
	SignDigest(hexHash string) (string, error)
}

// Keys returns the trusted public key of a key id, nil for an unknown
// one.
type Keys func(keyID string) ed25519.PublicKey

// CheckpointDigest is the hex sha256 a checkpoint signs: of the canonical
// JSON {kind, seq, hash, keyId}.
func CheckpointDigest(seq int64, hash, keyID string) (string, error) {
	b, err := core.CanonicalJSON(map[string]any{"kind": CheckpointKind, "seq": seq, "hash": hash, "keyId": keyID})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Verify checks the checkpoint's signature with the key keys names for
// its key id.
func (c Checkpoint) Verify(keys Keys) error {
	var pub ed25519.PublicKey
	if keys != nil {
		pub = keys(c.KeyID)
	}
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("checkpoint at entry %d is signed by key %s, not a trusted key of this deployment", c.Seq, c.KeyID)
	}
	d, err := CheckpointDigest(c.Seq, c.Hash, c.KeyID)
	if err != nil {
		return err
	}
	digest, _ := hex.DecodeString(d)
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, digest, sig) {
		return fmt.Errorf("checkpoint at entry %d: the signature does not verify with key %s (a forged checkpoint)", c.Seq, c.KeyID)
	}
	return nil
}

// WithSigner returns a copy of the log that signs a checkpoint every
// CheckpointEvery entries it appends (nil: none).
func (l *Log) WithSigner(s Signer) *Log {
	c := *l
	c.signer = s
	return &c
}

// WithKeys returns a copy of the log whose Verify and VerifyHead also
// check the signed checkpoints with keys: each must verify and match the
// entry at its seq, and none may lie beyond the end of the log.
func (l *Log) WithKeys(keys Keys) *Log {
	c := *l
	c.keys = keys
	return &c
}

// RequireSigned returns a copy of the log whose keyed Verify also requires
// a signed checkpoint at every entry of one of actions after the first
// verified checkpoint (entries before it predate checkpointing): the
// actions the writer always checkpoints at their own entry, so that
// removing the checkpoints of a rewritten stretch is detected as long as
// an earlier checkpoint remains.
func (l *Log) RequireSigned(actions ...string) *Log {
	c := *l
	c.signed = map[string]bool{}
	for _, a := range actions {
		c.signed[a] = true
	}
	return &c
}

// CheckpointTx signs the log's current head with s inside the caller's
// write transaction and stores it (a head already checkpointed is kept).
// An empty log has nothing to sign: it returns a zero Checkpoint.
func (l *Log) CheckpointTx(ctx context.Context, tx *sqldb.Tx, s Signer) (Checkpoint, error) {
	if s == nil {
		return Checkpoint{}, core.Errorf(core.CodeInvalidArgument, "audit checkpoint: no signing key")
	}
	var cp Checkpoint
	switch err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&cp.Seq, &cp.Hash); {
	case errors.Is(err, sql.ErrNoRows):
		return Checkpoint{}, nil
	case err != nil:
		return Checkpoint{}, sqldb.Err(err, "audit: read head")
	}
	return cp, l.signTx(ctx, tx, s, &cp)
}

func (l *Log) signTx(ctx context.Context, tx *sqldb.Tx, s Signer, cp *Checkpoint) error {
	id, pub := s.SigningKey()
	if len(pub) != ed25519.PublicKeySize {
		return core.Errorf(core.CodeInvalidArgument, "audit checkpoint: no signing key")
	}
	cp.KeyID = id
	d, err := CheckpointDigest(cp.Seq, cp.Hash, id)
	if err != nil {
		return err
	}
	if cp.Signature, err = s.SignDigest(d); err != nil {
		return err
	}
	cp.At = time.UnixMilli(l.now().UnixMilli()).UTC()
	_, err = tx.ExecContext(ctx, `INSERT INTO audit_checkpoints(seq, hash, key_id, signature, created_at) VALUES (?,?,?,?,?) ON CONFLICT(seq) DO NOTHING`,
		cp.Seq, cp.Hash, cp.KeyID, cp.Signature, cp.At.UnixMilli())
	return sqldb.Err(err, "audit: store checkpoint at entry %d", cp.Seq)
}

// Checkpoint signs the current head with s in its own transaction.
func (l *Log) Checkpoint(ctx context.Context, s Signer) (Checkpoint, error) {
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return Checkpoint{}, sqldb.Err(err, "audit: begin")
	}
	defer tx.Rollback()
	cp, err := l.CheckpointTx(ctx, tx, s)
	if err != nil {
		return cp, err
	}
	return cp, sqldb.Err(tx.Commit(), "audit: commit checkpoint")
}

// AppendSigned appends an entry (Append) and then signs the new head
// with s (Checkpoint): each step of a record that lives in the log (an
// envelope, a step test) is covered by a checkpoint when it returns.
func (l *Log) AppendSigned(ctx context.Context, s Signer, actor, action, subject, lineID string, payload any) (Entry, error) {
	e, err := l.Append(ctx, actor, action, subject, lineID, payload)
	if err != nil {
		return e, err
	}
	_, err = l.Checkpoint(ctx, s)
	return e, err
}

// Checkpoints lists the stored checkpoints in seq order (unverified).
func (l *Log) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT seq, hash, key_id, signature, created_at FROM audit_checkpoints ORDER BY seq`)
	if err != nil {
		return nil, sqldb.Err(err, "audit: list checkpoints")
	}
	defer rows.Close()
	out := []Checkpoint{}
	for rows.Next() {
		var c Checkpoint
		var at int64
		if err := rows.Scan(&c.Seq, &c.Hash, &c.KeyID, &c.Signature, &at); err != nil {
			return nil, sqldb.Err(err, "audit: list checkpoints")
		}
		c.At = time.UnixMilli(at).UTC()
		out = append(out, c)
	}
	return out, sqldb.Err(rows.Err(), "audit: list checkpoints")
}

// SignedAt reports whether a checkpoint signed with a trusted key (keys)
// holds entry seq with hash: the proof that the entry is as it was when
// the deployment signed it.
func (l *Log) SignedAt(ctx context.Context, keys Keys, seq int64, hash string) (bool, error) {
	var c Checkpoint
	err := l.db.QueryRowContext(ctx, `SELECT seq, hash, key_id, signature FROM audit_checkpoints WHERE seq=?`, seq).Scan(&c.Seq, &c.Hash, &c.KeyID, &c.Signature)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, sqldb.Err(err, "audit: read checkpoint %d", seq)
	}
	return c.Hash == hash && c.Verify(keys) == nil, nil
}
