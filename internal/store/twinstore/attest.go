package twinstore

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Signed statements (security issue #16). A certificate row says who
// approved it and whether it was executed, but anyone with write access
// to the database can edit a row. What authorises a write is therefore
// signed with the deployment key, which lives outside the database:
//
//   - an approval is the statement {certificate id and hash, approver,
//     approver's role, approval time} signed when the store approves
//     (ApproveCertificateAs), stored in twin_attestations and named by
//     its hash in the "cert.approve" audit entry;
//   - an execution is the statement {certificate id and hash, line, run,
//     actor, claim time} signed when a governed write claims its line
//     (ClaimCertificateWrite), at most one per certificate;
//   - every lifecycle step (issue, approve, claim, execute, revoke,
//     expire) signs the audit log's head (an audit checkpoint), so the
//     certificate's audit anchor and its trail are signed too.
//
// The write guard (twin/govern) checks them all before any write.

// Kinds of attestations (twin_attestations.kind) and of their statements.
const (
	AttestApprove = "approve"
	AttestExecute = "execute"

	ApprovalKind  = "aml.cert.approval/1"
	ExecutionKind = "aml.cert.execution/1"
)

// Roles that may approve (auth.RoleApprover, auth.RoleAdmin): an approval
// statement naming another role authorises nothing.
const (
	RoleApprover = "approver"
	RoleAdmin    = "admin"
)

// Approver is the person approving: their name and role (the
// principal's).
type Approver struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// ApprovalStatement is what an approval signs.
type ApprovalStatement struct {
	Kind            string `json:"kind"`
	CertificateID   string `json:"certificateId"`
	CertificateHash string `json:"certificateHash"`
	ApprovedBy      string `json:"approvedBy"`
	ApproverRole    string `json:"approverRole"`
	ApprovedAt      int64  `json:"approvedAt"` // epoch ms
	KeyID           string `json:"keyId"`
}

// ExecutionStatement is what an execution claim signs.
type ExecutionStatement struct {
	Kind            string `json:"kind"`
	CertificateID   string `json:"certificateId"`
	CertificateHash string `json:"certificateHash"`
	LineID          string `json:"lineId"`
	RunID           string `json:"runId"`
	Actor           string `json:"actor"`
	At              int64  `json:"at"` // epoch ms
	KeyID           string `json:"keyId"`
}

// Attestation is a stored signed statement.
type Attestation struct {
	Subject   string          `json:"subject"`
	Kind      string          `json:"kind"`
	Statement json.RawMessage `json:"statement"` // canonical JSON
	Hash      string          `json:"hash"`      // sha256 of Statement
	KeyID     string          `json:"keyId"`
	Signature string          `json:"signature"` // base64 Ed25519 of the 32 hash bytes
	CreatedAt time.Time       `json:"createdAt"`
}

func attestErr(format string, args ...any) error {
	return core.Errorf(core.CodeCertInvalid, format, args...)
}

// Verify checks that the statement hashes to Hash and that Signature is
// pub's signature of it, pub being the key KeyID names.
func (a *Attestation) Verify(pub ed25519.PublicKey) error {
	if a == nil {
		return attestErr("no signed statement")
	}
	if len(pub) != ed25519.PublicKeySize || contract.CertKeyID(pub) != a.KeyID {
		return attestErr("the %s statement of %s is signed by key %s, neither the deployment key nor a key it retired", a.Kind, a.Subject, a.KeyID)
	}
	sum := sha256.Sum256(a.Statement)
	if hex.EncodeToString(sum[:]) != a.Hash {
		return attestErr("the %s statement of %s does not hash to its recorded hash: it was edited", a.Kind, a.Subject)
	}
	sig, err := base64.StdEncoding.DecodeString(a.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, sum[:], sig) {
		return attestErr("the signature of the %s statement of %s does not verify with key %s", a.Kind, a.Subject, a.KeyID)
	}
	return nil
}

func decodeStatement(a *Attestation, v any) error {
	dec := json.NewDecoder(bytes.NewReader(a.Statement))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return attestErr("the %s statement of %s does not decode: %v", a.Kind, a.Subject, err)
	}
	return nil
}

