package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// twinHash is a well-formed content hash (64 hex characters) for fixture
// rows; the schema only checks its length.
var twinHash = strings.Repeat("a", 64)

// twinFixture is one or a few rows per twin table, in SQL both back-ends
// accept (no rowid, no write_id: those are assigned by the database).
var twinFixture = []string{
	`INSERT INTO twin_objectives(objective_id, hash, objective_json, created_by, created_at) VALUES ('o1', '` + twinHash + `', '{}', 'u', 1)`,
	`INSERT INTO twin_snapshots(snapshot_id, scene_id, scene_version, line_id, captured_at, created_at, created_by, strict, hash, snapshot_json)
		VALUES ('s1', 'sc', 'v1', 'L1', 1, 1, 'u', 0, '` + twinHash + `', '{}')`,
	`INSERT INTO twin_trials(trial_id, snapshot_id, model_id, objective_id, line_id, created_at, created_by, purpose, gate_eval_id,
		passed, reject_code, hard_violations, ood_accepted, improvement, hash, trial_json, candidate_executed)
		VALUES ('t1', 's1', 'm1', 'o1', 'L1', 1, 'u', 'manual', '', 1, '', 0, 0, 0.5, '` + twinHash + `', '{}', 0)`,
	`INSERT INTO twin_certificates(certificate_id, trial_id, line_id, status, hash, created_by, approved_by, created_at, expires_at, updated_at, cert_json, audit_seq, audit_hash, candidate_executed)
		VALUES ('c_issued', 't1', 'L1', 'ISSUED', '` + twinHash + `', 'u', '', 1, 9, 1, '{}', 1, '', 0),
		       ('c_approved', 't1', 'L1', 'APPROVED', '` + twinHash + `', 'u', 'a', 1, 9, 1, '{}', 2, '', 0),
		       ('c_executed', 't1', 'L1', 'EXECUTED', '` + twinHash + `', 'u', 'a', 1, 9, 1, '{}', 3, '', 0),
		       ('c_expired', 't1', 'L1', 'EXPIRED', '` + twinHash + `', 'u', '', 1, 9, 1, '{}', 4, '', 0),
		       ('c_revoked', 't1', 'L1', 'REVOKED', '` + twinHash + `', 'u', '', 1, 9, 1, '{}', 5, '', 0)`,
	`INSERT INTO twin_channels(line_id, channel_id, profile, control_policy, created_at, updated_at) VALUES ('L1', 'ch1', 'hybrid_twin', 'bounded_auto', 1, 1)`,
	`INSERT INTO twin_writes(line_id, node_id, certificate_id, at, value, delta) VALUES ('L1', 'n1', 'c_executed', 1, 2.5, 0.5)`,
	`INSERT INTO twin_shadow(model_id, run_id, created_at, steps, nrmse, coverage, evidence_json) VALUES ('m1', 'r1', 1, 10, 0.1, 0.9, '{}')`,
	// Two evaluations in the same millisecond: the later insert is the
	// latest by (created_at, rowid).
	`INSERT INTO twin_gate_evals(gate_eval_id, model_id, created_at, created_by, passed, tuning_mode, report_json) VALUES ('g2', 'm1', 5, 'u', 1, '', '{}')`,
	`INSERT INTO twin_gate_evals(gate_eval_id, model_id, created_at, created_by, passed, tuning_mode, report_json) VALUES ('g1', 'm1', 5, 'u', 0, '', '{}')`,
	`INSERT INTO twin_calibrations(request_id, dedup_key, scene_id, line_id, state, created_at) VALUES ('q1', 'k1', 'sc', 'L1', 'queued', 1)`,
}

// SQLSTATEs the cases expect on PostgreSQL.
const (
	stateTrigger = "23000" // integrity_constraint_violation, raised by twin_refuse
	stateCheck   = "23514" // check_violation
	stateUnique  = "23505" // unique_violation
)

// twinCase is one statement run against the fixture on both back-ends,
// each in a transaction that is rolled back, so cases do not see each
// other's changes.
type twinCase struct {
	name string
	sql  string
	// pgSQL replaces sql on PostgreSQL where the dialects differ.
	pgSQL string
	// state is the SQLSTATE PostgreSQL must refuse with; "" means the
	// statement must succeed on both back-ends.
	state string
	// msg, when set, must appear in the error on both back-ends (the
	// trigger's message).
	msg string
}

