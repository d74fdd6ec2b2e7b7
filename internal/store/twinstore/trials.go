package twinstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Error codes of stored trials and objective profiles: the stored JSON no
// longer hashes to the hash stored with it, or the row's columns disagree
// with it — it was edited behind the store's back. HTTP 422, like a
// tampered snapshot or dataset.
const (
	CodeTrialTampered     = core.CodeTrialTampered
	CodeObjectiveTampered = core.CodeObjectiveTampered
)

// Audit actions of trials and objectives.
const (
	AuditTrialPut     = "trial.put"
	AuditObjectivePut = "objective.put"
)

func tampered(code, format string, args ...any) *core.Error {
	return core.Errorf(code, format, args...)
}

// deriveTrial computes the derived columns of a trial: passed as
// contract.VirtualTrial.Passed (every constraint passed, accepted as in
// distribution, no reject code); the trial's own reject code, else for a
// trial that recorded none the first reason in the contract's order
// (CONSTRAINT_VIOLATION, then OUT_OF_DISTRIBUTION); hard violations as
// contract.VirtualTrial.HardViolations (evaluated and violated).
func deriveTrial(t *contract.VirtualTrial) (passed bool, reject string, hard int) {
	passed, reject, hard = t.Passed(), t.RejectCode, t.HardViolations()
	if reject == "" && !passed {
		reject = contract.RejectOOD
		for _, r := range t.ConstraintResults {
			if !r.Passed {
				reject = contract.RejectConstraint
			}
		}
	}
	return passed, reject, hard
}