// TrailApproval reads the signed approval an audit entry of a record
// that lives in the log holds (payload {"approval": attestation}: an
// envelope's or a step test's), verifies it with the key of ring it names
// and decodes its statement into stmt. noun and id name the record in the
// errors (AML_CERT_INVALID). The caller checks that the statement is the
// record's.
func TrailApproval(en audit.Entry, ring *Keyring, noun, id string, stmt any) (*Attestation, error) {
	var p struct {
		Approval *Attestation `json:"approval"`
	}
	if err := json.Unmarshal(en.Payload, &p); err != nil || p.Approval == nil {
		return nil, core.Errorf(core.CodeCertInvalid, "approval entry %d of %s %s holds no signed statement", en.Seq, noun, id)
	}
	a := p.Approval
	if err := a.Verify(ring.Key(a.KeyID)); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(a.Statement, stmt); err != nil {
		return nil, core.Errorf(core.CodeCertInvalid, "the approval of %s %s does not decode: %v", noun, id, err)
	}
	return a, nil
}

// CheckApproval verifies a's signature with pub and that it is the signed
// approval of c as c records it: same certificate and hash, approver and
// approval time; an approver role that approves (approver, admin), a name
// that may enter AML (core.CheckName), and not the requester
// (contract.SameIdentity). AML_CERT_INVALID names what is wrong.
func CheckApproval(c *contract.RecommendationCertificate, a *Attestation, pub ed25519.PublicKey) error {
	return checkApproval(c, a, pub)
}

// CheckApprovalWith is CheckApproval with the trusted key of ring that the
// statement's key id names.
func CheckApprovalWith(c *contract.RecommendationCertificate, a *Attestation, ring *Keyring) error {
	if a == nil {
		return attestErr("no signed statement")
	}
	return checkApproval(c, a, ring.Key(a.KeyID))
}

func checkApproval(c *contract.RecommendationCertificate, a *Attestation, pub ed25519.PublicKey) error {
	if err := a.Verify(pub); err != nil {
		return err
	}
	var st ApprovalStatement
	if err := decodeStatement(a, &st); err != nil {
		return err
	}
	var bad []string
	check := func(ok bool, what string) {
		if !ok {
			bad = append(bad, what)
		}
	}
	check(a.Kind == AttestApprove && st.Kind == ApprovalKind, "kind")
	check(a.Subject == c.RecommendationID && st.CertificateID == c.RecommendationID, "certificate id")
	check(st.CertificateHash == c.CertificateHash, "certificate hash")
	check(st.ApprovedBy == c.ApprovedBy, "approver")
	check(st.ApprovedAt == c.ApprovedAt.UnixMilli() && !c.ApprovedAt.IsZero(), "approval time")
	check(st.KeyID == a.KeyID, "key id")
	if len(bad) > 0 {
		return attestErr("the signed approval of %s does not match the certificate (%s): it belongs to another approval", c.RecommendationID, strings.Join(bad, ", "))
	}
	if st.ApproverRole != RoleApprover && st.ApproverRole != RoleAdmin {
		return attestErr("certificate %s was approved by %s with role %q: only a person with the approver or admin role approves", c.RecommendationID, st.ApprovedBy, st.ApproverRole)
	}
	if err := core.CheckName("approvedBy", st.ApprovedBy); err != nil || strings.TrimSpace(st.ApprovedBy) == "" {
		return attestErr("certificate %s names approver %+q, not a valid name", c.RecommendationID, st.ApprovedBy)
	}
	if contract.SameIdentity(st.ApprovedBy, c.CreatedBy) {
		return attestErr("certificate %s was approved by its requester %s", c.RecommendationID, c.CreatedBy)
	}
	return nil
}

// Execution decodes an execution statement.
func (a *Attestation) Execution() (ExecutionStatement, error) {
	var st ExecutionStatement
	err := decodeStatement(a, &st)
	return st, err
}

// SignStatement builds the attestation of kind about subject: stmt's
// canonical JSON, its hash signed with key, created at now (UTC, whole
// milliseconds). Certificates (here) and the records that live in the
// audit log (envelopes, step tests) sign their approvals with it.
func SignStatement(key audit.Signer, subject, kind string, stmt any, now time.Time) (*Attestation, error) {
	b, err := core.CanonicalJSON(stmt)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	a := &Attestation{Subject: subject, Kind: kind, Statement: b, Hash: hex.EncodeToString(sum[:]), CreatedAt: msTime(now.UnixMilli())}
	a.KeyID, _ = key.SigningKey()
	if a.Signature, err = key.SignDigest(a.Hash); err != nil {
		return nil, err
	}
	return a, nil
}

