package twinstore

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Audit actions of certificates. Each entry's subject is the
// certificate id (recommendationId).
const (
	AuditCertIssue   = "cert.issue"
	AuditCertApprove = "cert.approve"
	AuditCertRevoke  = "cert.revoke"
	AuditCertExpire  = "cert.expire"
	AuditCertExecute = "cert.execute"
)

// ExpiryActor is the audit actor of expiries noticed by the store (a
// sweep, or a transition that found the certificate expired).
const ExpiryActor = "aml-expiry"

func certInvalid(format string, args ...any) *core.Error {
	return core.Errorf(core.CodeCertInvalid, format, args...)
}

func refused(field, format string, args ...any) *core.Error {
	return core.Invalid(core.CodeCertRefused, []core.Problem{{Field: field, Message: fmt.Sprintf(format, args...)}})
}

// IssueCertificate certifies the stored trial trialID for requester: the
// trial must be stored and intact, pass (every constraint passed, in
// distribution) and improve on the baseline (AML_CERT_REFUSED otherwise;
// AML_NOT_FOUND for a missing trial, snapshot, scene or model). The
// certificate's hashes come from stored rows, read in the same write
// transaction: the trial's hash, the snapshot's hash (twin_snapshots), the
// frozen scene the snapshot was taken on, the model's registered artifact
// hash (models.artifact_hash) and the objective's hash (the trial's
// provenance "objectiveHash" when it recorded one — the profile it was
// optimised for — else the stored objective profile). key issues and
// signs it (cert.Issue for a *cert.KeyPair; ttl 0: cert.DefaultTTL). The row and its audit entry
// ("cert.issue", actor requester) commit together; the entry's seq and
// hash are stored with the row.
func (s *Store) IssueCertificate(ctx context.Context, trialID, requester string, key CertSigner, ttl time.Duration, now time.Time) (*contract.CertRecord, error) {
	if err := requireID("trial", trialID); err != nil {
		return nil, err
	}
	if strings.TrimSpace(requester) == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "requester", "the requester is required")
	}
	if key == nil {
		return nil, core.Errorf(core.CodeInvalidArgument, "issue: no signing key")
	}
	if _, pub := key.SigningKey(); pub == nil { // a nil *cert.KeyPair
		return nil, core.Errorf(core.CodeInvalidArgument, "issue: no signing key")
	}
	s.useSigner(key)
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	if err := checkSigner(ctx, tx, key); err != nil {
		return nil, err
	}

	tr, err := getTrial(ctx, tx, trialID)
	if err != nil {
		return nil, err
	}
	t := tr.Trial
	if !tr.Passed {
		return nil, refused("trial", "trial %s did not pass (%s): %s", trialID, tr.RejectCode, strings.Join(t.FailureReasons(), "; "))
	}
	if !(t.BaselineComparison.Improvement > 0) {
		return nil, refused("trial.baselineComparison.improvement", "trial %s does not improve on the baseline (improvement %v)", trialID, t.BaselineComparison.Improvement)
	}
	snap, err := s.GetSnapshot(ctx, t.SnapshotID) // immutable rows: read outside the transaction
	if err != nil {
		return nil, err
	}
	if ph := t.Provenance["snapshotHash"]; ph != "" && ph != snap.SnapshotHash {
		return nil, refused("trial.provenance.snapshotHash", "trial %s ran from snapshot hash %s, the stored snapshot %s hashes to %s", trialID, ph, snap.SnapshotID, snap.SnapshotHash)
	}
	scene, err := sceneRow(tx.QueryRowContext(ctx, `SELECT `+sceneCols+` FROM scenes WHERE scene_id=? AND version=?`, snap.SceneID, snap.SceneVersion))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("scene", SceneSubject(snap.SceneID, snap.SceneVersion))
	}
	if err != nil {
		return nil, err
	}
	var modelHash string
	switch err := tx.QueryRowContext(ctx, `SELECT artifact_hash FROM models WHERE id=?`, t.ModelID).Scan(&modelHash); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, notFound("model", t.ModelID)
	case err != nil:
		return nil, sqldb.Err(err, "read model %s", t.ModelID)
	}
	objHash := t.Provenance["objectiveHash"]
	if objHash == "" {
		if _, objHash, err = getObjective(ctx, tx, t.ObjectiveID); err != nil {
			return nil, err
		}
	}
	c, err := key.IssueCertificate(contract.CertIssueInput{CreatedBy: requester, Scene: scene, Trial: t, SnapshotHash: snap.SnapshotHash, ModelHash: modelHash, ObjectiveHash: objHash}, now, ttl)
	if err != nil {
		return nil, err
	}
	js, err := core.CanonicalJSON(c)
	if err != nil {
		return nil, err
	}
	payload := map[string]any{
		"certificateHash": c.CertificateHash, "keyId": c.KeyID, "trialId": c.TrialID, "trialHash": c.TrialHash,
		"sceneId": c.SceneID, "sceneVersion": c.SceneVersion, "sceneHash": c.SceneHash, "snapshotHash": c.SnapshotHash,
		"modelHash": c.ModelHash, "objectiveHash": c.ObjectiveHash, "expiresAt": c.ExpiresAt.UnixMilli(), "status": string(c.Status),
		"improvement": c.BaselineComparison.Improvement,
	}
	e, err := s.auditLog(ctx, tx).AppendTx(ctx, tx, requester, AuditCertIssue, c.RecommendationID, scene.LineID, payload)
	if err != nil {
		return nil, err
	}
	nowMs := c.IssuedAt.UnixMilli()
	_, err = tx.ExecContext(ctx, `INSERT INTO twin_certificates(certificate_id, trial_id, line_id, status, hash, created_by, approved_by, created_at, expires_at, updated_at, cert_json, audit_seq, audit_hash, candidate_executed)
		VALUES (?,?,?,?,?,?,'',?,?,?,?,?,?,0)`, c.RecommendationID, c.TrialID, scene.LineID, c.Status, c.CertificateHash, c.CreatedBy,
		c.CreatedAt.UnixMilli(), c.ExpiresAt.UnixMilli(), nowMs, string(js), e.Seq, e.Hash)
	if sqldb.IsUnique(err) {
		return nil, core.FieldErrorf(core.CodeConflict, "recommendationId", "certificate %q already exists", c.RecommendationID)
	}
	if err != nil {
		return nil, sqldb.Err(err, "insert certificate %s", c.RecommendationID)
	}
	// The anchor (the issue entry's seq and hash) is signed: a checkpoint
	// of the head it is.
	if _, err := audit.New(s.db).CheckpointTx(ctx, tx, key); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, sqldb.Err(err, "commit certificate %s", c.RecommendationID)
	}
	return &contract.CertRecord{Cert: c, LineID: scene.LineID, AuditSeq: e.Seq, AuditHash: e.Hash, UpdatedAt: msTime(nowMs)}, nil
}

