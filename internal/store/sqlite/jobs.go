package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aml-project/aml/internal/core"
)

const jobCols = `id, dataset_id, dataset_sha256, trainer_ref, params_json, seed, parent_id, change_note, env_name, status, stage, progress,
	metrics_json, gates_json, gate_passed, artifacts_path, model_id, error_code, error, attempt, retry_count, max_retries, timeout_sec, stall_sec,
	cancel_requested, worker, heartbeat_at, last_progress_at, created_by, created_at, started_at, ended_at`

func msPtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMilli(v.Int64).UTC()
	return &t
}

func rawOrNil(s sql.NullString) json.RawMessage {
	if !s.Valid || s.String == "" {
		return nil
	}
	return json.RawMessage(s.String)
}

func nullRaw(r json.RawMessage) any {
	if len(r) == 0 {
		return nil
	}
	return string(r)
}

func scanJob(sc interface{ Scan(...any) error }) (core.Job, error) {
	var j core.Job
	var params string
	var metrics, gates, model sql.NullString
	var gp, cancel int
	var hb, lp, started, ended sql.NullInt64
	var created int64
	var status string
	err := sc.Scan(&j.ID, &j.DatasetID, &j.DatasetSHA256, &j.TrainerRef, &params, &j.Seed, &j.ParentID, &j.ChangeNote, &j.EnvName, &status, &j.Stage, &j.Progress,
		&metrics, &gates, &gp, &j.ArtifactsPath, &model, &j.ErrorCode, &j.Error, &j.Attempt, &j.RetryCount, &j.MaxRetries, &j.TimeoutSec, &j.StallSec,
		&cancel, &j.Worker, &hb, &lp, &j.CreatedBy, &created, &started, &ended)
	if err != nil {
		return j, err
	}
	j.Status = core.JobStatus(status)
	j.Params = json.RawMessage(params)
	j.Metrics, j.Gates = rawOrNil(metrics), rawOrNil(gates)
	j.GatePassed, j.CancelRequest = gp == 1, cancel == 1
	j.ModelID = model.String
	j.HeartbeatAt, j.LastProgressAt, j.StartedAt, j.EndedAt = msPtr(hb), msPtr(lp), msPtr(started), msPtr(ended)
	j.CreatedAt = time.UnixMilli(created).UTC()
	return j, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *Store) CreateJob(ctx context.Context, j core.Job, lim core.JobLimits) error {
	if err := errors.Join(requireID("id", j.ID), requireID("dataset", j.DatasetID), requireID("trainer", j.TrainerRef)); err != nil {
		return err
	}
	if len(j.Params) == 0 {
		j.Params = json.RawMessage("{}")
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer tx.Rollback()
	if lim.MaxQueued > 0 || lim.MaxPerDataset > 0 {
		var active, perDS int
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM jobs WHERE status IN ('queued','provisioning','training','evaluating')),
			(SELECT count(*) FROM jobs WHERE dataset_id=?)`, j.DatasetID).Scan(&active, &perDS); err != nil {
			return dbErr(err, "count jobs")
		}
		if lim.MaxQueued > 0 && active >= lim.MaxQueued {
			return core.Errorf(core.CodeQueueFull, "%d jobs are queued or running, the queue holds at most %d; wait or cancel some", active, lim.MaxQueued)
		}
		if lim.MaxPerDataset > 0 && perDS >= lim.MaxPerDataset {
			return core.FieldErrorf(core.CodeQuotaExceeded, "dataset", "dataset %s already has %d experiments, the limit is %d", j.DatasetID, perDS, lim.MaxPerDataset)
		}
	}
	now := time.Now().UnixMilli()
	_, err = tx.ExecContext(ctx, `INSERT INTO jobs(id, dataset_id, dataset_sha256, trainer_ref, params_json, seed, parent_id, change_note, env_name, status,
		max_retries, timeout_sec, stall_sec, created_by, created_at) VALUES (?,?,?,?,?,?,?,?,?,'queued',?,?,?,?,?)`,
		j.ID, j.DatasetID, j.DatasetSHA256, j.TrainerRef, string(j.Params), j.Seed, j.ParentID, j.ChangeNote, j.EnvName,
		j.MaxRetries, j.TimeoutSec, j.StallSec, j.CreatedBy, now)
	if isUnique(err) {
		return core.FieldErrorf(core.CodeConflict, "id", "job %q already exists", j.ID)
	}
	if isConstraint(err) {
		return notFound("dataset", j.DatasetID)
	}
	if err != nil {
		return dbErr(err, "insert job")
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dataset_refs(dataset_id, kind, ref_id) VALUES (?, 'job', ?) ON CONFLICT DO NOTHING`, j.DatasetID, j.ID); err != nil {
		return dbErr(err, "reference dataset")
	}
	return dbErr(tx.Commit(), "commit job")
}