func insertAttestation(ctx context.Context, tx *sqldb.Tx, a *Attestation) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO twin_attestations(subject, kind, statement_json, hash, key_id, signature, created_at) VALUES (?,?,?,?,?,?,?)`,
		a.Subject, a.Kind, string(a.Statement), a.Hash, a.KeyID, a.Signature, a.CreatedAt.UnixMilli())
	if sqldb.IsUnique(err) {
		return core.FieldErrorf(core.CodeConflict, "certificateId", "certificate %s already has a signed %s statement: it cannot be %sd again", a.Subject, a.Kind, a.Kind)
	}
	return sqldb.Err(err, "store the %s statement of %s", a.Kind, a.Subject)
}

// GetAttestation returns the signed statement of kind about subject
// (unverified: see Attestation.Verify, CheckApproval); AML_NOT_FOUND when
// there is none.
func (s *Store) GetAttestation(ctx context.Context, subject, kind string) (*Attestation, error) {
	a := &Attestation{Subject: subject, Kind: kind}
	var js string
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT statement_json, hash, key_id, signature, created_at FROM twin_attestations WHERE subject=? AND kind=?`, subject, kind).
		Scan(&js, &a.Hash, &a.KeyID, &a.Signature, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(kind+" statement", subject)
	}
	if err != nil {
		return nil, sqldb.Err(err, "read the %s statement of %s", kind, subject)
	}
	a.Statement, a.CreatedAt = json.RawMessage(js), msTime(at)
	return a, nil
}

// The process's signing keys. Signing needs the private key, which only
// the process holding the data directory's cert-key.json has; the store
// learns it when a process registers it (RegisterSigningKey) or issues
// with it (IssueCertificate, ApproveCertificateAs), and finds it again by
// the key id a certificate names.
var signers sync.Map // key id → CertSigner

func (s *Store) useSigner(key CertSigner) {
	if key == nil {
		return
	}
	id, pub := key.SigningKey()
	if len(pub) != ed25519.PublicKeySize {
		return
	}
	signers.Store(id, key)
	s.signer.Store(signerBox{key})
}

type signerBox struct{ CertSigner }

// signerFor is the process's signing key of id (nil: none).
func signerFor(id string) CertSigner {
	if v, ok := signers.Load(id); ok {
		return v.(CertSigner)
	}
	return nil
}

func needSigner(id string) (CertSigner, error) {
	if k := signerFor(id); k != nil {
		return k, nil
	}
	return nil, core.Errorf(core.CodeInvalidArgument, "this process holds no signing key %s: approvals and executions are signed with the deployment key (register it first: RegisterSigningKey)", id)
}

// auditLog is the audit log through this handle: it signs a checkpoint
// every audit.CheckpointEvery entries with the handle's signing key,
// unless a rotation retired that key (then the entries are left to the
// next checkpoint of the current key: recording never fails for it).
func (s *Store) auditLog(ctx context.Context, q sqldb.Querier) *audit.Log {
	l := audit.New(s.db)
	if b, ok := s.signer.Load().(signerBox); ok && checkSigner(ctx, q, b.CertSigner) == nil {
		l = l.WithSigner(b.CertSigner)
	}
	return l
}

// KeysOf is the audit.Keys of the given trusted public keys.
func KeysOf(pubs ...ed25519.PublicKey) audit.Keys {
	m := map[string]ed25519.PublicKey{}
	for _, p := range pubs {
		if len(p) == ed25519.PublicKeySize {
			m[contract.CertKeyID(p)] = p
		}
	}
	return func(id string) ed25519.PublicKey { return m[id] }
}

// RingLog is KeyedLog with the keys of ring.
func RingLog(l *audit.Log, ring *Keyring) *audit.Log {
	return l.WithKeys(ring.Keys()).RequireSigned(AuditCertIssue, AuditCertApprove)
}