const certCols = `certificate_id, trial_id, line_id, status, hash, created_by, approved_by, created_at, expires_at, updated_at, cert_json, audit_seq, audit_hash, candidate_executed`

// certRow scans one row of certCols and checks that the JSON decodes into
// a valid certificate agreeing with every column; with ring it also
// verifies the hash and the signature with the trusted key the
// certificate's keyId names (Keyring.VerifyCert). Any disagreement is
// AML_CERT_INVALID. sql.ErrNoRows passes through.
func certRow(sc interface{ Scan(...any) error }, ring *Keyring) (*contract.CertRecord, error) {
	var (
		id, trial, status, hash, createdBy, approvedBy, js string
		created, expires, updated                          int64
		executed                                           int
		r                                                  contract.CertRecord
	)
	if err := sc.Scan(&id, &trial, &r.LineID, &status, &hash, &createdBy, &approvedBy, &created, &expires, &updated, &js, &r.AuditSeq, &r.AuditHash, &executed); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, sqldb.Err(err, "read certificate")
	}
	r.UpdatedAt = msTime(updated)
	c, err := contract.ParseCertificate([]byte(js))
	if err != nil {
		return nil, certInvalid("stored certificate %s does not decode: %v", id, err)
	}
	var bad []string
	check := func(ok bool, col string) {
		if !ok {
			bad = append(bad, col)
		}
	}
	check(c.RecommendationID == id, "certificate_id")
	check(c.TrialID == trial, "trial_id")
	check(string(c.Status) == status, "status")
	check(c.CertificateHash == hash, "hash")
	check(c.CreatedBy == createdBy, "created_by")
	check(c.ApprovedBy == approvedBy, "approved_by")
	check(c.CreatedAt.UnixMilli() == created, "created_at")
	check(c.ExpiresAt.UnixMilli() == expires, "expires_at")
	check(executed == 0, "candidate_executed")
	if len(bad) > 0 {
		return nil, certInvalid("stored certificate %s: columns %s disagree with the certificate: the row was edited outside AML", id, strings.Join(bad, ", "))
	}
	if ring != nil {
		if err := ring.VerifyCert(c); err != nil {
			return nil, certInvalid("stored certificate %s fails verification: %s", id, errMessage(err))
		}
	}
	r.Cert = c
	return &r, nil
}