func (s *Store) GetJob(ctx context.Context, id string) (core.Job, error) {
	j, err := scanJob(s.queryRow(ctx, s.r, `SELECT `+jobCols+` FROM jobs WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, notFound("job", id)
	}
	return j, dbErr(err, "read job %s", id)
}

// getJobW reads through the writer so a caller sees its own writes at once.
func (s *Store) getJobW(ctx context.Context, id string) (core.Job, error) {
	j, err := scanJob(s.queryRow(ctx, s.w, `SELECT `+jobCols+` FROM jobs WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, notFound("job", id)
	}
	return j, dbErr(err, "read job %s", id)
}

func (s *Store) ListJobs(ctx context.Context, f core.JobFilter) ([]core.Job, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE (?1='' OR dataset_id=?1) AND (?2='' OR status=?2) ORDER BY created_at DESC, id DESC LIMIT ?3`,
		f.DatasetID, string(f.Status), limit)
	if err != nil {
		return nil, dbErr(err, "list jobs")
	}
	defer rows.Close()
	out := []core.Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, dbErr(err, "list jobs")
		}
		out = append(out, j)
	}
	return out, dbErr(rows.Err(), "list jobs")
}

func jobConflict(ctx context.Context, s *Store, id string, want string) error {
	j, err := s.getJobW(ctx, id)
	if err != nil {
		return err
	}
	return core.FieldErrorf(core.CodeJobConflict, "status", "job %s is %s; %s", id, j.Status, want)
}

func (s *Store) ClaimJob(ctx context.Context, id, worker string) (core.Job, error) {
	now := time.Now().UnixMilli()
	// One statement claims and returns the row (RETURNING), so a claim costs
	// one round trip on the single writer connection.
	j, err := scanJob(s.queryRow(ctx, s.w, `UPDATE jobs SET status='provisioning', stage='provisioning', progress=0, attempt=attempt+1, worker=?,
		heartbeat_at=?, last_progress_at=?, started_at=coalesce(started_at, ?), error_code='', error='' WHERE id=? AND status='queued' RETURNING `+jobCols,
		worker, now, now, now, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Job{}, jobConflict(ctx, s, id, "only a queued job can be claimed")
	}
	if err != nil {
		return core.Job{}, dbErr(err, "claim job")
	}
	return j, nil
}

func (s *Store) TransitionJob(ctx context.Context, id, worker string, from, to core.JobStatus, stage string) error {
	if !core.CanTransition(from, to) {
		return core.FieldErrorf(core.CodeJobConflict, "status", "transition %s → %s is not allowed", from, to)
	}
	if to == core.JobDone {
		return core.FieldErrorf(core.CodeJobConflict, "status", "done is reached only through FinishJob, with its model")
	}
	now := time.Now().UnixMilli()
	var ended any
	if to.Terminal() {
		ended = now
	}
	res, err := s.exec(ctx, s.w, `UPDATE jobs SET status=?, stage=?, last_progress_at=?, ended_at=coalesce(?, ended_at) WHERE id=? AND status=? AND worker=?`,
		string(to), stage, now, ended, id, string(from), worker)
	if err != nil {
		return dbErr(err, "transition job")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return jobConflict(ctx, s, id, fmt.Sprintf("expected %s, owned by %s", from, worker))
	}
	return nil
}

func (s *Store) ReportProgress(ctx context.Context, id, worker string, progress float64, stage string) error {
	// A negative progress (a stage report) keeps the current fraction.
	keep := progress < 0
	progress = min(max(progress, 0), 1)
	now := time.Now().UnixMilli()
	res, err := s.exec(ctx, s.w, `UPDATE jobs SET progress=CASE WHEN ? THEN progress ELSE ? END, stage=CASE WHEN ?='' THEN stage ELSE ? END, last_progress_at=?, heartbeat_at=?
		WHERE id=? AND worker=? AND status IN ('provisioning','training','evaluating')`, keep, progress, stage, stage, now, now, id, worker)
	if err != nil {
		return dbErr(err, "report progress")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return jobConflict(ctx, s, id, "progress is accepted only from the worker of an active job")
	}
	return nil
}

func (s *Store) Heartbeat(ctx context.Context, id, worker string) error {
	_, err := s.exec(ctx, s.w, `UPDATE jobs SET heartbeat_at=? WHERE id=? AND worker=? AND status IN ('provisioning','training','evaluating')`,
		time.Now().UnixMilli(), id, worker)
	return dbErr(err, "heartbeat")
}

func (s *Store) EndJob(ctx context.Context, id string, from, to core.JobStatus, code, msg string) error {
	if !to.Terminal() || to == core.JobDone || !core.CanTransition(from, to) {
		return core.FieldErrorf(core.CodeJobConflict, "status", "EndJob cannot move %s → %s", from, to)
	}
	res, err := s.exec(ctx, s.w, `UPDATE jobs SET status=?, error_code=?, error=?, ended_at=? WHERE id=? AND status=?`,
		string(to), code, msg, time.Now().UnixMilli(), id, string(from))
	if err != nil {
		return dbErr(err, "end job")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return jobConflict(ctx, s, id, fmt.Sprintf("expected %s", from))
	}
	return nil
}

func (s *Store) RequeueJob(ctx context.Context, id string, from core.JobStatus, code, msg string) error {
	if !core.CanRequeue(from) {
		return core.FieldErrorf(core.CodeJobConflict, "status", "a %s job cannot be requeued", from)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE jobs SET status='queued', stage='', progress=0, retry_count=retry_count+1, worker='', error_code=?, error=?
		WHERE id=? AND status=? AND retry_count < max_retries`, code, msg, id, string(from))
	if err != nil {
		return dbErr(err, "requeue job")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return jobConflict(ctx, s, id, "requeue needs the expected active status and retries left")
	}
	return nil
}

