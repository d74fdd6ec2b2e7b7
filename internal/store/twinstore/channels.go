package twinstore

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Audit actions of channels and guarded writes.
const (
	AuditChannelSet = "channel.set"
	// AuditWriteStart: a governed write claimed its line (ClaimWrite).
	AuditWriteStart = "write.start"
	// AuditWriteAttempt: one node write was attempted (RecordWrite).
	AuditWriteAttempt = "write.attempt"
	// AuditWriteDenied, AuditWriteExecuted, AuditWriteFailed: the outcome
	// of a governed write (package twin/govern appends them).
	AuditWriteDenied   = "write.denied"
	AuditWriteExecuted = "write.executed"
	AuditWriteFailed   = "write.failed"
)

// SetChannel stores the channel profile of c.LineID on behalf of by,
// replacing an earlier one (a line has at most one channel). Checks:
// profile legacy or hybrid_twin; control policy recommendation_only,
// hitl_governed or bounded_auto; bounded_auto has at least one bound;
// bounds finite with min ≤ max; when a scene is named it is stored, of
// this line, and every bound names one of its controls. ChannelID
// defaults to "ch-" + line. The row and its audit entry ("channel.set",
// with the previous profile) commit together.
func (s *Store) SetChannel(ctx context.Context, c contract.ChannelRecord, by string) (*contract.ChannelRecord, error) {
	var p []core.Problem
	add := func(field, msg string) { p = append(p, core.Problem{Field: field, Message: msg}) }
	if strings.TrimSpace(c.LineID) == "" {
		add("lineId", "the line is required")
	}
	if strings.TrimSpace(by) == "" {
		add("by", "who sets the channel is required")
	}
	if c.ChannelID == "" {
		c.ChannelID = "ch-" + c.LineID
	}
	switch c.Profile {
	case contract.ProfileLegacy, contract.ProfileHybridTwin:
	default:
		add("profile", "must be legacy or hybrid_twin, not "+quote(c.Profile))
	}
	switch c.ControlPolicy {
	case contract.PolicyRecommendationOnly, contract.PolicyHITLGoverned:
	case contract.PolicyBoundedAuto:
		if len(c.Bounds) == 0 {
			add("bounds", "bounded_auto needs the absolute bounds of at least one control (a control without bounds is never written)")
		}
	default:
		add("controlPolicy", "must be recommendation_only, hitl_governed or bounded_auto, not "+quote(c.ControlPolicy))
	}
	for _, k := range sortedBoundKeys(c.Bounds) {
		b := c.Bounds[k]
		if strings.TrimSpace(k) == "" {
			add("bounds", "a bound needs a control name")
		}
		if math.IsNaN(b.Min) || math.IsInf(b.Min, 0) || math.IsNaN(b.Max) || math.IsInf(b.Max, 0) || b.Min > b.Max {
			add("bounds."+k, "must be finite with min ≤ max")
		}
	}
	if (c.SceneID == "") != (c.SceneVersion == "") {
		add("scene", "give both the scene id and its version")
	}
	if len(p) > 0 {
		return nil, core.Invalid(core.CodeInvalidArgument, p)
	}
	bj, err := json.Marshal(c.Bounds)
	if err != nil || c.Bounds == nil {
		bj = []byte("{}")
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	if c.SceneID != "" {
		sc, err := sceneRow(tx.QueryRowContext(ctx, `SELECT `+sceneCols+` FROM scenes WHERE scene_id=? AND version=?`, c.SceneID, c.SceneVersion))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("scene", SceneSubject(c.SceneID, c.SceneVersion))
		}
		if err != nil {
			return nil, err
		}
		if sc.LineID != c.LineID {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "scene", "scene %s is of line %s, not %s", SceneSubject(c.SceneID, c.SceneVersion), sc.LineID, c.LineID)
		}
		for _, k := range sortedBoundKeys(c.Bounds) {
			if sc.Control(k) == nil {
				return nil, core.FieldErrorf(core.CodeInvalidArgument, "bounds."+k, "%s is not a control of scene %s", k, SceneSubject(c.SceneID, c.SceneVersion))
			}
		}
	}
	old, err := getChannel(ctx, tx, c.LineID)
	if err != nil && core.CodeOf(err) != core.CodeNotFound {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	c.UpdatedBy, c.UpdatedAt, c.CreatedAt = by, now, now
	if old != nil {
		c.CreatedAt = old.CreatedAt
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO twin_channels(line_id, channel_id, profile, control_policy, scene_id, scene_version, bounds_json, updated_by, created_at, updated_at)
		VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(line_id) DO UPDATE SET channel_id=excluded.channel_id, profile=excluded.profile, control_policy=excluded.control_policy,
		scene_id=excluded.scene_id, scene_version=excluded.scene_version, bounds_json=excluded.bounds_json, updated_by=excluded.updated_by, updated_at=excluded.updated_at`,
		c.LineID, c.ChannelID, c.Profile, c.ControlPolicy, c.SceneID, c.SceneVersion, string(bj), by, c.CreatedAt.UnixMilli(), now.UnixMilli())
	if sqldb.IsUnique(err) {
		return nil, core.FieldErrorf(core.CodeConflict, "channelId", "channel id %q belongs to another line", c.ChannelID)
	}
	if err != nil {
		return nil, sqldb.Err(err, "store channel of line %s", c.LineID)
	}
	payload := map[string]any{"channelId": c.ChannelID, "profile": c.Profile, "controlPolicy": c.ControlPolicy, "sceneId": c.SceneID,
		"sceneVersion": c.SceneVersion, "bounds": json.RawMessage(bj)}
	if old != nil {
		payload["previous"] = map[string]any{"channelId": old.ChannelID, "profile": old.Profile, "controlPolicy": old.ControlPolicy}
	}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, by, AuditChannelSet, c.LineID, c.LineID, payload); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, sqldb.Err(err, "commit channel of line %s", c.LineID)
	}
	return &c, nil
}

func quote(s string) string { return "\"" + s + "\"" }

func sortedBoundKeys(m map[string]contract.ChannelBound) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func getChannel(ctx context.Context, db sqldb.Querier, lineID string) (*contract.ChannelRecord, error) {
	var c contract.ChannelRecord
	var bj string
	var created, updated int64
	err := db.QueryRowContext(ctx, `SELECT line_id, channel_id, profile, control_policy, scene_id, scene_version, bounds_json, updated_by, created_at, updated_at
		FROM twin_channels WHERE line_id=?`, lineID).Scan(&c.LineID, &c.ChannelID, &c.Profile, &c.ControlPolicy, &c.SceneID, &c.SceneVersion, &bj, &c.UpdatedBy, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("channel", lineID)
	}
	if err != nil {
		return nil, sqldb.Err(err, "read channel of line %s", lineID)
	}
	if err := json.Unmarshal([]byte(bj), &c.Bounds); err != nil {
		return nil, core.Errorf(core.CodeInternal, "channel of line %s: stored bounds do not decode: %v", lineID, err)
	}
	if len(c.Bounds) == 0 {
		c.Bounds = nil
	}
	c.CreatedAt, c.UpdatedAt = msTime(created), msTime(updated)
	return &c, nil
}

// GetChannel returns the stored channel of a line (AML_NOT_FOUND when the
// line has none).
func (s *Store) GetChannel(ctx context.Context, lineID string) (*contract.ChannelRecord, error) {
	return getChannel(ctx, s.db, lineID)
}

// Channel implements guard.Channels: the line's channel profile, or (nil,
// nil) when the line has none — the legacy default "no channel", which
// the guard denies (NO_CHANNEL). Any read error is returned (the guard
// denies with CHANNEL_ERROR).
func (s *Store) Channel(ctx context.Context, lineID string) (*contract.ChannelProfile, error) {
	c, err := getChannel(ctx, s.db, lineID)
	if core.CodeOf(err) == core.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c.GuardProfile(), nil
}

// Writes implements guard.History: the rows of the line's write history
// at or after since, oldest first (claims included: they make the line
// busy and count the action).
func (s *Store) Writes(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRecord, error) {
	rows, err := s.WriteRows(ctx, lineID, since)
	if err != nil {
		return nil, err
	}
	out := make([]contract.WriteRecord, len(rows))
	for i, r := range rows {
		out[i] = r.WriteRecord
	}
	return out, nil
}

// WriteRows is Writes with the full rows.
func (s *Store) WriteRows(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT write_id, line_id, node_id, variable_id, certificate_id, run_id, at, value, delta, outcome
		FROM twin_writes WHERE line_id=? AND at >= ? ORDER BY at, write_id`, lineID, since.UnixMilli())
	if err != nil {
		return nil, sqldb.Err(err, "read write history of line %s", lineID)
	}
	defer rows.Close()
	out := []contract.WriteRow{}
	for rows.Next() {
		var r contract.WriteRow
		var at int64
		if err := rows.Scan(&r.ID, &r.LineID, &r.NodeID, &r.VariableID, &r.CertificateID, &r.RunID, &at, &r.Value, &r.Delta, &r.Outcome); err != nil {
			return nil, sqldb.Err(err, "read write history of line %s", lineID)
		}
		r.At = msTime(at)
		out = append(out, r)
	}
	return out, sqldb.Err(rows.Err(), "read write history of line %s", lineID)
}