// PutTrial validates and stores a virtual trial (immutable: a second trial
// with the same id is AML_CONFLICT), deriving passed, reject code, hard
// violations (failed constraint results), OOD acceptance and improvement
// from it; candidate_executed is always 0 (a CHECK of the table). purpose
// is manual, optimize, gate or demo ("" = manual); gateEvalID ties a gate
// trial to its evaluation. The line is the line of the trial's snapshot
// when that snapshot is stored, else the trial's provenance "lineId". The
// row and its audit entry ("trial.put", actor t.CreatedBy) commit together.
func (s *Store) PutTrial(ctx context.Context, t *contract.VirtualTrial, purpose, gateEvalID string) (contract.TrialRecord, error) {
	if t == nil {
		return contract.TrialRecord{}, core.Errorf(core.CodeInvalidArgument, "trial is required")
	}
	if purpose == "" {
		purpose = contract.TrialManual
	}
	switch purpose {
	case contract.TrialManual, contract.TrialOptimize, contract.TrialGate, contract.TrialDemo:
	default:
		return contract.TrialRecord{}, core.FieldErrorf(core.CodeInvalidArgument, "purpose", "purpose must be manual, optimize, gate or demo, not %q", purpose)
	}
	if err := t.Validate(); err != nil {
		return contract.TrialRecord{}, err
	}
	hash, err := t.Hash()
	if err != nil {
		return contract.TrialRecord{}, err
	}
	js, err := core.CanonicalJSON(t)
	if err != nil {
		return contract.TrialRecord{}, err
	}
	passed, reject, hard := deriveTrial(t)
	rec := contract.TrialRecord{Trial: t, Purpose: purpose, GateEvalID: gateEvalID, Passed: passed, RejectCode: reject, HardViolations: hard,
		OODAccepted: t.OutOfDistribution.Accepted, Improvement: t.BaselineComparison.Improvement, Hash: hash}

	tx, err := s.db.Begin(ctx)
	if err != nil {
		return contract.TrialRecord{}, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	switch err := tx.QueryRowContext(ctx, `SELECT line_id FROM twin_snapshots WHERE snapshot_id=?`, t.SnapshotID).Scan(&rec.LineID); {
	case errors.Is(err, sql.ErrNoRows):
		rec.LineID = t.Provenance["lineId"]
	case err != nil:
		return contract.TrialRecord{}, sqldb.Err(err, "read snapshot %s", t.SnapshotID)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO twin_trials(trial_id, snapshot_id, model_id, objective_id, line_id, created_at, created_by, purpose, gate_eval_id,
		passed, reject_code, hard_violations, ood_accepted, improvement, hash, trial_json, candidate_executed) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0)`,
		t.TrialID, t.SnapshotID, t.ModelID, t.ObjectiveID, rec.LineID, t.CreatedAt.UnixMilli(), t.CreatedBy, purpose, gateEvalID,
		b2i(passed), reject, hard, b2i(rec.OODAccepted), rec.Improvement, hash, string(js))
	if sqldb.IsUnique(err) {
		return contract.TrialRecord{}, core.FieldErrorf(core.CodeConflict, "trialId", "trial %q already exists (trials are immutable)", t.TrialID)
	}
	if err != nil {
		return contract.TrialRecord{}, sqldb.Err(err, "insert trial %s", t.TrialID)
	}
	payload := map[string]any{"trialId": t.TrialID, "hash": hash, "snapshotId": t.SnapshotID, "modelId": t.ModelID, "objectiveId": t.ObjectiveID,
		"purpose": purpose, "gateEvalId": gateEvalID, "passed": passed, "rejectCode": reject, "improvement": rec.Improvement, "candidateExecuted": false}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, t.CreatedBy, AuditTrialPut, t.TrialID, rec.LineID, payload); err != nil {
		return contract.TrialRecord{}, err
	}
	return rec, sqldb.Err(tx.Commit(), "commit trial %s", t.TrialID)
}

const trialCols = `trial_id, snapshot_id, model_id, objective_id, line_id, purpose, gate_eval_id, passed, reject_code, hard_violations, ood_accepted, improvement, hash, trial_json, candidate_executed`

// trialRow scans one row of trialCols and checks it: the JSON decodes and
// validates, hashes to the stored hash, and agrees with every derived
// column; otherwise AML_TRIAL_TAMPERED. sql.ErrNoRows passes through.
func trialRow(sc interface{ Scan(...any) error }) (contract.TrialRecord, error) {
	var (
		id, snap, model, obj, js string
		r                        contract.TrialRecord
		passed, ood, executed    int
		impr                     sql.NullFloat64
	)
	if err := sc.Scan(&id, &snap, &model, &obj, &r.LineID, &r.Purpose, &r.GateEvalID, &passed, &r.RejectCode, &r.HardViolations, &ood, &impr, &r.Hash, &js, &executed); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return r, err
		}
		return r, sqldb.Err(err, "read trial")
	}
	t, err := contract.ParseTrial([]byte(js))
	if err != nil {
		return r, tampered(CodeTrialTampered, "stored trial %s does not decode: %v", id, err)
	}
	h, err := t.Hash()
	if err != nil {
		return r, tampered(CodeTrialTampered, "stored trial %s cannot be hashed: %v", id, err)
	}
	if h != r.Hash {
		return r, tampered(CodeTrialTampered, "stored trial %s hashes to %s, its row says %s: it was changed after it was recorded", id, h, r.Hash)
	}
	p, reject, hard := deriveTrial(t)
	var bad []string
	check := func(ok bool, col string) {
		if !ok {
			bad = append(bad, col)
		}
	}
	check(t.TrialID == id, "trial_id")
	check(t.SnapshotID == snap, "snapshot_id")
	check(t.ModelID == model, "model_id")
	check(t.ObjectiveID == obj, "objective_id")
	check(b2i(p) == passed, "passed")
	check(reject == r.RejectCode, "reject_code")
	check(hard == r.HardViolations, "hard_violations")
	check(b2i(t.OutOfDistribution.Accepted) == ood, "ood_accepted")
	check(impr.Valid && (impr.Float64 == t.BaselineComparison.Improvement || (math.IsNaN(impr.Float64) && math.IsNaN(t.BaselineComparison.Improvement))), "improvement")
	check(executed == 0, "candidate_executed")
	if len(bad) > 0 {
		return r, tampered(CodeTrialTampered, "stored trial %s: columns %s disagree with its contract", id, strings.Join(bad, ", "))
	}
	r.Trial, r.Passed, r.OODAccepted, r.Improvement = t, p, t.OutOfDistribution.Accepted, t.BaselineComparison.Improvement
	return r, nil
}

// GetTrial returns a stored trial, verifying its hash and derived columns
// (AML_TRIAL_TAMPERED when they disagree, AML_NOT_FOUND when absent).
func (s *Store) GetTrial(ctx context.Context, id string) (contract.TrialRecord, error) {
	return getTrial(ctx, s.db, id)
}

func getTrial(ctx context.Context, db sqldb.Querier, id string) (contract.TrialRecord, error) {
	r, err := trialRow(db.QueryRowContext(ctx, `SELECT `+trialCols+` FROM twin_trials WHERE trial_id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, notFound("trial", id)
	}
	return r, err
}