func (s *Store) RequestCancel(ctx context.Context, id string) (core.Job, error) {
	now := time.Now().UnixMilli()
	res, err := s.w.ExecContext(ctx, `UPDATE jobs SET status='cancelled', cancel_requested=1, error_code='', error='cancelled while queued', ended_at=? WHERE id=? AND status='queued'`, now, id)
	if err != nil {
		return core.Job{}, dbErr(err, "cancel job")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		res, err = s.w.ExecContext(ctx, `UPDATE jobs SET cancel_requested=1 WHERE id=? AND status IN ('provisioning','training','evaluating')`, id)
		if err != nil {
			return core.Job{}, dbErr(err, "cancel job")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return core.Job{}, jobConflict(ctx, s, id, "only a queued or running job can be cancelled")
		}
	}
	return s.getJobW(ctx, id)
}

func (s *Store) FinishJob(ctx context.Context, id, worker string, from core.JobStatus, metrics, gates json.RawMessage, gatePassed bool, artifactsPath string, m *core.Model) error {
	if !core.CanTransition(from, core.JobDone) {
		return core.FieldErrorf(core.CodeJobConflict, "status", "done cannot be reached from %s", from)
	}
	if m == nil {
		return core.FieldErrorf(core.CodeJobConflict, "model", "a done job must register its model")
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer tx.Rollback()
	if err := insertModel(ctx, tx, m); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE jobs SET status='done', stage='done', progress=1, metrics_json=?, gates_json=?, gate_passed=?, artifacts_path=?, model_id=?,
		error_code='', error='', ended_at=? WHERE id=? AND status=? AND worker=?`, nullRaw(metrics), nullRaw(gates), b2i(gatePassed), artifactsPath, m.ID, time.Now().UnixMilli(), id, string(from), worker)
	if err != nil {
		return dbErr(err, "finish job")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// Release the single writer connection first: jobConflict reads
		// through it and would otherwise wait forever on this transaction.
		tx.Rollback()
		return jobConflict(ctx, s, id, fmt.Sprintf("expected %s, owned by %s, to finish", from, worker))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dataset_refs(dataset_id, kind, ref_id) VALUES (?, 'model', ?) ON CONFLICT DO NOTHING`, m.DatasetID, m.ID); err != nil {
		return dbErr(err, "reference dataset")
	}
	return dbErr(tx.Commit(), "commit finish")
}

const modelCols = `id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, objective_id, trainer_ref, stage, artifact_kind, schema_version,
	model_interface, artifact_path, artifact_hash, artifacts_pruned, legacy, lineage_verified, twin, gate_passed, metrics_json, gates_json,
	created_at, stage_changed_at, stage_changed_by`

