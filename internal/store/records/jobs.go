package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// Every state change is one compare-and-set UPDATE … WHERE status=from (and
// worker=the attempt's owner), so exactly one of two racing changes wins on
// both back-ends; the package doc says why that holds on PostgreSQL.

const jobCols = `id, dataset_id, dataset_sha256, trainer_ref, params_json, seed, parent_id, change_note, env_name, status, stage, progress,
	metrics_json, gates_json, gate_passed, artifacts_path, model_id, error_code, error, attempt, retry_count, max_retries, timeout_sec, stall_sec,
	cancel_requested, worker, heartbeat_at, last_progress_at, created_by, created_at, started_at, ended_at, gate_profile`

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

func scanJob(sc scanner) (core.Job, error) {
	var j core.Job
	var params string
	var metrics, gates, model sql.NullString
	var gp, cancel int
	var hb, lp, started, ended sql.NullInt64
	var created int64
	var status string
	err := sc.Scan(&j.ID, &j.DatasetID, &j.DatasetSHA256, &j.TrainerRef, &params, &j.Seed, &j.ParentID, &j.ChangeNote, &j.EnvName, &status, &j.Stage, &j.Progress,
		&metrics, &gates, &gp, &j.ArtifactsPath, &model, &j.ErrorCode, &j.Error, &j.Attempt, &j.RetryCount, &j.MaxRetries, &j.TimeoutSec, &j.StallSec,
		&cancel, &j.Worker, &hb, &lp, &j.CreatedBy, &created, &started, &ended, &j.GateProfile)
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

// jobLimitsLock names the lock CreateJob holds while it counts jobs against
// the limits: on SQLite "count, then insert" is atomic by the single
// writer; on PostgreSQL two processes could otherwise both count below the
// limit and both insert. (The dialect's lock adds the schema, so plants in
// schemas of their own do not queue on each other.)
const jobLimitsLock = "aml.jobs.limits:"

// CreateJob implements core.Jobs.
func (c *Core) CreateJob(ctx context.Context, j core.Job, lim core.JobLimits) error {
	if err := errors.Join(requireID("id", j.ID), requireID("dataset", j.DatasetID), requireID("trainer", j.TrainerRef)); err != nil {
		return err
	}
	if len(j.Params) == 0 {
		j.Params = json.RawMessage("{}")
	}
	tx, err := c.db.BeginConcurrent(ctx)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer tx.Rollback()
	if lim.MaxQueued > 0 || lim.MaxPerDataset > 0 {
		if err := tx.LockName(ctx, jobLimitsLock); err != nil {
			return dbErr(err, "lock job limits")
		}
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
	_, err = tx.ExecContext(ctx, `INSERT INTO jobs(id, dataset_id, dataset_sha256, trainer_ref, params_json, seed, parent_id, change_note, env_name, status,
		max_retries, timeout_sec, stall_sec, created_by, created_at, gate_profile) VALUES (?,?,?,?,?,?,?,?,?,'queued',?,?,?,?,?,?)`,
		j.ID, j.DatasetID, j.DatasetSHA256, j.TrainerRef, string(j.Params), j.Seed, j.ParentID, j.ChangeNote, j.EnvName,
		j.MaxRetries, j.TimeoutSec, j.StallSec, j.CreatedBy, nowMs(), j.GateProfile)
	if isUnique(err) {
		return core.FieldErrorf(core.CodeConflict, "id", "job %q already exists", j.ID)
	}
	if isForeignKey(err) {
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

// GetJob implements core.Jobs.
func (c *Core) GetJob(ctx context.Context, id string) (core.Job, error) {
	j, err := scanJob(c.db.FastRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, notFound("job", id)
	}
	return j, dbErr(err, "read job %s", id)
}

// getJobW reads through the writer so a caller sees its own writes at once.
func (c *Core) getJobW(ctx context.Context, id string) (core.Job, error) {
	j, err := scanJob(c.db.FastWriterRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, notFound("job", id)
	}
	return j, dbErr(err, "read job %s", id)
}

// ListJobs implements core.Jobs.
func (c *Core) ListJobs(ctx context.Context, f core.JobFilter) ([]core.Job, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	return c.listJobs(ctx, "list jobs", `SELECT `+jobCols+` FROM jobs WHERE (?1='' OR dataset_id=?1) AND (?2='' OR status=?2) ORDER BY created_at DESC, id DESC LIMIT ?3`,
		f.DatasetID, string(f.Status), limit)
}

// ListEndedJobsBefore pages through jobs that ended in a failure status
// before `before`, oldest first (keyset on (ended_at, id), so retention
// reaches the oldest rows however many there are).
func (c *Core) ListEndedJobsBefore(ctx context.Context, before time.Time, afterEnded int64, afterID string, limit int) ([]core.Job, error) {
	return c.listJobs(ctx, "list ended jobs", `SELECT `+jobCols+` FROM jobs WHERE status IN ('failed','cancelled','timeout','interrupted')
		AND ended_at < ?1 AND (ended_at > ?2 OR (ended_at = ?2 AND id > ?3)) ORDER BY ended_at, id LIMIT ?4`,
		before.UnixMilli(), afterEnded, afterID, limit)
}

func (c *Core) listJobs(ctx context.Context, what, q string, args ...any) ([]core.Job, error) {
	return queryList(ctx, c.db, what, scanJob, q, args...)
}

// jobConflict is the AML_JOB_CONFLICT of a compare-and-set that lost,
// saying what the job is now.
func (c *Core) jobConflict(ctx context.Context, id string, want string) error {
	j, err := c.getJobW(ctx, id)
	if err != nil {
		return err
	}
	return core.FieldErrorf(core.CodeJobConflict, "status", "job %s is %s; %s", id, j.Status, want)
}

// ClaimJob implements core.Jobs. One statement claims and returns the row
// (RETURNING), so a claim costs one round trip.
func (c *Core) ClaimJob(ctx context.Context, id, worker string) (core.Job, error) {
	j, err := scanJob(c.db.FastWriterRow(ctx, `UPDATE jobs SET status='provisioning', stage='provisioning', progress=0, attempt=attempt+1, worker=?1,
		heartbeat_at=?2, last_progress_at=?2, started_at=coalesce(started_at, ?2), error_code='', error='' WHERE id=?3 AND status='queued' RETURNING `+jobCols,
		worker, nowMs(), id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Job{}, c.jobConflict(ctx, id, "only a queued job can be claimed")
	}
	if err != nil {
		return core.Job{}, dbErr(err, "claim job")
	}
	return j, nil
}

// TransitionJob implements core.Jobs.
func (c *Core) TransitionJob(ctx context.Context, id, worker string, from, to core.JobStatus, stage string) error {
	if !core.CanTransition(from, to) {
		return core.FieldErrorf(core.CodeJobConflict, "status", "transition %s → %s is not allowed", from, to)
	}
	if to == core.JobDone {
		return core.FieldErrorf(core.CodeJobConflict, "status", "done is reached only through FinishJob, with its model")
	}
	now := nowMs()
	var ended any
	if to.Terminal() {
		ended = now
	}
	n, err := c.db.FastExec(ctx, `UPDATE jobs SET status=?, stage=?, last_progress_at=?, ended_at=coalesce(?, ended_at) WHERE id=? AND status=? AND worker=?`,
		string(to), stage, now, ended, id, string(from), worker)
	if err != nil {
		return dbErr(err, "transition job")
	}
	if n == 0 {
		return c.jobConflict(ctx, id, fmt.Sprintf("expected %s, owned by %s", from, worker))
	}
	return nil
}

// ReportProgress implements core.Jobs.
func (c *Core) ReportProgress(ctx context.Context, id, worker string, progress float64, stage string) error {
	// A negative progress (a stage report) keeps the current fraction.
	keep := progress < 0
	progress = min(max(progress, 0), 1)
	n, err := c.db.FastExec(ctx, `UPDATE jobs SET progress=CASE WHEN ?1 THEN progress ELSE ?2 END, stage=CASE WHEN ?3='' THEN stage ELSE ?3 END,
		last_progress_at=?4, heartbeat_at=?4
		WHERE id=?5 AND worker=?6 AND status IN ('provisioning','training','evaluating')`, keep, progress, stage, nowMs(), id, worker)
	if err != nil {
		return dbErr(err, "report progress")
	}
	if n == 0 {
		return c.jobConflict(ctx, id, "progress is accepted only from the worker of an active job")
	}
	return nil
}

// Heartbeat implements core.Jobs.
func (c *Core) Heartbeat(ctx context.Context, id, worker string) error {
	_, err := c.db.FastExec(ctx, `UPDATE jobs SET heartbeat_at=? WHERE id=? AND worker=? AND status IN ('provisioning','training','evaluating')`,
		nowMs(), id, worker)
	return dbErr(err, "heartbeat")
}

// EndJob implements core.Jobs.
func (c *Core) EndJob(ctx context.Context, id string, from, to core.JobStatus, code, msg string) error {
	if !to.Terminal() || to == core.JobDone || !core.CanTransition(from, to) {
		return core.FieldErrorf(core.CodeJobConflict, "status", "EndJob cannot move %s → %s", from, to)
	}
	n, err := c.db.FastExec(ctx, `UPDATE jobs SET status=?, error_code=?, error=?, ended_at=? WHERE id=? AND status=?`,
		string(to), code, msg, nowMs(), id, string(from))
	if err != nil {
		return dbErr(err, "end job")
	}
	if n == 0 {
		return c.jobConflict(ctx, id, fmt.Sprintf("expected %s", from))
	}
	return nil
}

// RequeueJob implements core.Jobs.
func (c *Core) RequeueJob(ctx context.Context, id string, from core.JobStatus, code, msg string) error {
	if !core.CanRequeue(from) {
		return core.FieldErrorf(core.CodeJobConflict, "status", "a %s job cannot be requeued", from)
	}
	n, err := c.db.FastExec(ctx, `UPDATE jobs SET status='queued', stage='', progress=0, retry_count=retry_count+1, worker='', error_code=?, error=?
		WHERE id=? AND status=? AND retry_count < max_retries`, code, msg, id, string(from))
	if err != nil {
		return dbErr(err, "requeue job")
	}
	if n == 0 {
		return c.jobConflict(ctx, id, "requeue needs the expected active status and retries left")
	}
	return nil
}

// RequestCancel implements core.Jobs.
func (c *Core) RequestCancel(ctx context.Context, id string) (core.Job, error) {
	n, err := c.db.FastExec(ctx, `UPDATE jobs SET status='cancelled', cancel_requested=1, error_code='', error='cancelled while queued', ended_at=? WHERE id=? AND status='queued'`, nowMs(), id)
	if err != nil {
		return core.Job{}, dbErr(err, "cancel job")
	}
	if n == 0 {
		n, err = c.db.FastExec(ctx, `UPDATE jobs SET cancel_requested=1 WHERE id=? AND status IN ('provisioning','training','evaluating')`, id)
		if err != nil {
			return core.Job{}, dbErr(err, "cancel job")
		}
		if n == 0 {
			return core.Job{}, c.jobConflict(ctx, id, "only a queued or running job can be cancelled")
		}
	}
	return c.getJobW(ctx, id)
}

// FinishJob implements core.Jobs: the model row, the job's move to done and
// the model's dataset reference in one transaction.
func (c *Core) FinishJob(ctx context.Context, id, worker string, from core.JobStatus, metrics, gates json.RawMessage, gatePassed bool, artifactsPath string, m *core.Model) error {
	if !core.CanTransition(from, core.JobDone) {
		return core.FieldErrorf(core.CodeJobConflict, "status", "done cannot be reached from %s", from)
	}
	if m == nil {
		return core.FieldErrorf(core.CodeJobConflict, "model", "a done job must register its model")
	}
	tx, err := c.db.BeginConcurrent(ctx)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer tx.Rollback()
	if err := insertModel(ctx, tx, m); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE jobs SET status='done', stage='done', progress=1, metrics_json=?, gates_json=?, gate_passed=?, artifacts_path=?, model_id=?,
		error_code='', error='', ended_at=? WHERE id=? AND status=? AND worker=?`, nullRaw(metrics), nullRaw(gates), b2i(gatePassed), artifactsPath, m.ID, nowMs(), id, string(from), worker)
	if err != nil {
		return dbErr(err, "finish job")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// Roll back first: the model must not stay, and on SQLite
		// jobConflict reads through the single writer connection, which
		// this transaction would otherwise hold.
		if err := tx.Rollback(); err != nil {
			return dbErr(err, "roll back finish")
		}
		return c.jobConflict(ctx, id, fmt.Sprintf("expected %s, owned by %s, to finish", from, worker))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO dataset_refs(dataset_id, kind, ref_id) VALUES (?, 'model', ?) ON CONFLICT DO NOTHING`, m.DatasetID, m.ID); err != nil {
		return dbErr(err, "reference dataset")
	}
	return dbErr(tx.Commit(), "commit finish")
}