const (
	msgSnapshot = "twin_snapshots: a snapshot cannot change"
	msgTrial    = "twin_trials: a trial cannot change"
	msgBody     = "twin_certificates: the signed body cannot change"
	msgTerminal = "twin_certificates: a terminal certificate cannot change"
	msgWrites   = "twin_writes: the write history is append-only"
)

func twinCases() []twinCase {
	cs := []twinCase{
		// Snapshots: never updated (even to the same value), may be deleted.
		{name: "snapshot update", sql: `UPDATE twin_snapshots SET line_id='L2' WHERE snapshot_id='s1'`, state: stateTrigger, msg: msgSnapshot},
		{name: "snapshot no-op update", sql: `UPDATE twin_snapshots SET hash=hash WHERE snapshot_id='s1'`, state: stateTrigger, msg: msgSnapshot},
		{name: "snapshot update of no row", sql: `UPDATE twin_snapshots SET line_id='L2' WHERE snapshot_id='none'`},
		{name: "snapshot delete", sql: `DELETE FROM twin_snapshots WHERE snapshot_id='s1'`},
		{name: "snapshot strict=2", sql: `INSERT INTO twin_snapshots(snapshot_id, scene_id, scene_version, line_id, captured_at, created_at, strict, hash, snapshot_json)
			VALUES ('s2', 'sc', 'v1', 'L1', 1, 1, 2, '` + twinHash + `', '{}')`, state: stateCheck},
		{name: "snapshot short hash", sql: `INSERT INTO twin_snapshots(snapshot_id, scene_id, scene_version, line_id, captured_at, created_at, hash, snapshot_json)
			VALUES ('s2', 'sc', 'v1', 'L1', 1, 1, 'abc', '{}')`, state: stateCheck},
		{name: "snapshot trigger dropped by name", sql: `DROP TRIGGER twin_snapshots_no_update; UPDATE twin_snapshots SET line_id='L2' WHERE snapshot_id='s1'`,
			pgSQL: `DROP TRIGGER twin_snapshots_no_update ON twin_snapshots; UPDATE twin_snapshots SET line_id='L2' WHERE snapshot_id='s1'`},

		// Trials: never updated, may be deleted; never executed.
		{name: "trial update", sql: `UPDATE twin_trials SET passed=0 WHERE trial_id='t1'`, state: stateTrigger, msg: msgTrial},
		{name: "trial candidate_executed update", sql: `UPDATE twin_trials SET candidate_executed=1 WHERE trial_id='t1'`, state: stateTrigger, msg: msgTrial},
		{name: "trial delete", sql: `DELETE FROM twin_trials WHERE trial_id='t1'`},
		{name: "trial trigger dropped by name", sql: `DROP TRIGGER twin_trials_no_update; UPDATE twin_trials SET passed=0 WHERE trial_id='t1'`,
			pgSQL: `DROP TRIGGER twin_trials_no_update ON twin_trials; UPDATE twin_trials SET passed=0 WHERE trial_id='t1'`},
		{name: "trial executed by update once the trigger is gone", sql: `DROP TRIGGER twin_trials_no_update; UPDATE twin_trials SET candidate_executed=1 WHERE trial_id='t1'`,
			pgSQL: `DROP TRIGGER twin_trials_no_update ON twin_trials; UPDATE twin_trials SET candidate_executed=1 WHERE trial_id='t1'`, state: stateCheck},
	}
	trialInsert := func(col, val string) string {
		vals := map[string]string{"purpose": "'manual'", "passed": "1", "ood_accepted": "0", "candidate_executed": "0", "hash": "'" + twinHash + "'"}
		vals[col] = val
		return `INSERT INTO twin_trials(trial_id, snapshot_id, model_id, objective_id, line_id, created_at, purpose, passed, ood_accepted, hash, trial_json, candidate_executed)
			VALUES ('t2', 's1', 'm1', 'o1', 'L1', 1, ` + vals["purpose"] + `, ` + vals["passed"] + `, ` + vals["ood_accepted"] + `, ` + vals["hash"] + `, '{}', ` + vals["candidate_executed"] + `)`
	}
	cs = append(cs,
		twinCase{name: "trial insert ok", sql: trialInsert("purpose", "'gate'")},
		twinCase{name: "trial candidate_executed=1", sql: trialInsert("candidate_executed", "1"), state: stateCheck},
		twinCase{name: "trial bad purpose", sql: trialInsert("purpose", "'live'"), state: stateCheck},
		twinCase{name: "trial passed=2", sql: trialInsert("passed", "2"), state: stateCheck},
		twinCase{name: "trial ood_accepted=-1", sql: trialInsert("ood_accepted", "-1"), state: stateCheck},
		twinCase{name: "trial short hash", sql: trialInsert("hash", "'ab'"), state: stateCheck},
	)

	// Certificates: the lifecycle as the Go code moves it, terminal
	// statuses frozen, the signed body never changes.
	cs = append(cs,
		twinCase{name: "cert ISSUED to APPROVED", sql: `UPDATE twin_certificates SET status='APPROVED', approved_by='a', cert_json='{"x":1}', updated_at=2 WHERE certificate_id='c_issued' AND status='ISSUED'`},
		twinCase{name: "cert ISSUED to REVOKED", sql: `UPDATE twin_certificates SET status='REVOKED', updated_at=2 WHERE certificate_id='c_issued'`},
		twinCase{name: "cert APPROVED to EXECUTED", sql: `UPDATE twin_certificates SET status='EXECUTED', updated_at=2 WHERE certificate_id='c_approved'`},
		twinCase{name: "cert APPROVED to EXPIRED", sql: `UPDATE twin_certificates SET status='EXPIRED', updated_at=2 WHERE certificate_id='c_approved'`},
		twinCase{name: "cert EXECUTED to APPROVED", sql: `UPDATE twin_certificates SET status='APPROVED' WHERE certificate_id='c_executed'`, state: stateTrigger, msg: msgTerminal},
		twinCase{name: "cert EXPIRED to ISSUED", sql: `UPDATE twin_certificates SET status='ISSUED' WHERE certificate_id='c_expired'`, state: stateTrigger, msg: msgTerminal},
		twinCase{name: "cert REVOKED to EXECUTED", sql: `UPDATE twin_certificates SET status='EXECUTED' WHERE certificate_id='c_revoked'`, state: stateTrigger, msg: msgTerminal},
		twinCase{name: "cert terminal status set to itself", sql: `UPDATE twin_certificates SET status=status WHERE certificate_id='c_executed'`, state: stateTrigger, msg: msgTerminal},
		// Only status is guarded on a terminal certificate, on SQLite too.
		twinCase{name: "cert terminal cert_json", sql: `UPDATE twin_certificates SET cert_json='{"y":1}', updated_at=3 WHERE certificate_id='c_executed'`},
		twinCase{name: "cert line_id is not signed", sql: `UPDATE twin_certificates SET line_id='L2' WHERE certificate_id='c_issued'`},
		twinCase{name: "cert bad status", sql: `UPDATE twin_certificates SET status='DONE' WHERE certificate_id='c_issued'`, state: stateCheck},
		twinCase{name: "cert delete", sql: `DELETE FROM twin_certificates WHERE certificate_id='c_revoked'`},
		twinCase{name: "cert candidate_executed=1", sql: `INSERT INTO twin_certificates(certificate_id, trial_id, line_id, status, hash, created_by, created_at, expires_at, updated_at, cert_json, candidate_executed)
			VALUES ('c2', 't1', 'L1', 'ISSUED', '` + twinHash + `', 'u', 1, 9, 1, '{}', 1)`, state: stateCheck},
		twinCase{name: "cert terminal trigger dropped by name", sql: `DROP TRIGGER twin_certificates_terminal; UPDATE twin_certificates SET status='APPROVED' WHERE certificate_id='c_executed'`,
			pgSQL: `DROP TRIGGER twin_certificates_terminal ON twin_certificates; UPDATE twin_certificates SET status='APPROVED' WHERE certificate_id='c_executed'`},
	)
	for _, set := range []string{"hash='" + strings.Repeat("b", 64) + "'", "hash=hash", "trial_id='t2'", "created_by='v'", "created_at=2", "expires_at=99", "audit_seq=7", "audit_hash='x'"} {
		cs = append(cs, twinCase{name: "cert body " + set, sql: `UPDATE twin_certificates SET ` + set + ` WHERE certificate_id='c_issued'`, state: stateTrigger, msg: msgBody})
	}

	cs = append(cs,
		// Channels: upsert as the Go code does it; CHECKs and the unique
		// channel id.
		twinCase{name: "channel upsert", sql: `INSERT INTO twin_channels(line_id, channel_id, profile, control_policy, created_at, updated_at) VALUES ('L1', 'ch1', 'legacy', 'recommendation_only', 1, 2)
			ON CONFLICT(line_id) DO UPDATE SET profile=excluded.profile, control_policy=excluded.control_policy, updated_at=excluded.updated_at`},
		twinCase{name: "channel bad profile", sql: `UPDATE twin_channels SET profile='twin' WHERE line_id='L1'`, state: stateCheck},
		twinCase{name: "channel bad policy", sql: `UPDATE twin_channels SET control_policy='auto' WHERE line_id='L1'`, state: stateCheck},
		twinCase{name: "channel id taken", sql: `INSERT INTO twin_channels(line_id, channel_id, profile, control_policy, created_at, updated_at) VALUES ('L2', 'ch1', 'legacy', 'recommendation_only', 1, 1)`, state: stateUnique},

		// The write history: append-only.
		twinCase{name: "write insert", sql: `INSERT INTO twin_writes(line_id, node_id, certificate_id, at, value, delta, outcome) VALUES ('L1', 'n1', 'c_executed', 2, 3, 0.5, 'ok')`},
		twinCase{name: "write update", sql: `UPDATE twin_writes SET readback=2.5`, state: stateTrigger, msg: msgWrites},
		twinCase{name: "write delete", sql: `DELETE FROM twin_writes WHERE line_id='L1'`, state: stateTrigger, msg: msgWrites},
		// SQLite has no TRUNCATE; emptying the table there is DELETE.
		twinCase{name: "write truncate", sql: `DELETE FROM twin_writes`, pgSQL: `TRUNCATE twin_writes`, state: stateTrigger, msg: msgWrites},
		twinCase{name: "write update trigger dropped by name", sql: `DROP TRIGGER twin_writes_append_only; UPDATE twin_writes SET readback=2.5`,
			pgSQL: `DROP TRIGGER twin_writes_append_only ON twin_writes; UPDATE twin_writes SET readback=2.5`},
		twinCase{name: "write delete trigger dropped by name", sql: `DROP TRIGGER twin_writes_no_delete; DELETE FROM twin_writes`,
			pgSQL: `DROP TRIGGER twin_writes_no_delete ON twin_writes; DELETE FROM twin_writes`},

		// Shadow evidence: one row per model and run, upserted.
		twinCase{name: "shadow upsert", sql: `INSERT INTO twin_shadow(model_id, run_id, created_at, steps, nrmse, coverage, evidence_json) VALUES ('m1', 'r1', 2, 20, NULL, NULL, '{}')
			ON CONFLICT(model_id, run_id) DO UPDATE SET created_at=excluded.created_at, steps=excluded.steps, nrmse=excluded.nrmse, coverage=excluded.coverage, evidence_json=excluded.evidence_json`},
		twinCase{name: "shadow duplicate", sql: `INSERT INTO twin_shadow(model_id, run_id, created_at, steps, evidence_json) VALUES ('m1', 'r1', 2, 20, '{}')`, state: stateUnique},

		// Gate evaluations.
		twinCase{name: "gate eval passed=2", sql: `INSERT INTO twin_gate_evals(gate_eval_id, model_id, created_at, passed, report_json) VALUES ('g3', 'm1', 1, 2, '{}')`, state: stateCheck},

		// Recalibration requests: one active request per dedup key.
		twinCase{name: "calibration second active request", sql: `INSERT INTO twin_calibrations(request_id, dedup_key, scene_id, line_id, state, created_at) VALUES ('q2', 'k1', 'sc', 'L1', 'queued', 2)`, state: stateUnique},
		twinCase{name: "calibration second request once done", sql: `UPDATE twin_calibrations SET state='done' WHERE request_id='q1';
			INSERT INTO twin_calibrations(request_id, dedup_key, scene_id, line_id, state, created_at) VALUES ('q2', 'k1', 'sc', 'L1', 'queued', 2)`},
		twinCase{name: "calibration cooldown still blocks", sql: `UPDATE twin_calibrations SET state='cooldown', cooldown_until=9 WHERE request_id='q1';
			INSERT INTO twin_calibrations(request_id, dedup_key, scene_id, line_id, state, created_at) VALUES ('q2', 'k1', 'sc', 'L1', 'queued', 2)`, state: stateUnique},
		twinCase{name: "calibration bad state", sql: `UPDATE twin_calibrations SET state='paused' WHERE request_id='q1'`, state: stateCheck},
	)
	return cs
}