func getCert(ctx context.Context, db sqldb.Querier, id string, pub ed25519.PublicKey) (*contract.CertRecord, error) {
	var ring *Keyring
	if pub != nil {
		var err error
		if ring, err = keyringOf(ctx, db, pub); err != nil {
			return nil, err
		}
	}
	r, err := certRow(db.QueryRowContext(ctx, `SELECT `+certCols+` FROM twin_certificates WHERE certificate_id=?`, id), ring)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("certificate", id)
	}
	return r, err
}

// GetCertificate returns a stored certificate after checking the row and
// verifying its hash and signature with the keyring of pub, the data
// directory's key (Keyring: pub and the keys it retired or was succeeded
// by, through signed successions) — AML_CERT_INVALID when tampered or
// signed by an untrusted key; AML_NOT_FOUND when absent. pub is required.
func (s *Store) GetCertificate(ctx context.Context, id string, pub ed25519.PublicKey) (*contract.CertRecord, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, core.Errorf(core.CodeInvalidArgument, "a certificate verification key is required")
	}
	return getCert(ctx, s.db, id, pub)
}

// LoadCertificate returns a stored certificate after checking that its
// row agrees with its JSON, without verifying the signature: for callers
// that verify themselves (the write guard runs cert.Verify as one of its
// checks and denies with CERT_INVALID).
func (s *Store) LoadCertificate(ctx context.Context, id string) (*contract.CertRecord, error) {
	return getCert(ctx, s.db, id, nil)
}

// ListCertificates returns stored certificates, newest first. Each is
// checked as in GetCertificate (when pub is given); a certificate that
// fails is listed with Verified false and the Problem rather than failing
// the list (a row that does not decode at all is listed with its id and
// status only).
func (s *Store) ListCertificates(ctx context.Context, f contract.CertFilter, pub ed25519.PublicKey) ([]contract.CertListItem, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	if f.Status != "" && !f.Status.Valid() {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "status", "status must be ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED, not %q", string(f.Status))
	}
	var ring *Keyring
	if pub != nil {
		var err error
		if ring, err = keyringOf(ctx, s.db, pub); err != nil {
			return nil, err
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+certCols+` FROM twin_certificates WHERE (?1='' OR status=?1) AND (?2='' OR line_id=?2)
		ORDER BY created_at DESC, certificate_id DESC LIMIT ?3`, string(f.Status), f.LineID, limit)
	if err != nil {
		return nil, sqldb.Err(err, "list certificates")
	}
	defer rows.Close()
	out := []contract.CertListItem{}
	for rows.Next() {
		raw := rawCertRow{rows: rows}
		r, err := certRow(&raw, ring)
		if err != nil {
			if core.CodeOf(err) != core.CodeCertInvalid {
				return nil, err
			}
			out = append(out, contract.CertListItem{CertRecord: contract.CertRecord{LineID: raw.line, Cert: raw.minimal()}, Problem: errMessage(err)})
			continue
		}
		out = append(out, contract.CertListItem{CertRecord: *r, Verified: pub != nil})
	}
	return out, sqldb.Err(rows.Err(), "list certificates")
}