func insertModel(ctx context.Context, tx *sql.Tx, m *core.Model) error {
	if err := errors.Join(requireID("model", m.ID), requireID("dataset", m.DatasetID)); err != nil {
		return err
	}
	if m.Stage == "" {
		m.Stage = core.StageCandidate
	}
	if m.Stage != core.StageCandidate {
		return core.FieldErrorf(core.CodeInvalidArgument, "stage", "a new model starts as a candidate")
	}
	now := time.Now()
	if m.CreatedAt.IsZero() {
		m.CreatedAt = now
	}
	m.StageChangedAt = m.CreatedAt
	if m.SchemaVersion == 0 {
		m.SchemaVersion = 1
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO models(`+modelCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		m.ID, m.JobID, m.DatasetID, m.LineID, m.ProductID, m.RecipeID, m.Purpose, m.ObjectiveID, m.TrainerRef, m.Stage, m.ArtifactKind, m.SchemaVersion,
		m.ModelInterface, m.ArtifactPath, m.ArtifactHash, b2i(m.ArtifactsPruned), m.Legacy, b2i(m.LineageVerified), b2i(m.Twin), b2i(m.GatePassed),
		nullRaw(m.Metrics), nullRaw(m.Gates), m.CreatedAt.UnixMilli(), m.StageChangedAt.UnixMilli(), m.StageChangedBy)
	if isUnique(err) {
		return core.FieldErrorf(core.CodeConflict, "model", "model %q already exists", m.ID)
	}
	return dbErr(err, "insert model")
}

func scanModel(sc interface{ Scan(...any) error }) (core.Model, error) {
	var m core.Model
	var pruned, lv, twin, gp int
	var metrics, gates sql.NullString
	var created, changed int64
	err := sc.Scan(&m.ID, &m.JobID, &m.DatasetID, &m.LineID, &m.ProductID, &m.RecipeID, &m.Purpose, &m.ObjectiveID, &m.TrainerRef, &m.Stage, &m.ArtifactKind, &m.SchemaVersion,
		&m.ModelInterface, &m.ArtifactPath, &m.ArtifactHash, &pruned, &m.Legacy, &lv, &twin, &gp, &metrics, &gates, &created, &changed, &m.StageChangedBy)
	m.ArtifactsPruned, m.LineageVerified, m.Twin, m.GatePassed = pruned == 1, lv == 1, twin == 1, gp == 1
	m.Metrics, m.Gates = rawOrNil(metrics), rawOrNil(gates)
	m.CreatedAt, m.StageChangedAt = time.UnixMilli(created).UTC(), time.UnixMilli(changed).UTC()
	return m, err
}

func (s *Store) GetModel(ctx context.Context, id string) (core.Model, error) {
	m, err := scanModel(s.queryRow(ctx, s.r, `SELECT `+modelCols+` FROM models WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return m, notFound("model", id)
	}
	return m, dbErr(err, "read model %s", id)
}

func (s *Store) ListModels(ctx context.Context, f core.ModelFilter) ([]core.Model, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+modelCols+` FROM models WHERE (?1='' OR line_id=?1) AND (?2='' OR product_id=?2) AND (?3='' OR recipe_id=?3)
		AND (?4='' OR purpose=?4) AND (?5='' OR stage=?5) AND (?6='' OR dataset_id=?6) ORDER BY created_at DESC, id DESC`,
		f.Line, f.Product, f.Recipe, f.Purpose, f.Stage, f.DatasetID)
	if err != nil {
		return nil, dbErr(err, "list models")
	}
	defer rows.Close()
	out := []core.Model{}
	for rows.Next() {
		m, err := scanModel(rows)
		if err != nil {
			return nil, dbErr(err, "list models")
		}
		out = append(out, m)
	}
	return out, dbErr(rows.Err(), "list models")
}

