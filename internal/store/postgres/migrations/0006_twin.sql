-- 0006: the digital twin's records, the PostgreSQL form of SQLite's 0006
-- (same tables, column names, CHECKs, indexes and trigger names, so the Go
-- code runs the same statements on both back-ends; TestSchemaParity checks
-- the names). Times are epoch milliseconds in bigint, REAL is double
-- precision, 0/1 flags stay integer with the same CHECK. Differences, and
-- why:
--   * SQLite's RAISE(ABORT, msg) triggers are row triggers calling
--     twin_refuse(msg), which raises integrity_constraint_violation
--     (SQLSTATE 23000: AML_CONFLICT in dbErr, as SQLite's constraint error
--     is). Trigger names are SQLite's, so tests can drop them by name
--     (DROP TRIGGER twin_trials_no_update ON twin_trials).
--   * twin_gate_evals has an explicit rowid identity column: the Go code
--     orders by SQLite's implicit rowid (ORDER BY created_at DESC, rowid
--     DESC), which PostgreSQL does not have. TestSchemaParity ignores
--     PostgreSQL columns named rowid.
--   * twin_writes.write_id (INTEGER PRIMARY KEY AUTOINCREMENT) is an
--     identity column; GENERATED ALWAYS because ids are the write guard's
--     compare-and-set token and only the sequence may assign them.
--   * twin_writes also refuses TRUNCATE, which bypasses row triggers on
--     PostgreSQL and does not exist on SQLite: the history stays
--     append-only either way.
--   * When one UPDATE trips both twin_certificates triggers, PostgreSQL
--     fires them in name order (hash_fixed first), SQLite newest first
--     (terminal first): the statement is refused on both, only the message
--     differs.

-- twin_refuse is every twin trigger's body: refuse the row change with the
-- trigger's first argument as the message.
CREATE FUNCTION twin_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'integrity_constraint_violation';
END
$$;

-- Objective profiles (contract.ObjectiveProfile), one row per id; a new
-- definition under the same id replaces the old one (trials keep the hash
-- they used).
CREATE TABLE twin_objectives (
    objective_id   text PRIMARY KEY,
    hash           text NOT NULL CHECK (length(hash) = 64),
    objective_json text NOT NULL,
    created_by     text NOT NULL DEFAULT '',
    created_at     bigint NOT NULL
);

-- Snapshots (contract.TwinSnapshot): immutable once written.
CREATE TABLE twin_snapshots (
    snapshot_id   text PRIMARY KEY,
    scene_id      text NOT NULL,
    scene_version text NOT NULL,
    line_id       text NOT NULL,
    captured_at   bigint NOT NULL,
    created_at    bigint NOT NULL,
    created_by    text NOT NULL DEFAULT '',
    strict        integer NOT NULL DEFAULT 0 CHECK (strict IN (0, 1)),
    hash          text NOT NULL CHECK (length(hash) = 64),
    snapshot_json text NOT NULL
);
CREATE INDEX twin_snapshots_line ON twin_snapshots(line_id, captured_at);
CREATE TRIGGER twin_snapshots_no_update BEFORE UPDATE ON twin_snapshots
    FOR EACH ROW EXECUTE FUNCTION twin_refuse('twin_snapshots: a snapshot cannot change');