// rawCertRow scans from rows into a certRow scan while keeping the raw
// column values, so a list can show a row that fails its checks.
type rawCertRow struct {
	rows                  interface{ Scan(...any) error }
	id, line, status      string
	created, expires      int64
	createdBy, approvedBy string
}

func (r *rawCertRow) Scan(dest ...any) error {
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.id, r.line, r.status = *dest[0].(*string), *dest[2].(*string), *dest[3].(*string)
	r.createdBy, r.approvedBy = *dest[5].(*string), *dest[6].(*string)
	r.created, r.expires = *dest[7].(*int64), *dest[8].(*int64)
	return nil
}

// minimal is what a list shows of a row that fails its checks: the
// columns only (status verbatim, even when not a valid status).
func (r *rawCertRow) minimal() *contract.RecommendationCertificate {
	return &contract.RecommendationCertificate{RecommendationID: r.id, Status: contract.CertStatus(r.status), CreatedBy: r.createdBy, ApprovedBy: r.approvedBy,
		CreatedAt: msTime(r.created), ExpiresAt: msTime(r.expires)}
}

// transition applies one lifecycle step to certificate id in one write
// transaction: read and verify the row (pub required), apply step (a cert
// package transition), then compare-and-set the row on the status read
// and append the audit entry. If step failed because it found the
// certificate expired (and marked it EXPIRED), the expiry is persisted and
// audited ("cert.expire") and step's error returned.
func (s *Store) transition(ctx context.Context, id string, pub ed25519.PublicKey, actor, action string, payload map[string]any, step func(c *contract.RecommendationCertificate) error) (*contract.CertRecord, error) {
	return s.signedTransition(ctx, id, pub, actor, action, payload, step, nil)
}

// statementSigner signs the statement of a lifecycle step (an approval).
type statementSigner struct {
	key       CertSigner
	kind      string
	statement func(c *contract.RecommendationCertificate, keyID string) any
}

// signedTransition is transition that, when sign is given, also stores
// the step's signed statement (twin_attestations) in the same
// transaction, named by its hash in the audit entry ("statementHash").
func (s *Store) signedTransition(ctx context.Context, id string, pub ed25519.PublicKey, actor, action string, payload map[string]any, step func(c *contract.RecommendationCertificate) error, sign *statementSigner) (*contract.CertRecord, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, core.Errorf(core.CodeInvalidArgument, "a certificate verification key is required")
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	r, err := getCert(ctx, tx, id, pub)
	if err != nil {
		return nil, err
	}
	c := r.Cert
	prev := c.Status
	if serr := step(c); serr != nil {
		if c.Status == contract.CertExpired && prev != contract.CertExpired {
			if err := s.persistCert(ctx, tx, r, prev, ExpiryActor, AuditCertExpire, map[string]any{"from": string(prev), "expiresAt": c.ExpiresAt.UnixMilli(), "noticedBy": action}); err != nil {
				return nil, err
			}
			if err := tx.Commit(); err != nil {
				return nil, sqldb.Err(err, "commit expiry of certificate %s", id)
			}
		}
		return nil, serr
	}
	if payload == nil {
		payload = map[string]any{}
	}
	payload["from"], payload["to"], payload["certificateHash"] = string(prev), string(c.Status), c.CertificateHash
	if sign != nil {
		if err := checkSigner(ctx, tx, sign.key); err != nil {
			return nil, err
		}
		keyID, _ := sign.key.SigningKey()
		a, err := SignStatement(sign.key, c.RecommendationID, sign.kind, sign.statement(c, keyID), time.Now())
		if err != nil {
			return nil, err
		}
		if err := insertAttestation(ctx, tx, a); err != nil {
			return nil, err
		}
		payload["statementHash"] = a.Hash
	}
	if err := s.persistCert(ctx, tx, r, prev, actor, action, payload); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, sqldb.Err(err, "commit certificate %s", id)
	}
	return r, nil
}