// KeyedLog is l verified with the trusted keys pubs: its signed
// checkpoints checked (audit.Log.WithKeys), and one required at every
// certificate issue and approval entry after the first checkpoint — the
// steps this store always checkpoints (audit.Log.RequireSigned).
func KeyedLog(l *audit.Log, pubs ...ed25519.PublicKey) *audit.Log {
	return l.WithKeys(KeysOf(pubs...)).RequireSigned(AuditCertIssue, AuditCertApprove)
}

// checkpointTx signs the audit head with this handle's signing key (the
// one it registered or last signed with), else the process's key of
// keyID, when it holds one (a process without a key cannot sign; its
// steps are covered by the next checkpoint). A retired key is refused
// (AML_CERT_KEY_RETIRED).
func (s *Store) checkpointTx(ctx context.Context, tx *sqldb.Tx, keyID string) error {
	var k CertSigner
	if b, ok := s.signer.Load().(signerBox); ok {
		k = b.CertSigner
	} else {
		k = signerFor(keyID)
	}
	if k == nil {
		return nil
	}
	if err := checkSigner(ctx, tx, k); err != nil {
		return err
	}
	_, err := audit.New(s.db).CheckpointTx(ctx, tx, k)
	return err
}

// AuditWrites are the governed writes the audit log recorded on lineID at
// or after since ("write.start" claims and "write.attempt" node writes):
// the write history as the hash-chained, checkpointed log has it, for a
// guard that does not trust twin_writes alone.
func (s *Store) AuditWrites(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT action, subject, payload FROM audit_log WHERE line_id=? AND action IN (?, ?) ORDER BY seq`, lineID, AuditWriteStart, AuditWriteAttempt)
	if err != nil {
		return nil, sqldb.Err(err, "read the audited writes of line %s", lineID)
	}
	defer rows.Close()
	out := []contract.WriteRow{}
	for rows.Next() {
		var action, subject, p string
		if err := rows.Scan(&action, &subject, &p); err != nil {
			return nil, sqldb.Err(err, "read the audited writes of line %s", lineID)
		}
		var w struct {
			WriteID    int64   `json:"writeId"`
			NodeID     string  `json:"nodeId"`
			VariableID string  `json:"variableId"`
			Value      float64 `json:"value"`
			Delta      float64 `json:"delta"`
			RunID      string  `json:"runId"`
			At         int64   `json:"at"`
		}
		if err := json.Unmarshal([]byte(p), &w); err != nil {
			return nil, core.Errorf(core.CodeAuditTampered, "audit entry %s of %s has a payload that does not decode: %v", action, subject, err)
		}
		if w.At < since.UnixMilli() {
			continue
		}
		outcome := contract.WriteAttempted
		if action == AuditWriteStart {
			outcome = contract.WriteClaim
			w.NodeID, w.VariableID = "", ""
		}
		out = append(out, contract.WriteRow{WriteRecord: contract.WriteRecord{LineID: lineID, NodeID: w.NodeID, CertificateID: subject, RunID: w.RunID,
			At: msTime(w.At), Value: w.Value, Delta: w.Delta}, ID: w.WriteID, VariableID: w.VariableID, Outcome: outcome})
	}
	return out, sqldb.Err(rows.Err(), "read the audited writes of line %s", lineID)
}

func approvalStatement(c *contract.RecommendationCertificate, role, keyID string) ApprovalStatement {
	return ApprovalStatement{Kind: ApprovalKind, CertificateID: c.RecommendationID, CertificateHash: c.CertificateHash,
		ApprovedBy: c.ApprovedBy, ApproverRole: role, ApprovedAt: c.ApprovedAt.UnixMilli(), KeyID: keyID}
}

// NameRoles are the roles of the API tokens (revoked ones included) whose
// name is name (core.SameName): an approval by a name that an agent's
// token carries is not a person's.
func (s *Store) NameRoles(ctx context.Context, name string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, role FROM api_tokens`)
	if err != nil {
		return nil, sqldb.Err(err, "read token names")
	}
	defer rows.Close()
	seen := map[string]bool{}
	out := []string{}
	for rows.Next() {
		var n, r string
		if err := rows.Scan(&n, &r); err != nil {
			return nil, sqldb.Err(err, "read token names")
		}
		if core.SameName(n, name) && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out, sqldb.Err(rows.Err(), "read token names")
}