// ListTrials returns stored trials, newest first, each verified as in
// GetTrial (one tampered row fails the list).
func (s *Store) ListTrials(ctx context.Context, f contract.TrialFilter) ([]contract.TrialRecord, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+trialCols+` FROM twin_trials WHERE (?1='' OR model_id=?1) AND (?2='' OR gate_eval_id=?2) AND (?3='' OR line_id=?3)
		ORDER BY created_at DESC, trial_id DESC LIMIT ?4`, f.ModelID, f.GateEvalID, f.LineID, limit)
	if err != nil {
		return nil, sqldb.Err(err, "list trials")
	}
	defer rows.Close()
	out := []contract.TrialRecord{}
	for rows.Next() {
		r, err := trialRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, sqldb.Err(rows.Err(), "list trials")
}

// PutObjective validates an objective profile and stores it under its id,
// replacing an earlier definition (trials and certificates keep the hash
// they used). The row and its audit entry ("objective.put", actor
// o.CreatedBy) commit together. It returns the profile's hash.
func (s *Store) PutObjective(ctx context.Context, o *contract.ObjectiveProfile) (string, error) {
	if o == nil {
		return "", core.Errorf(core.CodeInvalidArgument, "objective profile is required")
	}
	if err := o.Validate(); err != nil {
		return "", err
	}
	hash, err := o.Hash()
	if err != nil {
		return "", err
	}
	js, err := core.CanonicalJSON(o)
	if err != nil {
		return "", err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return "", sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	var old, oldJS string
	switch err := tx.QueryRowContext(ctx, `SELECT hash, objective_json FROM twin_objectives WHERE objective_id=?`, o.ObjectiveID).Scan(&old, &oldJS); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return "", sqldb.Err(err, "read objective %s", o.ObjectiveID)
	default:
		// A profile stays on its line: another line's engineer cannot
		// redefine it under the same id (and no one can move it).
		var prev struct {
			LineID string `json:"lineId"`
		}
		if err := json.Unmarshal([]byte(oldJS), &prev); err != nil {
			return "", tampered(CodeObjectiveTampered, "stored objective %s does not decode: %v", o.ObjectiveID, err)
		}
		if prev.LineID != o.LineID {
			return "", core.FieldErrorf(core.CodeConflict, "objectiveId", "objective %s belongs to %s, not %s: store it under another id", o.ObjectiveID, lineText(prev.LineID), lineText(o.LineID))
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO twin_objectives(objective_id, hash, objective_json, created_by, created_at) VALUES (?,?,?,?,?)
		ON CONFLICT(objective_id) DO UPDATE SET hash=excluded.hash, objective_json=excluded.objective_json, created_by=excluded.created_by, created_at=excluded.created_at`,
		o.ObjectiveID, hash, string(js), o.CreatedBy, o.CreatedAt.UnixMilli()); err != nil {
		return "", sqldb.Err(err, "store objective %s", o.ObjectiveID)
	}
	payload := map[string]any{"objectiveId": o.ObjectiveID, "hash": hash, "replacedHash": old}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, o.CreatedBy, AuditObjectivePut, o.ObjectiveID, "", payload); err != nil {
		return "", err
	}
	return hash, sqldb.Err(tx.Commit(), "commit objective %s", o.ObjectiveID)
}

// GetObjective returns a stored objective profile and its hash, verifying
// the hash (AML_OBJECTIVE_TAMPERED) — AML_NOT_FOUND when absent.
func (s *Store) GetObjective(ctx context.Context, id string) (*contract.ObjectiveProfile, string, error) {
	return getObjective(ctx, s.db, id)
}

func getObjective(ctx context.Context, db sqldb.Querier, id string) (*contract.ObjectiveProfile, string, error) {
	var hash, js string
	err := db.QueryRowContext(ctx, `SELECT hash, objective_json FROM twin_objectives WHERE objective_id=?`, id).Scan(&hash, &js)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", notFound("objective", id)
	}
	if err != nil {
		return nil, "", sqldb.Err(err, "read objective %s", id)
	}
	var o contract.ObjectiveProfile
	if err := json.Unmarshal([]byte(js), &o); err != nil {
		return nil, "", tampered(CodeObjectiveTampered, "stored objective %s does not decode: %v", id, err)
	}
	if err := o.Validate(); err != nil {
		return nil, "", tampered(CodeObjectiveTampered, "stored objective %s is invalid: %v", id, err)
	}
	h, err := o.Hash()
	if err != nil || h != hash || o.ObjectiveID != id {
		return nil, "", tampered(CodeObjectiveTampered, "stored objective %s hashes to %s, its row says %s", id, h, hash)
	}
	return &o, hash, nil
}

// msTime converts epoch milliseconds to UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// lineText names a profile's line in a message.
func lineText(line string) string {
	if line == "" {
		return "every line (global)"
	}
	return "line " + line
}