func (s *Store) MoveModelStage(ctx context.Context, id, from, to, by, reason string) error {
	if err := core.CheckStageMove(from, to, by); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer tx.Rollback()
	now := time.Now().UnixMilli()
	if to == core.StageProduction {
		// Retire the current production model of the same key first, in the
		// same transaction; the partial unique index makes a second
		// production row impossible even if this logic were wrong.
		rows, err := tx.QueryContext(ctx, `SELECT p.id FROM models p JOIN models m ON m.id=?
			WHERE p.stage='production' AND p.id<>m.id AND p.line_id=m.line_id AND p.product_id=m.product_id AND p.recipe_id=m.recipe_id
			AND p.purpose=m.purpose AND p.objective_id=m.objective_id`, id)
		if err != nil {
			return dbErr(err, "find production model")
		}
		var prev []string
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return dbErr(err, "find production model")
			}
			prev = append(prev, p)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return dbErr(err, "find production model")
		}
		rows.Close()
		for _, p := range prev {
			if _, err := tx.ExecContext(ctx, `UPDATE models SET stage='retired', stage_changed_at=?, stage_changed_by=? WHERE id=? AND stage='production'`, now, by, p); err != nil {
				return dbErr(err, "retire previous production model")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO model_stage_history(model_id, from_stage, to_stage, by, reason, at) VALUES (?,?,?,?,?,?)`,
				p, core.StageProduction, core.StageRetired, by, "replaced by "+id, now); err != nil {
				return dbErr(err, "record history")
			}
		}
	}
	res, err := tx.ExecContext(ctx, `UPDATE models SET stage=?, stage_changed_at=?, stage_changed_by=? WHERE id=? AND stage=?`, to, now, by, id, from)
	if isUnique(err) {
		return core.FieldErrorf(core.CodeStageRace, "stage", "another model became production for the same line, product, recipe and purpose at the same time")
	}
	if err != nil {
		return dbErr(err, "move model stage")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var cur string
		if err := tx.QueryRowContext(ctx, `SELECT stage FROM models WHERE id=?`, id).Scan(&cur); errors.Is(err, sql.ErrNoRows) {
			return notFound("model", id)
		}
		return core.FieldErrorf(core.CodeStageRace, "stage", "model %s is %s, not %s: someone else moved it first", id, cur, from)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO model_stage_history(model_id, from_stage, to_stage, by, reason, at) VALUES (?,?,?,?,?,?)`, id, from, to, by, reason, now); err != nil {
		return dbErr(err, "record history")
	}
	err = tx.Commit()
	if isUnique(err) {
		return core.FieldErrorf(core.CodeStageRace, "stage", "another model became production for the same key at the same time")
	}
	return dbErr(err, "commit stage move")
}

func (s *Store) ModelHistory(ctx context.Context, id string) ([]core.StageChange, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT model_id, from_stage, to_stage, by, reason, at FROM model_stage_history WHERE model_id=? ORDER BY id`, id)
	if err != nil {
		return nil, dbErr(err, "model history")
	}
	defer rows.Close()
	out := []core.StageChange{}
	for rows.Next() {
		var c core.StageChange
		var at int64
		if err := rows.Scan(&c.ModelID, &c.From, &c.To, &c.By, &c.Reason, &at); err != nil {
			return nil, dbErr(err, "model history")
		}
		c.At = time.UnixMilli(at).UTC()
		out = append(out, c)
	}
	return out, dbErr(rows.Err(), "model history")
}

func (s *Store) MarkModelPruned(ctx context.Context, id string) error {
	_, err := s.w.ExecContext(ctx, `UPDATE models SET artifacts_pruned=1 WHERE id=?`, id)
	return dbErr(err, "mark model pruned")
}

// ListEndedJobsBefore pages through jobs that ended in a failure status
// before `before`, oldest first (keyset on (ended_at, id), so retention
// reaches the oldest rows however many there are).
func (s *Store) ListEndedJobsBefore(ctx context.Context, before time.Time, afterEnded int64, afterID string, limit int) ([]core.Job, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE status IN ('failed','cancelled','timeout','interrupted')
		AND ended_at < ? AND (ended_at > ? OR (ended_at = ? AND id > ?)) ORDER BY ended_at, id LIMIT ?`,
		before.UnixMilli(), afterEnded, afterEnded, afterID, limit)
	if err != nil {
		return nil, dbErr(err, "list ended jobs")
	}
	defer rows.Close()
	out := []core.Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, dbErr(err, "list ended jobs")
		}
		out = append(out, j)
	}
	return out, dbErr(rows.Err(), "list ended jobs")
}

// ListRetiredModelsBefore lists retired models whose artifacts are still on
// disk and that were retired before `before`, oldest first, all of them.
func (s *Store) ListRetiredModelsBefore(ctx context.Context, before time.Time) ([]core.Model, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+modelCols+` FROM models WHERE stage='retired' AND artifacts_pruned=0 AND stage_changed_at < ? ORDER BY stage_changed_at, id`, before.UnixMilli())
	if err != nil {
		return nil, dbErr(err, "list retired models")
	}
	defer rows.Close()
	out := []core.Model{}
	for rows.Next() {
		m, err := scanModel(rows)
		if err != nil {
			return nil, dbErr(err, "list retired models")
		}
		out = append(out, m)
	}
	return out, dbErr(rows.Err(), "list retired models")
}
