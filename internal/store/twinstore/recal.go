package twinstore

import (
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

// Audit actions of recalibration requests.
const (
	AuditCalibrationRequest  = "calibration.request"
	AuditCalibrationStart    = "calibration.start"
	AuditCalibrationSubmit   = "calibration.submit"
	AuditCalibrationComplete = "calibration.complete"
	AuditCalibrationFail     = "calibration.fail"
)

// CalibrationSubject is the audit subject of a recalibration request.
func CalibrationSubject(id string) string { return "calibration:" + id }

const calibrationCols = `request_id, dedup_key, scene_id, line_id, recipe_id, model_id, state, reason, signals_json, policy_json,
	dataset_id, job_id, new_model_id, error, created_by, created_at, started_at, completed_at, cooldown_until`

func calibrationRow(sc interface{ Scan(...any) error }) (contract.CalibrationRequest, error) {
	var r contract.CalibrationRequest
	var sig, pol string
	var created int64
	var started, completed, cooldown sql.NullInt64
	err := sc.Scan(&r.RequestID, &r.DedupKey, &r.SceneID, &r.LineID, &r.RecipeID, &r.ModelID, &r.State, &r.Reason, &sig, &pol,
		&r.DatasetID, &r.JobID, &r.NewModelID, &r.Error, &r.CreatedBy, &created, &started, &completed, &cooldown)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return r, err
		}
		return r, sqldb.Err(err, "read recalibration request")
	}
	r.Signals, r.Policy = json.RawMessage(sig), json.RawMessage(pol)
	r.CreatedAt = time.UnixMilli(created).UTC()
	at := func(v sql.NullInt64) *time.Time {
		if !v.Valid {
			return nil
		}
		t := time.UnixMilli(v.Int64).UTC()
		return &t
	}
	r.StartedAt, r.CompletedAt, r.CooldownUntil = at(started), at(completed), at(cooldown)
	return r, nil
}

// expireCooldowns ends every cooldown that is over at now (state cooldown
// → done), which frees their dedup keys. Run inside each write transaction
// that reads or takes a key, so an expired cooldown never blocks.
func expireCooldowns(ctx context.Context, tx *sqldb.Tx, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE twin_calibrations SET state='done' WHERE state='cooldown' AND cooldown_until <= ?`, now.UnixMilli())
	return sqldb.Err(err, "end expired recalibration cooldowns")
}

// CreateCalibration queues request r (state queued, created at now) unless
// a request with the same dedup key is queued, running or still cooling
// down at now; that one is returned as active and nothing is written. The
// check and the insert run in one write transaction (serialised with every
// other writer, internal/store/sqldb), and the partial
// unique index refuses a second active request even from another process.
// An accepted request is audited ("calibration.request", actor
// r.CreatedBy) in the same transaction.
func (s *Store) CreateCalibration(ctx context.Context, r contract.CalibrationRequest, now time.Time) (created *contract.CalibrationRequest, active *contract.CalibrationRequest, err error) {
	for _, f := range []struct{ name, v string }{{"requestId", r.RequestID}, {"dedupKey", r.DedupKey}, {"sceneId", r.SceneID}, {"lineId", r.LineID}, {"createdBy", r.CreatedBy}} {
		if err := requireID(f.name, f.v); err != nil {
			return nil, nil, err
		}
	}
	sig, pol := r.Signals, r.Policy
	if len(sig) == 0 {
		sig = json.RawMessage("{}")
	}
	if len(pol) == 0 {
		pol = json.RawMessage("{}")
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, nil, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	if err := expireCooldowns(ctx, tx, now); err != nil {
		return nil, nil, err
	}
	cur, err := calibrationRow(tx.QueryRowContext(ctx, `SELECT `+calibrationCols+` FROM twin_calibrations
		WHERE dedup_key=? AND state IN ('queued','running','cooldown')`, r.DedupKey))
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, nil, err
	default:
		return nil, &cur, nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO twin_calibrations(request_id, dedup_key, scene_id, line_id, recipe_id, model_id, state, reason,
		signals_json, policy_json, created_by, created_at) VALUES (?,?,?,?,?,?,'queued',?,?,?,?,?)`,
		r.RequestID, r.DedupKey, r.SceneID, r.LineID, r.RecipeID, r.ModelID, r.Reason, string(sig), string(pol), r.CreatedBy, now.UnixMilli())
	if err != nil {
		if sqldb.IsUnique(err) {
			// Lost a race the unique index caught: report the winner.
			tx.Rollback()
			w, gerr := s.activeCalibration(ctx, r.DedupKey)
			if gerr == nil {
				return nil, w, nil
			}
			return nil, nil, core.Errorf(core.CodeConflict, "recalibration %s: another request is active", r.DedupKey)
		}
		return nil, nil, sqldb.Err(err, "queue recalibration request %s", r.RequestID)
	}
	payload := map[string]any{"requestId": r.RequestID, "dedupKey": r.DedupKey, "modelId": r.ModelID, "reason": r.Reason,
		"signals": json.RawMessage(sig), "policy": json.RawMessage(pol)}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, r.CreatedBy, AuditCalibrationRequest, CalibrationSubject(r.RequestID), r.LineID, payload); err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, sqldb.Err(err, "commit recalibration request %s", r.RequestID)
	}
	got, err := s.GetCalibration(ctx, r.RequestID)
	if err != nil {
		return nil, nil, err
	}
	return &got, nil, nil
}

