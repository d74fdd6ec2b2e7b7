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

// AuditTwinGate is the audit action of a stored twin gate evaluation.
const AuditTwinGate = "twin.gate"

// PutGateEval stores a gate evaluation and its audit entry ("twin.gate",
// subject the model id) in one transaction. Evaluations are never
// changed: a new evaluation is a new row, the latest one counts.
func (s *Store) PutGateEval(ctx context.Context, r contract.GateEvalRecord) error {
	if r.GateEvalID == "" || r.ModelID == "" || len(r.Report) == 0 || !json.Valid(r.Report) {
		return core.Errorf(core.CodeInvalidArgument, "gate evaluation: id, model id and a JSON report are required")
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	passed := 0
	if r.Passed {
		passed = 1
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO twin_gate_evals(gate_eval_id, model_id, created_at, created_by, passed, tuning_mode, report_json)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, r.GateEvalID, r.ModelID, r.CreatedAt.UnixMilli(), r.CreatedBy, passed, r.TuningMode, string(r.Report)); err != nil {
		return sqldb.Err(err, "store gate evaluation %s", r.GateEvalID)
	}
	payload := map[string]any{"gateEvalId": r.GateEvalID, "passed": r.Passed, "tuningMode": r.TuningMode}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, r.CreatedBy, AuditTwinGate, r.ModelID, "", payload); err != nil {
		return err
	}
	return sqldb.Err(tx.Commit(), "commit gate evaluation")
}

// LatestGateEval returns the newest gate evaluation of a model;
// AML_NOT_FOUND when it has none.
func (s *Store) LatestGateEval(ctx context.Context, modelID string) (contract.GateEvalRecord, error) {
	var r contract.GateEvalRecord
	var at int64
	var passed int
	var rep string
	err := s.db.QueryRowContext(ctx, `SELECT gate_eval_id, model_id, created_at, created_by, passed, tuning_mode, report_json
		FROM twin_gate_evals WHERE model_id=? ORDER BY created_at DESC, rowid DESC LIMIT 1`, modelID).
		Scan(&r.GateEvalID, &r.ModelID, &at, &r.CreatedBy, &passed, &r.TuningMode, &rep)
	if errors.Is(err, sql.ErrNoRows) {
		return r, core.FieldErrorf(core.CodeNotFound, "modelId", "model %s has no twin gate evaluation (run aml twin gate)", modelID)
	}
	if err != nil {
		return r, sqldb.Err(err, "read gate evaluation of model %s", modelID)
	}
	r.CreatedAt, r.Passed, r.Report = time.UnixMilli(at).UTC(), passed == 1, json.RawMessage(rep)
	return r, nil
}