// Record implements guard.Recorder: RecordWrite with actor "twin-guard"
// and no variable.
func (s *Store) Record(ctx context.Context, r contract.WriteRecord) error {
	_, err := s.RecordWrite(ctx, "twin-guard", contract.WriteRow{WriteRecord: r, Outcome: contract.WriteAttempted})
	return err
}

// RecordWrite appends one row to the (append-only) write history and its
// audit entry ("write.attempt", subject the certificate) in one
// transaction, and returns the row id. The row is written before its
// readback is known; the verified outcome is audited by the caller.
func (s *Store) RecordWrite(ctx context.Context, actor string, r contract.WriteRow) (int64, error) {
	if err := errors.Join(requireID("lineId", r.LineID), requireID("certificateId", r.CertificateID), requireID("actor", actor)); err != nil {
		return 0, err
	}
	if r.At.IsZero() {
		return 0, core.FieldErrorf(core.CodeInvalidArgument, "at", "a write needs its time")
	}
	if r.Outcome == "" {
		r.Outcome = contract.WriteAttempted
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	id, err := insertWrite(ctx, tx, r)
	if err != nil {
		return 0, err
	}
	payload := map[string]any{"writeId": id, "nodeId": r.NodeID, "variableId": r.VariableID, "value": r.Value, "delta": r.Delta, "runId": r.RunID, "at": r.At.UnixMilli()}
	if _, err := s.auditLog(ctx, tx).AppendTx(ctx, tx, actor, AuditWriteAttempt, r.CertificateID, r.LineID, payload); err != nil {
		return 0, err
	}
	return id, sqldb.Err(tx.Commit(), "commit write")
}

// insertWrite appends a row to the write history, which is kept on the
// wall clock: a row dated after it (beyond contract.WriteClockTolerance)
// is refused AML_CLOCK_FAULT — it would block the line's writes until the
// wall clock passed it.
func insertWrite(ctx context.Context, tx *sqldb.Tx, r contract.WriteRow) (int64, error) {
	if wall := time.Now(); r.At.Sub(wall) > contract.WriteClockTolerance {
		return 0, core.FieldErrorf(core.CodeClockFault, "at", "clock fault: a write on line %s (certificate %s) dated %s is %v after the wall clock %s; the write history is kept on the wall clock",
			r.LineID, r.CertificateID, r.At.UTC().Format(time.RFC3339Nano), r.At.Sub(wall).Round(time.Millisecond), wall.UTC().Format(time.RFC3339Nano))
	}
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO twin_writes(line_id, node_id, variable_id, certificate_id, run_id, at, value, delta, outcome) VALUES (?,?,?,?,?,?,?,?,?)
		RETURNING write_id`,
		r.LineID, r.NodeID, r.VariableID, r.CertificateID, r.RunID, r.At.UnixMilli(), r.Value, r.Delta, r.Outcome).Scan(&id)
	return id, sqldb.Err(err, "record write on line %s", r.LineID)
}

// LastWriteID returns the id of the newest row of the line's write
// history (0 when none): read before the guard's check and passed to
// ClaimWrite.
func (s *Store) LastWriteID(ctx context.Context, lineID string) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(write_id), 0) FROM twin_writes WHERE line_id=?`, lineID).Scan(&id)
	return id, sqldb.Err(err, "read write history of line %s", lineID)
}