// persistCert writes r's lifecycle record, provided the row still has
// status prev (compare-and-set), and appends the audit entry.
func (s *Store) persistCert(ctx context.Context, tx *sqldb.Tx, r *contract.CertRecord, prev contract.CertStatus, actor, action string, payload map[string]any) error {
	c := r.Cert
	js, err := core.CanonicalJSON(c)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	res, err := tx.ExecContext(ctx, `UPDATE twin_certificates SET status=?, approved_by=?, cert_json=?, updated_at=? WHERE certificate_id=? AND status=?`,
		c.Status, c.ApprovedBy, string(js), now, c.RecommendationID, prev)
	if err != nil {
		return sqldb.Err(err, "update certificate %s", c.RecommendationID)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return core.FieldErrorf(core.CodeConflict, "status", "certificate %s is no longer %s", c.RecommendationID, prev)
	}
	r.UpdatedAt = msTime(now)
	if _, err = s.auditLog(ctx, tx).AppendTx(ctx, tx, actor, action, c.RecommendationID, r.LineID, payload); err != nil {
		return err
	}
	// Every lifecycle step signs the audit head (when this process holds
	// the certificate's key).
	return s.checkpointTx(ctx, tx, c.KeyID)
}

// ApproveCertificate moves an ISSUED certificate to APPROVED by approver
// (contract.RecommendationCertificate.Approve: the requester can never approve — AML_FORBIDDEN; an
// expired certificate is marked EXPIRED — AML_CERT_EXPIRED). The status
// change is a compare-and-set on ISSUED: of two approvers racing, one wins
// and the other gets AML_CONFLICT. Audited as "cert.approve".
//
// The approval is signed (ApproveCertificateAs) with the process's signing
// key of pub, as by a person with the approver role: the caller has
// checked the approver's role.
func (s *Store) ApproveCertificate(ctx context.Context, id, approver string, pub ed25519.PublicKey, now time.Time) (*contract.CertRecord, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, core.Errorf(core.CodeInvalidArgument, "a certificate verification key is required")
	}
	key, err := needSigner(contract.CertKeyID(pub))
	if err != nil {
		return nil, err
	}
	return s.ApproveCertificateAs(ctx, id, Approver{Name: approver, Role: RoleApprover}, key, now)
}

// ApproveCertificateAs is ApproveCertificate by the person by (their name
// and role) that also signs the approval with key: the statement
// {certificate id and hash, approver, role, approval time}
// (ApprovalStatement) is stored in the same transaction as the status
// change and named by its hash in the "cert.approve" entry, whose head is
// signed too (an audit checkpoint). Only the approver and admin roles
// approve (AML_FORBIDDEN otherwise); the name must be one that may enter
// AML (core.CheckName). The write guard executes only a certificate whose
// signed approval matches its row (CheckApproval).
func (s *Store) ApproveCertificateAs(ctx context.Context, id string, by Approver, key CertSigner, now time.Time) (*contract.CertRecord, error) {
	if key == nil {
		return nil, core.Errorf(core.CodeInvalidArgument, "approve: no signing key")
	}
	_, pub := key.SigningKey()
	if len(pub) != ed25519.PublicKeySize {
		return nil, core.Errorf(core.CodeInvalidArgument, "approve: no signing key")
	}
	if err := core.CheckName("approvedBy", by.Name); err != nil {
		return nil, err
	}
	if by.Role != RoleApprover && by.Role != RoleAdmin {
		return nil, core.FieldErrorf(core.CodeForbidden, "approvedBy", "%s (role %q) may not approve a certificate: only a person with the approver or admin role", by.Name, by.Role)
	}
	s.useSigner(key)
	role := by.Role
	return s.signedTransition(ctx, id, pub, by.Name, AuditCertApprove, map[string]any{"approvedBy": by.Name, "approverRole": role}, func(c *contract.RecommendationCertificate) error {
		return c.Approve(by.Name, "", now)
	}, &statementSigner{key: key, kind: AttestApprove, statement: func(c *contract.RecommendationCertificate, keyID string) any {
		return approvalStatement(c, role, keyID)
	}})
}

