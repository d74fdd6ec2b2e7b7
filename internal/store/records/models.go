package records

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
)

const modelCols = `id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, objective_id, trainer_ref, stage, artifact_kind, schema_version,
	model_interface, artifact_path, artifact_hash, artifacts_pruned, legacy, lineage_verified, twin, gate_passed, metrics_json, gates_json,
	created_at, stage_changed_at, stage_changed_by`

// insertModel registers m as a candidate in tx (FinishJob's transaction).
func insertModel(ctx context.Context, tx *sqldb.Tx, m *core.Model) error {
	if err := errors.Join(requireID("model", m.ID), requireID("dataset", m.DatasetID)); err != nil {
		return err
	}
	if m.Stage == "" {
		m.Stage = core.StageCandidate
	}
	if m.Stage != core.StageCandidate {
		return core.FieldErrorf(core.CodeInvalidArgument, "stage", "a new model starts as a candidate")
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now()
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

func scanModel(sc scanner) (core.Model, error) {
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

// GetModel implements core.Jobs.
func (c *Core) GetModel(ctx context.Context, id string) (core.Model, error) {
	m, err := scanModel(c.db.FastRow(ctx, `SELECT `+modelCols+` FROM models WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return m, notFound("model", id)
	}
	return m, dbErr(err, "read model %s", id)
}

// ListModels implements core.Jobs.
func (c *Core) ListModels(ctx context.Context, f core.ModelFilter) ([]core.Model, error) {
	return c.listModels(ctx, "list models", `SELECT `+modelCols+` FROM models WHERE (?1='' OR line_id=?1) AND (?2='' OR product_id=?2) AND (?3='' OR recipe_id=?3)
		AND (?4='' OR purpose=?4) AND (?5='' OR stage=?5) AND (?6='' OR dataset_id=?6) ORDER BY created_at DESC, id DESC`,
		f.Line, f.Product, f.Recipe, f.Purpose, f.Stage, f.DatasetID)
}

// ListRetiredModelsBefore lists retired models whose artifacts are still on
// disk and that were retired before `before`, oldest first, all of them.
func (c *Core) ListRetiredModelsBefore(ctx context.Context, before time.Time) ([]core.Model, error) {
	return c.listModels(ctx, "list retired models", `SELECT `+modelCols+` FROM models WHERE stage='retired' AND artifacts_pruned=0 AND stage_changed_at < ?
		ORDER BY stage_changed_at, id`, before.UnixMilli())
}

func (c *Core) listModels(ctx context.Context, what, q string, args ...any) ([]core.Model, error) {
	return queryList(ctx, c.db, what, scanModel, q, args...)
}

// stageRace is the AML_STAGE_RACE of a promotion that lost to another one
// of the same key: the partial unique index refused a second production
// model.
func stageRace() error {
	return core.FieldErrorf(core.CodeStageRace, "stage", "another model became production for the same line, product, recipe and purpose at the same time")
}

// MoveModelStage implements core.Jobs. Moving to production first retires
// the current production model of the same key in the same transaction;
// the partial unique index makes a second production row impossible even
// if two promotions race past that (on PostgreSQL: the loser's update
// waits for the winner's row lock, finds the row retired, and its own
// promotion then violates the index).
func (c *Core) MoveModelStage(ctx context.Context, id, from, to, by, reason string) error {
	if err := core.CheckStageMove(from, to, by); err != nil {
		return err
	}
	tx, err := c.db.BeginConcurrent(ctx)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer tx.Rollback()
	now := nowMs()
	if to == core.StageProduction {
		prev, err := productionOfKey(ctx, tx, id)
		if err != nil {
			return err
		}
		for _, p := range prev {
			res, err := tx.ExecContext(ctx, `UPDATE models SET stage='retired', stage_changed_at=?, stage_changed_by=? WHERE id=? AND stage='production'`, now, by, p)
			if err != nil {
				return dbErr(err, "retire previous production model")
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue // someone else retired it first
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO model_stage_history(model_id, from_stage, to_stage, by, reason, at) VALUES (?,?,?,?,?,?)`,
				p, core.StageProduction, core.StageRetired, by, "replaced by "+id, now); err != nil {
				return dbErr(err, "record history")
			}
		}
	}
	res, err := tx.ExecContext(ctx, `UPDATE models SET stage=?, stage_changed_at=?, stage_changed_by=? WHERE id=? AND stage=?`, to, now, by, id, from)
	if isUnique(err) {
		return stageRace()
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
		return stageRace()
	}
	return dbErr(err, "commit stage move")
}

// productionOfKey lists the production models of model id's key other than
// id itself.
func productionOfKey(ctx context.Context, tx *sqldb.Tx, id string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT p.id FROM models p JOIN models m ON m.id=?
		WHERE p.stage='production' AND p.id<>m.id AND p.line_id=m.line_id AND p.product_id=m.product_id AND p.recipe_id=m.recipe_id
		AND p.purpose=m.purpose AND p.objective_id=m.objective_id`, id)
	if err != nil {
		return nil, dbErr(err, "find production model")
	}
	defer rows.Close()
	var prev []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, dbErr(err, "find production model")
		}
		prev = append(prev, p)
	}
	return prev, dbErr(rows.Err(), "find production model")
}

// ModelHistory implements core.Jobs.
func (c *Core) ModelHistory(ctx context.Context, id string) ([]core.StageChange, error) {
	return queryList(ctx, c.db, "model history", func(r scanner) (core.StageChange, error) {
		var s core.StageChange
		var at int64
		err := r.Scan(&s.ModelID, &s.From, &s.To, &s.By, &s.Reason, &at)
		s.At = time.UnixMilli(at).UTC()
		return s, err
	}, `SELECT model_id, from_stage, to_stage, by, reason, at FROM model_stage_history WHERE model_id=? ORDER BY id`, id)
}

// MarkModelPruned implements core.Jobs.
func (c *Core) MarkModelPruned(ctx context.Context, id string) error {
	_, err := c.db.ExecContext(ctx, `UPDATE models SET artifacts_pruned=1 WHERE id=?`, id)
	return dbErr(err, "mark model pruned")
}