// ActiveRun returns the id of the line's newest active run (runs table;
// "" when none): the run a governed write counts against when its
// snapshot names none.
func (s *Store) ActiveRun(ctx context.Context, lineID string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT id FROM runs WHERE line_id=? AND status='active' ORDER BY started_ms DESC, id DESC LIMIT 1`, lineID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, sqldb.Err(err, "read the active run of line %s", lineID)
}

// ClaimWrite serialises governed writes per line across processes: in one
// write transaction it checks that the line's history has not grown since
// the guard read it (newest row id still ExpectLastWriteID; otherwise
// AML_CONFLICT and nothing is written) and appends a claim row for the
// certificate at At with its audit entry ("write.start"). From then on any
// other guard sees the line busy (the line interval) and the certificate
// used, so the history this guard checked stays the history its writes
// follow. A claim is never undone: an action that fails still counts.
func (s *Store) ClaimWrite(ctx context.Context, c contract.WriteClaimRequest) (int64, error) {
	return s.claimWrite(ctx, c, nil)
}

// ClaimCertificateWrite is ClaimWrite for the governed write of a stored
// certificate, which it also marks used, signed: in the same transaction
// it reads and verifies the certificate (pub; it must be APPROVED), signs
// the execution statement {certificate id and hash, line, run, actor,
// claim time} (ExecutionStatement) with the process's key of the
// certificate, stores it — at most one per certificate, so a second claim
// is AML_CONFLICT (field certificateId) even with the row reset — names
// it in the "write.start" entry and signs the audit head.
func (s *Store) ClaimCertificateWrite(ctx context.Context, c contract.WriteClaimRequest, pub ed25519.PublicKey) (int64, error) {
	if len(pub) != ed25519.PublicKeySize {
		return 0, core.Errorf(core.CodeInvalidArgument, "a certificate verification key is required")
	}
	return s.claimWrite(ctx, c, pub)
}

func (s *Store) claimWrite(ctx context.Context, c contract.WriteClaimRequest, pub ed25519.PublicKey) (int64, error) {
	if err := errors.Join(requireID("lineId", c.LineID), requireID("certificateId", c.CertificateID), requireID("actor", c.Actor)); err != nil {
		return 0, err
	}
	if c.At.IsZero() {
		return 0, core.FieldErrorf(core.CodeInvalidArgument, "at", "a claim needs its time")
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	var att *Attestation
	var keyID string
	if pub != nil {
		r, err := getCert(ctx, tx, c.CertificateID, pub)
		if err != nil {
			return 0, err
		}
		if r.Cert.Status != contract.CertApproved || r.LineID != c.LineID {
			return 0, core.FieldErrorf(core.CodeConflict, "status", "certificate %s is %s on line %s: only an APPROVED certificate of line %s claims it", c.CertificateID, r.Cert.Status, r.LineID, c.LineID)
		}
		// The execution is signed with the process's key (pub), which may
		// have succeeded the key that signed the certificate.
		keyID = contract.CertKeyID(pub)
		key, err := needSigner(keyID)
		if err != nil {
			return 0, err
		}
		if err := checkSigner(ctx, tx, key); err != nil {
			return 0, err
		}
		if att, err = SignStatement(key, c.CertificateID, AttestExecute, ExecutionStatement{Kind: ExecutionKind, CertificateID: c.CertificateID,
			CertificateHash: r.Cert.CertificateHash, LineID: c.LineID, RunID: c.RunID, Actor: c.Actor, At: c.At.UnixMilli(), KeyID: keyID}, time.Now()); err != nil {
			return 0, err
		}
		if err := insertAttestation(ctx, tx, att); err != nil {
			return 0, err
		}
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(write_id), 0) FROM twin_writes WHERE line_id=?`, c.LineID).Scan(&last); err != nil {
		return 0, sqldb.Err(err, "read write history of line %s", c.LineID)
	}
	if last != c.ExpectLastWriteID {
		return 0, core.Errorf(core.CodeConflict, "line %s was written concurrently (history grew from row %d to %d since the guard's check)", c.LineID, c.ExpectLastWriteID, last)
	}
	id, err := insertWrite(ctx, tx, contract.WriteRow{WriteRecord: contract.WriteRecord{LineID: c.LineID, CertificateID: c.CertificateID, RunID: c.RunID, At: c.At}, Outcome: contract.WriteClaim})
	if err != nil {
		return 0, err
	}
	payload := map[string]any{"writeId": id, "runId": c.RunID, "at": c.At.UnixMilli()}
	if att != nil {
		payload["statementHash"] = att.Hash
	}
	if _, err := s.auditLog(ctx, tx).AppendTx(ctx, tx, c.Actor, AuditWriteStart, c.CertificateID, c.LineID, payload); err != nil {
		return 0, err
	}
	if att != nil {
		if err := s.checkpointTx(ctx, tx, keyID); err != nil {
			return 0, err
		}
	}
	return id, sqldb.Err(tx.Commit(), "commit claim")
}

// AppendAudit appends one entry to the audit log in its own transaction
// (for events without a row change, such as a denied write).
func (s *Store) AppendAudit(ctx context.Context, actor, action, subject, lineID string, payload any) (audit.Entry, error) {
	return audit.New(s.db).Append(ctx, actor, action, subject, lineID, payload)
}

// AuditLog returns the audit log in this store's database.
func (s *Store) AuditLog() *audit.Log { return audit.New(s.db) }