-- Virtual trials (contract.VirtualTrial). A trial never executes anything:
-- candidate_executed is 0 by CHECK. purpose says why it ran (manual,
-- optimize, gate); gate_eval_id ties gate trials to their evaluation.
CREATE TABLE twin_trials (
    trial_id           text PRIMARY KEY,
    snapshot_id        text NOT NULL,
    model_id           text NOT NULL,
    objective_id       text NOT NULL,
    line_id            text NOT NULL,
    created_at         bigint NOT NULL,
    created_by         text NOT NULL DEFAULT '',
    purpose            text NOT NULL DEFAULT 'manual' CHECK (purpose IN ('manual', 'optimize', 'gate', 'demo')),
    gate_eval_id       text NOT NULL DEFAULT '',
    passed             integer NOT NULL CHECK (passed IN (0, 1)),
    reject_code        text NOT NULL DEFAULT '',
    hard_violations    integer NOT NULL DEFAULT 0,
    ood_accepted       integer NOT NULL CHECK (ood_accepted IN (0, 1)),
    improvement        double precision,
    hash               text NOT NULL CHECK (length(hash) = 64),
    trial_json         text NOT NULL,
    candidate_executed integer NOT NULL DEFAULT 0 CHECK (candidate_executed = 0)
);
CREATE INDEX twin_trials_model ON twin_trials(model_id, created_at);
CREATE INDEX twin_trials_gate ON twin_trials(gate_eval_id) WHERE gate_eval_id <> '';
CREATE TRIGGER twin_trials_no_update BEFORE UPDATE ON twin_trials
    FOR EACH ROW EXECUTE FUNCTION twin_refuse('twin_trials: a trial cannot change');

-- Recommendation certificates (contract.RecommendationCertificate). The
-- signed body never changes; status moves ISSUED -> APPROVED ->
-- (EXECUTED | EXPIRED | REVOKED) (ISSUED may also expire or be revoked).
CREATE TABLE twin_certificates (
    certificate_id text PRIMARY KEY,           -- recommendationId
    trial_id       text NOT NULL,
    line_id        text NOT NULL,
    status         text NOT NULL CHECK (status IN ('ISSUED', 'APPROVED', 'EXECUTED', 'EXPIRED', 'REVOKED')),
    hash           text NOT NULL CHECK (length(hash) = 64),  -- certificateHash
    created_by     text NOT NULL,
    approved_by    text NOT NULL DEFAULT '',
    created_at     bigint NOT NULL,
    expires_at     bigint NOT NULL,
    updated_at     bigint NOT NULL,
    cert_json      text NOT NULL,
    -- the audit entry that recorded the issue (seq, hash): a head to check
    -- the log against later (audit.VerifyHead), detecting a truncated log.
    audit_seq      bigint NOT NULL DEFAULT 0,
    audit_hash     text NOT NULL DEFAULT '',
    candidate_executed integer NOT NULL DEFAULT 0 CHECK (candidate_executed = 0)
);
CREATE INDEX twin_certificates_status ON twin_certificates(status, created_at);
CREATE INDEX twin_certificates_line ON twin_certificates(line_id, created_at);
-- UPDATE OF fires when a listed column is a SET target, changed or not, as
-- on SQLite.
CREATE TRIGGER twin_certificates_hash_fixed
    BEFORE UPDATE OF hash, trial_id, created_by, created_at, expires_at, audit_seq, audit_hash ON twin_certificates
    FOR EACH ROW EXECUTE FUNCTION twin_refuse('twin_certificates: the signed body cannot change');
CREATE TRIGGER twin_certificates_terminal BEFORE UPDATE OF status ON twin_certificates
    FOR EACH ROW WHEN (OLD.status IN ('EXECUTED', 'EXPIRED', 'REVOKED'))
    EXECUTE FUNCTION twin_refuse('twin_certificates: a terminal certificate cannot change');

-- Channel profiles (one per line): legacy | hybrid_twin and the control
-- policy the write guard applies.
CREATE TABLE twin_channels (
    line_id        text PRIMARY KEY,
    channel_id     text NOT NULL,
    profile        text NOT NULL CHECK (profile IN ('legacy', 'hybrid_twin')),
    control_policy text NOT NULL CHECK (control_policy IN ('recommendation_only', 'hitl_governed', 'bounded_auto')),
    scene_id       text NOT NULL DEFAULT '',
    scene_version  text NOT NULL DEFAULT '',
    bounds_json    text NOT NULL DEFAULT '{}',
    capability_json text NOT NULL DEFAULT '{}',
    updated_by     text NOT NULL DEFAULT '',
    created_at     bigint NOT NULL,
    updated_at     bigint NOT NULL
);
CREATE UNIQUE INDEX twin_channels_id ON twin_channels(channel_id);