// RevokeCertificate moves an ISSUED or APPROVED certificate to REVOKED
// (by and reason required). Audited as "cert.revoke".
func (s *Store) RevokeCertificate(ctx context.Context, id, by, reason string, pub ed25519.PublicKey, now time.Time) (*contract.CertRecord, error) {
	return s.transition(ctx, id, pub, by, AuditCertRevoke, map[string]any{"revokedBy": by, "reason": reason}, func(c *contract.RecommendationCertificate) error {
		return c.Revoke(by, reason, now)
	})
}

// MarkCertificateExecuted moves an APPROVED, unexpired certificate to
// EXECUTED on behalf of by (after a readback-verified write). Audited as
// "cert.execute" with payload extra (e.g. the write outcome).
func (s *Store) MarkCertificateExecuted(ctx context.Context, id, by string, pub ed25519.PublicKey, now time.Time, extra map[string]any) (*contract.CertRecord, error) {
	if strings.TrimSpace(by) == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "by", "who executes is required")
	}
	payload := map[string]any{}
	for k, v := range extra {
		payload[k] = v
	}
	return s.transition(ctx, id, pub, by, AuditCertExecute, payload, func(c *contract.RecommendationCertificate) error {
		return c.MarkExecuted(now)
	})
}

// ExpireDue marks every ISSUED or APPROVED certificate whose expiry has
// passed at now EXPIRED (expiredAt = now), each with a "cert.expire" audit
// entry (actor aml-expiry), all in one transaction; with ids, only those
// certificates. A row that fails its checks is left alone (it is reported
// by GetCertificate and never authorises a write). It returns the ids
// expired.
func (s *Store) ExpireDue(ctx context.Context, now time.Time, ids ...string) ([]string, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT `+certCols+` FROM twin_certificates WHERE status IN ('ISSUED', 'APPROVED') AND expires_at <= ? ORDER BY expires_at, certificate_id`, now.UnixMilli())
	if err != nil {
		return nil, sqldb.Err(err, "list due certificates")
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var due []*contract.CertRecord
	for rows.Next() {
		r, err := certRow(rows, nil)
		if err != nil {
			if core.CodeOf(err) == core.CodeCertInvalid {
				continue
			}
			rows.Close()
			return nil, err
		}
		if len(ids) == 0 || want[r.Cert.RecommendationID] {
			due = append(due, r)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, sqldb.Err(err, "list due certificates")
	}
	if err := rows.Err(); err != nil {
		return nil, sqldb.Err(err, "list due certificates")
	}
	out := []string{}
	for _, r := range due {
		prev := r.Cert.Status
		if !r.Cert.ExpireIfDue(now) {
			continue
		}
		if err := s.persistCert(ctx, tx, r, prev, ExpiryActor, AuditCertExpire, map[string]any{"from": string(prev), "expiresAt": r.Cert.ExpiresAt.UnixMilli(), "noticedBy": "sweep"}); err != nil {
			return nil, err
		}
		out = append(out, r.Cert.RecommendationID)
	}
	return out, sqldb.Err(tx.Commit(), "commit expiries")
}

// errMessage is the message of a typed error without its code, else the
// error text.
func errMessage(err error) string {
	var ae *core.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}
