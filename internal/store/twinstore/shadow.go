package twinstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/twin/contract"
)

// PutShadow stores (or replaces: evidence recomputed for the same model and
// run supersedes the old row) one shadow evidence row.
func (s *Store) PutShadow(ctx context.Context, r contract.ShadowRecord) error {
	if err := requireID("modelId", r.ModelID); err != nil {
		return err
	}
	if err := requireID("runId", r.RunID); err != nil {
		return err
	}
	if r.Steps < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "steps", "must not be negative, got %d", r.Steps)
	}
	ev := r.Evidence
	if len(ev) == 0 {
		ev = json.RawMessage("{}")
	}
	if !json.Valid(ev) {
		return core.FieldErrorf(core.CodeInvalidArgument, "evidence", "not valid JSON")
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO twin_shadow(model_id, run_id, created_at, steps, nrmse, coverage, evidence_json)
		VALUES (?,?,?,?,?,?,?)
		ON CONFLICT(model_id, run_id) DO UPDATE SET created_at=excluded.created_at, steps=excluded.steps,
			nrmse=excluded.nrmse, coverage=excluded.coverage, evidence_json=excluded.evidence_json`,
		r.ModelID, r.RunID, r.CreatedAt.UnixMilli(), r.Steps, twinNullFloat(r.NRMSE), twinNullFloat(r.Coverage), string(ev))
	return sqldb.Err(err, "store shadow evidence of model %s on run %s", r.ModelID, r.RunID)
}

// ListShadow returns the shadow evidence rows of a model, oldest first
// (by creation time, then run id).
func (s *Store) ListShadow(ctx context.Context, modelID string) ([]contract.ShadowRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT model_id, run_id, created_at, steps, nrmse, coverage, evidence_json
		FROM twin_shadow WHERE model_id=? ORDER BY created_at, run_id`, modelID)
	if err != nil {
		return nil, sqldb.Err(err, "list shadow evidence of model %s", modelID)
	}
	defer rows.Close()
	var out []contract.ShadowRecord
	for rows.Next() {
		var r contract.ShadowRecord
		var created int64
		var nrmse, cov sql.NullFloat64
		var ev string
		if err := rows.Scan(&r.ModelID, &r.RunID, &created, &r.Steps, &nrmse, &cov, &ev); err != nil {
			return nil, sqldb.Err(err, "read shadow evidence")
		}
		r.CreatedAt = time.UnixMilli(created).UTC()
		r.NRMSE, r.Coverage = twinFloatOrNaN(nrmse), twinFloatOrNaN(cov)
		r.Evidence = json.RawMessage(ev)
		out = append(out, r)
	}
	return out, sqldb.Err(rows.Err(), "list shadow evidence of model %s", modelID)
}

// contract.TwinPromotionEvidence reads the shadow row count and the latest twin
// gate evaluation of model id in one read transaction.
func (s *Store) TwinPromotionEvidence(ctx context.Context, modelID string) (contract.TwinPromotionEvidence, error) {
	var ev contract.TwinPromotionEvidence
	tx, err := s.db.BeginRead(ctx)
	if err != nil {
		return ev, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM twin_shadow WHERE model_id=?`, modelID).Scan(&ev.ShadowRuns); err != nil {
		return ev, sqldb.Err(err, "count shadow evidence of model %s", modelID)
	}
	var passed int
	var at int64
	err = tx.QueryRowContext(ctx, `SELECT gate_eval_id, passed, created_at FROM twin_gate_evals WHERE model_id=?
		ORDER BY created_at DESC, rowid DESC LIMIT 1`, modelID).Scan(&ev.GateEvalID, &passed, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return ev, sqldb.Err(err, "read the twin gate evaluations of model %s", modelID)
	default:
		ev.GatePassed, ev.GateAt = passed == 1, time.UnixMilli(at).UTC()
	}
	return ev, nil
}

func twinNullFloat(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

func twinFloatOrNaN(v sql.NullFloat64) float64 {
	if !v.Valid {
		return math.NaN()
	}
	return v.Float64
}