func (s *Store) activeCalibration(ctx context.Context, key string) (*contract.CalibrationRequest, error) {
	r, err := calibrationRow(s.db.QueryRowContext(ctx, `SELECT `+calibrationCols+` FROM twin_calibrations
		WHERE dedup_key=? AND state IN ('queued','running','cooldown')`, key))
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// GetCalibration returns one request.
func (s *Store) GetCalibration(ctx context.Context, id string) (contract.CalibrationRequest, error) {
	r, err := calibrationRow(s.db.QueryRowContext(ctx, `SELECT `+calibrationCols+` FROM twin_calibrations WHERE request_id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, notFound("recalibration request", id)
	}
	return r, err
}

// ListCalibrations ends expired cooldowns at now and returns every request,
// newest first.
func (s *Store) ListCalibrations(ctx context.Context, now time.Time) ([]contract.CalibrationRequest, error) {
	if err := s.calibrationTx(ctx, func(tx *sqldb.Tx) error { return expireCooldowns(ctx, tx, now) }); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+calibrationCols+` FROM twin_calibrations ORDER BY created_at DESC, request_id DESC`)
	if err != nil {
		return nil, sqldb.Err(err, "list recalibration requests")
	}
	defer rows.Close()
	var out []contract.CalibrationRequest
	for rows.Next() {
		r, err := calibrationRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, sqldb.Err(rows.Err(), "list recalibration requests")
}

func (s *Store) calibrationTx(ctx context.Context, fn func(*sqldb.Tx) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return sqldb.Err(tx.Commit(), "commit")
}

// ClaimCalibration moves the oldest queued request to running (started at
// now) on behalf of worker by, provided fewer than maxConcurrent requests
// are running; otherwise it claims nothing. running is the number of
// running requests before the claim. Count, pick and update run in one
// serialised write transaction (with the audit entry "calibration.start"), so two
// workers never exceed maxConcurrent together.
func (s *Store) ClaimCalibration(ctx context.Context, maxConcurrent int, by string, now time.Time) (claimed *contract.CalibrationRequest, running int, err error) {
	if err := requireID("by", by); err != nil {
		return nil, 0, err
	}
	if maxConcurrent < 1 {
		return nil, 0, core.FieldErrorf(core.CodeInvalidArgument, "maxConcurrentRuns", "must be at least 1, got %d", maxConcurrent)
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, 0, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	if err := expireCooldowns(ctx, tx, now); err != nil {
		return nil, 0, err
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM twin_calibrations WHERE state='running'`).Scan(&running); err != nil {
		return nil, 0, sqldb.Err(err, "count running recalibrations")
	}
	if running >= maxConcurrent {
		return nil, running, tx.Commit()
	}
	r, err := calibrationRow(tx.QueryRowContext(ctx, `SELECT `+calibrationCols+` FROM twin_calibrations
		WHERE state='queued' ORDER BY created_at, request_id LIMIT 1`))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, running, sqldb.Err(tx.Commit(), "commit")
	}
	if err != nil {
		return nil, running, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE twin_calibrations SET state='running', started_at=? WHERE request_id=? AND state='queued'`, now.UnixMilli(), r.RequestID); err != nil {
		return nil, running, sqldb.Err(err, "claim recalibration request %s", r.RequestID)
	}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, by, AuditCalibrationStart, CalibrationSubject(r.RequestID), r.LineID,
		map[string]any{"requestId": r.RequestID, "dedupKey": r.DedupKey, "running": running}); err != nil {
		return nil, running, err
	}
	if err := tx.Commit(); err != nil {
		return nil, running, sqldb.Err(err, "commit claim of %s", r.RequestID)
	}
	t := now.UTC().Truncate(time.Millisecond)
	r.State, r.StartedAt = contract.CalibrationRunning, &t
	return &r, running, nil
}

// SetCalibrationJob records the rebuilt dataset and the submitted job of a
// running request (audited as "calibration.submit").
func (s *Store) SetCalibrationJob(ctx context.Context, id, datasetID, jobID, by string) error {
	return s.updateCalibration(ctx, id, by, AuditCalibrationSubmit, map[string]any{"requestId": id, "datasetId": datasetID, "jobId": jobID},
		`UPDATE twin_calibrations SET dataset_id=?, job_id=? WHERE request_id=? AND state='running'`, datasetID, jobID, id)
}

// CompleteCalibration ends running request id successfully at now: state
// cooldown, completed_at = now and cooldown_until = now + cooldown. The
// cooldown starts at COMPLETION (upstream set it at creation, so a long
// run had none left and the key was free the moment it ended); the key
// stays taken until cooldown_until. Audited as "calibration.complete".
func (s *Store) CompleteCalibration(ctx context.Context, id, newModelID string, now time.Time, cooldown time.Duration, by string) error {
	if cooldown < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "cooldownSec", "must not be negative")
	}
	until := now.Add(cooldown)
	return s.updateCalibration(ctx, id, by, AuditCalibrationComplete,
		map[string]any{"requestId": id, "newModelId": newModelID, "completedAt": now.UnixMilli(), "cooldownUntil": until.UnixMilli()},
		`UPDATE twin_calibrations SET state='cooldown', new_model_id=?, completed_at=?, cooldown_until=? WHERE request_id=? AND state='running'`,
		newModelID, now.UnixMilli(), until.UnixMilli(), id)
}

// FailCalibration ends queued or running request id as failed at now with
// message msg (audited as "calibration.fail"). A failed request frees its
// key at once: nothing was produced, so there is nothing to cool down.
func (s *Store) FailCalibration(ctx context.Context, id, msg string, now time.Time, by string) error {
	return s.updateCalibration(ctx, id, by, AuditCalibrationFail, map[string]any{"requestId": id, "error": msg},
		`UPDATE twin_calibrations SET state='failed', error=?, completed_at=? WHERE request_id=? AND state IN ('queued','running')`,
		msg, now.UnixMilli(), id)
}

func (s *Store) updateCalibration(ctx context.Context, id, by, action string, payload map[string]any, q string, args ...any) error {
	if err := requireID("by", by); err != nil {
		return err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	var line, state string
	err = tx.QueryRowContext(ctx, `SELECT line_id, state FROM twin_calibrations WHERE request_id=?`, id).Scan(&line, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("recalibration request", id)
	}
	if err != nil {
		return sqldb.Err(err, "read recalibration request %s", id)
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return sqldb.Err(err, "update recalibration request %s", id)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return core.FieldErrorf(core.CodeConflict, "state", "recalibration request %s is %s; %s does not apply", id, state, action)
	}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, by, action, CalibrationSubject(id), line, payload); err != nil {
		return err
	}
	return sqldb.Err(tx.Commit(), "commit %s of %s", action, id)
}