-- Every write attempted through the guard (append-only): what the guard's
-- interval/count checks read back.
CREATE TABLE twin_writes (
    write_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    line_id        text NOT NULL,
    node_id        text NOT NULL,
    variable_id    text NOT NULL DEFAULT '',
    certificate_id text NOT NULL,
    run_id         text NOT NULL DEFAULT '',
    at             bigint NOT NULL,
    value          double precision NOT NULL,
    delta          double precision NOT NULL,
    outcome        text NOT NULL DEFAULT '',
    readback       double precision
);
CREATE INDEX twin_writes_line ON twin_writes(line_id, at);
CREATE TRIGGER twin_writes_append_only BEFORE UPDATE ON twin_writes
    FOR EACH ROW EXECUTE FUNCTION twin_refuse('twin_writes: the write history is append-only');
CREATE TRIGGER twin_writes_no_delete BEFORE DELETE ON twin_writes
    FOR EACH ROW EXECUTE FUNCTION twin_refuse('twin_writes: the write history is append-only');
CREATE TRIGGER twin_writes_no_truncate BEFORE TRUNCATE ON twin_writes
    FOR EACH STATEMENT EXECUTE FUNCTION twin_refuse('twin_writes: the write history is append-only');

-- Shadow evidence: a model's predictions compared with what the line did on
-- a run that ended after the model was made. One row per model and run.
CREATE TABLE twin_shadow (
    model_id      text NOT NULL,
    run_id        text NOT NULL,
    created_at    bigint NOT NULL,
    steps         integer NOT NULL,
    nrmse         double precision,
    coverage      double precision,
    evidence_json text NOT NULL,
    PRIMARY KEY (model_id, run_id)
);

-- Twin gate evaluations (eval.TwinGate over measured inputs). rowid stands
-- in for SQLite's implicit one: the latest evaluation of a model is read
-- with ORDER BY created_at DESC, rowid DESC.
CREATE TABLE twin_gate_evals (
    gate_eval_id text PRIMARY KEY,
    model_id     text NOT NULL,
    created_at   bigint NOT NULL,
    created_by   text NOT NULL DEFAULT '',
    passed       integer NOT NULL CHECK (passed IN (0, 1)),
    tuning_mode  text NOT NULL DEFAULT '',
    report_json  text NOT NULL,
    rowid        bigint GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX twin_gate_evals_model ON twin_gate_evals(model_id, created_at);

-- Recalibration requests (upstream twin_update_runs). At most one request
-- per dedup key is queued, running or cooling down: the partial unique
-- index refuses a second one even under races.
CREATE TABLE twin_calibrations (
    request_id     text PRIMARY KEY,
    dedup_key      text NOT NULL,
    scene_id       text NOT NULL,
    line_id        text NOT NULL,
    recipe_id      text NOT NULL DEFAULT '',
    model_id       text NOT NULL DEFAULT '',
    state          text NOT NULL CHECK (state IN ('queued', 'running', 'cooldown', 'done', 'failed')),
    reason         text NOT NULL DEFAULT '',
    signals_json   text NOT NULL DEFAULT '{}',
    policy_json    text NOT NULL DEFAULT '{}',
    dataset_id     text NOT NULL DEFAULT '',
    job_id         text NOT NULL DEFAULT '',
    new_model_id   text NOT NULL DEFAULT '',  -- the candidate the job registered
    error          text NOT NULL DEFAULT '',
    created_by     text NOT NULL DEFAULT '',
    created_at     bigint NOT NULL,
    started_at     bigint,
    completed_at   bigint,
    cooldown_until bigint
);
CREATE UNIQUE INDEX twin_calibrations_active ON twin_calibrations(dedup_key) WHERE state IN ('queued', 'running', 'cooldown');
CREATE INDEX twin_calibrations_state ON twin_calibrations(state, created_at);
