package twinstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/twin/contract"
)

// AuditSnapshotCreate is the audit action of a stored twin snapshot.
const AuditSnapshotCreate = "snapshot.create"

// CodeSnapshotTampered: a stored twin snapshot no longer matches its hash
// or its row (edited behind the store's back). HTTP 422, like a tampered
// dataset.
const CodeSnapshotTampered = core.CodeSnapshotTampered

// MaxSnapshotList caps ListSnapshots.
const MaxSnapshotList = 10_000

// PutSnapshot stores a sealed snapshot (SnapshotHash set and equal to its
// content hash) once: the row is immutable (a trigger refuses updates) and
// a second snapshot with the same id is AML_CONFLICT. strict records
// whether it was taken in strict mode. The row and its audit entry
// ("snapshot.create", actor t.CreatedBy, subject the snapshot id) commit
// together.
func (s *Store) PutSnapshot(ctx context.Context, t *contract.TwinSnapshot, strict bool) error {
	if t == nil {
		return core.Errorf(core.CodeInvalidArgument, "snapshot is required")
	}
	if t.SnapshotHash == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, "snapshotHash", "snapshot %s is not sealed", t.SnapshotID)
	}
	// Validate also checks SnapshotHash against the content.
	if err := t.Validate(); err != nil {
		return err
	}
	js, err := core.CanonicalJSON(t)
	if err != nil {
		return err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM twin_snapshots WHERE snapshot_id=?`, t.SnapshotID).Scan(&n); err != nil {
		return sqldb.Err(err, "read snapshot %s", t.SnapshotID)
	}
	if n > 0 {
		return core.FieldErrorf(core.CodeConflict, "snapshotId", "snapshot %s already exists; snapshots never change", t.SnapshotID)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO twin_snapshots(snapshot_id, scene_id, scene_version, line_id, captured_at, created_at, created_by, strict, hash, snapshot_json)
		VALUES (?,?,?,?,?,?,?,?,?,?)`, t.SnapshotID, t.SceneID, t.SceneVersion, t.LineID, t.CapturedAt.UnixMilli(), t.CreatedAt.UnixMilli(),
		t.CreatedBy, boolInt(strict), t.SnapshotHash, string(js)); err != nil {
		return sqldb.Err(err, "insert snapshot %s", t.SnapshotID)
	}
	payload := map[string]any{"snapshotId": t.SnapshotID, "sceneId": t.SceneID, "sceneVersion": t.SceneVersion,
		"hash": t.SnapshotHash, "strict": strict, "capturedAt": t.CapturedAt.UnixMilli(), "daqWatermark": t.DAQWatermark}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, t.CreatedBy, AuditSnapshotCreate, t.SnapshotID, t.LineID, payload); err != nil {
		return err
	}
	return sqldb.Err(tx.Commit(), "commit snapshot %s", t.SnapshotID)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

const snapshotCols = `snapshot_id, scene_id, scene_version, line_id, captured_at, created_at, created_by, strict, hash`

func scanSnapshotInfo(sc interface{ Scan(...any) error }, extra ...any) (contract.SnapshotInfo, error) {
	var i contract.SnapshotInfo
	var captured, created int64
	var strict int
	err := sc.Scan(append([]any{&i.SnapshotID, &i.SceneID, &i.SceneVersion, &i.LineID, &captured, &created, &i.CreatedBy, &strict, &i.Hash}, extra...)...)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return i, err
		}
		return i, sqldb.Err(err, "read snapshot")
	}
	i.CapturedAt, i.CreatedAt, i.Strict = time.UnixMilli(captured).UTC(), time.UnixMilli(created).UTC(), strict == 1
	return i, nil
}

func snapshotTampered(id, format string, args ...any) error {
	return core.FieldErrorf(CodeSnapshotTampered, "snapshot", "snapshot "+id+": "+format, args...)
}

// GetSnapshot returns the stored snapshot id, verified: its JSON decodes
// strictly, validates, hashes to its snapshotHash, and agrees with the
// row's columns; anything else is AML_SNAPSHOT_TAMPERED. Unknown id:
// AML_NOT_FOUND.
func (s *Store) GetSnapshot(ctx context.Context, id string) (*contract.TwinSnapshot, error) {
	t, _, err := s.getSnapshot(ctx, id)
	return t, err
}

// GetSnapshotInfo returns GetSnapshot's snapshot and its row (strict flag,
// author), verified the same way.
func (s *Store) GetSnapshotInfo(ctx context.Context, id string) (*contract.TwinSnapshot, contract.SnapshotInfo, error) {
	return s.getSnapshot(ctx, id)
}

func (s *Store) getSnapshot(ctx context.Context, id string) (*contract.TwinSnapshot, contract.SnapshotInfo, error) {
	if err := requireID("snapshotId", id); err != nil {
		return nil, contract.SnapshotInfo{}, err
	}
	var js string
	info, err := scanSnapshotInfo(s.db.QueryRowContext(ctx, `SELECT `+snapshotCols+`, snapshot_json FROM twin_snapshots WHERE snapshot_id=?`, id), &js)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, info, notFound("snapshot", id)
	}
	if err != nil {
		return nil, info, err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(js)))
	dec.DisallowUnknownFields()
	var t contract.TwinSnapshot
	if err := dec.Decode(&t); err != nil {
		return nil, info, snapshotTampered(id, "stored JSON does not decode: %v", err)
	}
	if t.SnapshotHash == "" {
		return nil, info, snapshotTampered(id, "stored snapshot has no hash")
	}
	if err := t.Validate(); err != nil {
		return nil, info, snapshotTampered(id, "stored snapshot fails verification: %v", err)
	}
	if t.SnapshotHash != info.Hash || t.SnapshotID != info.SnapshotID || t.SceneID != info.SceneID || t.SceneVersion != info.SceneVersion ||
		t.LineID != info.LineID || t.CapturedAt.UnixMilli() != info.CapturedAt.UnixMilli() || t.CreatedBy != info.CreatedBy {
		return nil, info, snapshotTampered(id, "stored snapshot disagrees with its row (hash %s, row hash %s)", t.SnapshotHash, info.Hash)
	}
	return &t, info, nil
}

// ListSnapshots returns the rows of the newest limit snapshots (by capture
// time) of line lineID ("" = all lines), newest first. limit 0 means 100;
// at most MaxSnapshotList. Bodies are not read (GetSnapshot verifies one).
func (s *Store) ListSnapshots(ctx context.Context, lineID string, limit int) ([]contract.SnapshotInfo, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > MaxSnapshotList {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "limit", "limit must be 1..%d, got %d", MaxSnapshotList, limit)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+snapshotCols+` FROM twin_snapshots WHERE (?1='' OR line_id=?1)
		ORDER BY captured_at DESC, snapshot_id DESC LIMIT ?2`, lineID, limit)
	if err != nil {
		return nil, sqldb.Err(err, "list snapshots")
	}
	defer rows.Close()
	out := []contract.SnapshotInfo{}
	for rows.Next() {
		i, err := scanSnapshotInfo(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, i)
	}
	return out, sqldb.Err(rows.Err(), "list snapshots")
}