// TestTwinSchemaRefusals runs every case on PostgreSQL and on SQLite over
// the same fixture: the PostgreSQL translation of migration 0006 must
// refuse exactly what SQLite's refuses, with the same trigger messages, the
// SQLSTATE of the kind of refusal, and AML_CONFLICT through dbErr.
func TestTwinSchemaRefusals(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for _, q := range twinFixture {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatalf("postgres fixture %.60s: %v", q, err)
		}
	}
	lite, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lite.Close(); err != nil {
			t.Error(err)
		}
	}()
	db := lite.DB()
	for _, q := range twinFixture {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("sqlite fixture %.60s: %v", q, err)
		}
	}

	for _, c := range twinCases() {
		t.Run(c.name, func(t *testing.T) {
			pgSQL, liteSQL := c.sql, c.sql
			if c.pgSQL != "" {
				pgSQL = c.pgSQL
			}

			tx, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, pgErr := tx.Exec(ctx, pgSQL)
			tx.Rollback(ctx)
			switch {
			case c.state == "" && pgErr != nil:
				t.Errorf("postgres refused: %v", pgErr)
			case c.state != "" && pgErr == nil:
				t.Errorf("postgres accepted, want SQLSTATE %s", c.state)
			case c.state != "":
				if got := pgCode(pgErr); got != c.state {
					t.Errorf("postgres SQLSTATE %s (%v), want %s", got, pgErr, c.state)
				}
				if got := core.CodeOf(dbErr(pgErr, "x")); got != core.CodeConflict {
					t.Errorf("postgres refusal maps to %s, want %s", got, core.CodeConflict)
				}
				if !strings.Contains(pgErr.Error(), c.msg) {
					t.Errorf("postgres error %q, want %q in it", pgErr, c.msg)
				}
			}

			ltx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, liteErr := ltx.ExecContext(ctx, liteSQL)
			ltx.Rollback()
			switch {
			case c.state == "" && liteErr != nil:
				t.Errorf("sqlite refused: %v", liteErr)
			case c.state != "" && liteErr == nil:
				t.Errorf("sqlite accepted what postgres refuses with %s", c.state)
			case c.state != "":
				var se *msqlite.Error
				if !errors.As(liteErr, &se) || se.Code()&0xff != sqlite3.SQLITE_CONSTRAINT {
					t.Errorf("sqlite error %v is not a constraint error", liteErr)
				}
				if !strings.Contains(liteErr.Error(), c.msg) {
					t.Errorf("sqlite error %q, want %q in it", liteErr, c.msg)
				}
			}
		})
	}

	// rowid on twin_gate_evals orders same-millisecond evaluations by
	// insertion, as SQLite's implicit rowid does.
	const latest = `SELECT gate_eval_id FROM twin_gate_evals WHERE model_id='m1' ORDER BY created_at DESC, rowid DESC LIMIT 1`
	var pgLatest, liteLatest string
	if err := s.pool.QueryRow(ctx, latest).Scan(&pgLatest); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, latest).Scan(&liteLatest); err != nil {
		t.Fatal(err)
	}
	if pgLatest != "g1" || liteLatest != "g1" {
		t.Errorf("latest gate evaluation: postgres %q, sqlite %q, want the last inserted g1", pgLatest, liteLatest)
	}

	// The fixture is intact: every case was rolled back.
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM twin_writes`).Scan(&n); err != nil || n != 1 {
		t.Errorf("postgres twin_writes has %d rows (err %v), want the fixture's 1", n, err)
	}
	var ln int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM twin_writes`).Scan(&ln); err != nil || ln != 1 {
		t.Errorf("sqlite twin_writes has %d rows (err %v), want the fixture's 1", ln, err)
	}
}
