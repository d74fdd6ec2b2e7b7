package twinstore

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/twin/contract"
)

// CodeKeyMismatch refuses a process whose signing key is not the
// deployment's (HTTP 409): its certificates would not verify elsewhere.
const CodeKeyMismatch = core.CodeCertKeyMismatch

// AuditKeyRegister is the audit action of the deployment key's
// registration (subject: the key id).
const AuditKeyRegister = "cert.key.register"

// CertSigner is the certificate signing key as the store uses it — a
// *cert.KeyPair: its id and public half (RegisterSigningKey), and the
// issuing of a signed certificate from the rows IssueCertificate reads.
type CertSigner interface {
	// SigningKey is the key's id and public half ("" and nil for a nil
	// key).
	SigningKey() (id string, pub ed25519.PublicKey)
	// IssueCertificate builds and signs the certificate of in (cert.Issue;
	// ttl 0: cert.DefaultTTL).
	IssueCertificate(in contract.CertIssueInput, now time.Time, ttl time.Duration) (*contract.RecommendationCertificate, error)
	// SignDigest signs the 32 raw bytes of a hex sha256 (base64
	// Ed25519): signed statements and audit checkpoints.
	SignDigest(hexHash string) (string, error)
}

// RegisterSigningKey checks that key is the deployment's current signing
// key — the first registered, or the end of the chain of valid
// successions from it (RotateSigningKey) — registering it (with an audit
// entry) when the database has none yet. A key a succession retired is
// AML_CERT_KEY_RETIRED, any other AML_CERT_KEY_MISMATCH, both naming the
// current key.
// Every process that signs or verifies certificates calls it first, so a
// machine holding another key fails at once with the fix in the message
// instead of issuing certificates nobody else can verify.
func (s *Store) RegisterSigningKey(ctx context.Context, key CertSigner, by string) error {
	if key == nil {
		return core.Errorf(core.CodeInvalidArgument, "a certificate signing key is required")
	}
	keyID, pub := key.SigningKey()
	if len(pub) != ed25519.PublicKeySize {
		return core.Errorf(core.CodeInvalidArgument, "a certificate signing key is required")
	}
	s.useSigner(key)
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	// The current key is the end of the chain of valid successions from
	// the first registered key: a new key is accepted only through a
	// succession signed by the key before it (RotateSigningKey).
	id, curPub, retired, err := currentKey(ctx, tx)
	if err != nil {
		return err
	}
	switch at, isRetired := retired[keyID]; {
	case id == "":
	case id == keyID && curPub.Equal(pub):
		// A process start signs the audit head (a checkpoint).
		if _, err := audit.New(s.db).CheckpointTx(ctx, tx, key); err != nil {
			return err
		}
		return sqldb.Err(tx.Commit(), "commit audit checkpoint")
	case isRetired:
		return retiredError(keyID, id, at)
	default:
		return mismatchError(keyID, id)
	}
	if by == "" {
		by = "aml"
	}
	now := time.Now().UnixMilli()
	if _, err := tx.ExecContext(ctx, `INSERT INTO twin_signing_keys(key_id, public_key, registered_by, registered_at) VALUES (?,?,?,?)`,
		keyID, base64.StdEncoding.EncodeToString(pub), by, now); err != nil {
		return sqldb.Err(err, "register signing key %s", keyID)
	}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, by, AuditKeyRegister, keyID, "", map[string]any{"keyId": keyID,
		"publicKey": base64.StdEncoding.EncodeToString(pub)}); err != nil {
		return err
	}
	if _, err := audit.New(s.db).CheckpointTx(ctx, tx, key); err != nil {
		return err
	}
	return sqldb.Err(tx.Commit(), "commit signing key %s", keyID)
}

// DeploymentKeyID is the id of the deployment's current signing key (the
// first registered, or the last that a chain of valid successions from it
// installed), "" when none is registered yet.
func (s *Store) DeploymentKeyID(ctx context.Context) (string, error) {
	id, _, _, err := currentKey(ctx, s.db)
	return id, err
}

func mismatchError(keyID, id string) error {
	return &core.Error{Code: CodeKeyMismatch, Field: "keyId",
		Message: "this data directory's certificate signing key " + keyID + " is not the deployment's key " + id +
			" registered in the database: every process sharing the database must sign with the same key — copy cert-key.json from a data directory holding key " + id + " into this one (aml cert key shows the id)"}
}

// MissingKeyError is the refusal for a data directory without a signing
// key in a deployment that has one: creating a new key there would only
// make a key that is refused.
func MissingKeyError(keyID string) error {
	return &core.Error{Code: CodeKeyMismatch, Field: "keyId",
		Message: "this data directory has no certificate signing key and the database's deployment signs with key " + keyID +
			": copy cert-key.json from a data directory holding key " + keyID + " into this one (aml cert key shows the id)"}
}
