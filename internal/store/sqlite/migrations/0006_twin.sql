-- 0006: the digital twin's records (internal/twin/...): snapshots, virtual
-- trials, objective profiles, recommendation certificates, channel
-- profiles, the write history, shadow evidence, twin gate evaluations and
-- recalibration requests. Times are epoch milliseconds. *_json columns hold
-- canonical JSON of the corresponding contract; hash columns its content
-- hash (hex sha256).

-- Objective profiles (contract.ObjectiveProfile), one row per id; a new
-- definition under the same id replaces the old one (trials keep the hash
-- they used).
CREATE TABLE twin_objectives (
    objective_id   TEXT PRIMARY KEY,
    hash           TEXT NOT NULL CHECK (length(hash) = 64),
    objective_json TEXT NOT NULL,
    created_by     TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL
);

-- Snapshots (contract.TwinSnapshot): immutable once written.
CREATE TABLE twin_snapshots (
    snapshot_id   TEXT PRIMARY KEY,
    scene_id      TEXT NOT NULL,
    scene_version TEXT NOT NULL,
    line_id       TEXT NOT NULL,
    captured_at   INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    created_by    TEXT NOT NULL DEFAULT '',
    strict        INTEGER NOT NULL DEFAULT 0 CHECK (strict IN (0, 1)),
    hash          TEXT NOT NULL CHECK (length(hash) = 64),
    snapshot_json TEXT NOT NULL
);
CREATE INDEX twin_snapshots_line ON twin_snapshots(line_id, captured_at);
CREATE TRIGGER twin_snapshots_no_update BEFORE UPDATE ON twin_snapshots
BEGIN
    SELECT RAISE(ABORT, 'twin_snapshots: a snapshot cannot change');
END;

-- Virtual trials (contract.VirtualTrial). A trial never executes anything:
-- candidate_executed is 0 by CHECK. purpose says why it ran (manual,
-- optimize, gate); gate_eval_id ties gate trials to their evaluation.
CREATE TABLE twin_trials (
    trial_id           TEXT PRIMARY KEY,
    snapshot_id        TEXT NOT NULL,
    model_id           TEXT NOT NULL,
    objective_id       TEXT NOT NULL,
    line_id            TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    created_by         TEXT NOT NULL DEFAULT '',
    purpose            TEXT NOT NULL DEFAULT 'manual' CHECK (purpose IN ('manual', 'optimize', 'gate', 'demo')),
    gate_eval_id       TEXT NOT NULL DEFAULT '',
    passed             INTEGER NOT NULL CHECK (passed IN (0, 1)),
    reject_code        TEXT NOT NULL DEFAULT '',
    hard_violations    INTEGER NOT NULL DEFAULT 0,
    ood_accepted       INTEGER NOT NULL CHECK (ood_accepted IN (0, 1)),
    improvement        REAL,
    hash               TEXT NOT NULL CHECK (length(hash) = 64),
    trial_json         TEXT NOT NULL,
    candidate_executed INTEGER NOT NULL DEFAULT 0 CHECK (candidate_executed = 0)
);
CREATE INDEX twin_trials_model ON twin_trials(model_id, created_at);
CREATE INDEX twin_trials_gate ON twin_trials(gate_eval_id) WHERE gate_eval_id != '';
CREATE TRIGGER twin_trials_no_update BEFORE UPDATE ON twin_trials
BEGIN
    SELECT RAISE(ABORT, 'twin_trials: a trial cannot change');
END;

-- Recommendation certificates (contract.RecommendationCertificate). The
-- signed body never changes; status moves ISSUED -> APPROVED ->
-- (EXECUTED | EXPIRED | REVOKED) (ISSUED may also expire or be revoked).
CREATE TABLE twin_certificates (
    certificate_id TEXT PRIMARY KEY,           -- recommendationId
    trial_id       TEXT NOT NULL,
    line_id        TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('ISSUED', 'APPROVED', 'EXECUTED', 'EXPIRED', 'REVOKED')),
    hash           TEXT NOT NULL CHECK (length(hash) = 64),  -- certificateHash
    created_by     TEXT NOT NULL,
    approved_by    TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    cert_json      TEXT NOT NULL,
    -- the audit entry that recorded the issue (seq, hash): a head to check
    -- the log against later (audit.VerifyHead), detecting a truncated log.
    audit_seq      INTEGER NOT NULL DEFAULT 0,
    audit_hash     TEXT NOT NULL DEFAULT '',
    candidate_executed INTEGER NOT NULL DEFAULT 0 CHECK (candidate_executed = 0)
);
CREATE INDEX twin_certificates_status ON twin_certificates(status, created_at);
CREATE INDEX twin_certificates_line ON twin_certificates(line_id, created_at);
CREATE TRIGGER twin_certificates_hash_fixed BEFORE UPDATE OF hash, trial_id, created_by, created_at, expires_at, audit_seq, audit_hash ON twin_certificates
BEGIN
    SELECT RAISE(ABORT, 'twin_certificates: the signed body cannot change');
END;
CREATE TRIGGER twin_certificates_terminal BEFORE UPDATE OF status ON twin_certificates
WHEN OLD.status IN ('EXECUTED', 'EXPIRED', 'REVOKED')
BEGIN
    SELECT RAISE(ABORT, 'twin_certificates: a terminal certificate cannot change');
END;

-- Channel profiles (one per line): legacy | hybrid_twin and the control
-- policy the write guard applies.
CREATE TABLE twin_channels (
    line_id        TEXT PRIMARY KEY,
    channel_id     TEXT NOT NULL,
    profile        TEXT NOT NULL CHECK (profile IN ('legacy', 'hybrid_twin')),
    control_policy TEXT NOT NULL CHECK (control_policy IN ('recommendation_only', 'hitl_governed', 'bounded_auto')),
    scene_id       TEXT NOT NULL DEFAULT '',
    scene_version  TEXT NOT NULL DEFAULT '',
    bounds_json    TEXT NOT NULL DEFAULT '{}',
    capability_json TEXT NOT NULL DEFAULT '{}',
    updated_by     TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE UNIQUE INDEX twin_channels_id ON twin_channels(channel_id);

-- Every write attempted through the guard (append-only): what the guard's
-- interval/count checks read back.
CREATE TABLE twin_writes (
    write_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    line_id        TEXT NOT NULL,
    node_id        TEXT NOT NULL,
    variable_id    TEXT NOT NULL DEFAULT '',
    certificate_id TEXT NOT NULL,
    run_id         TEXT NOT NULL DEFAULT '',
    at             INTEGER NOT NULL,
    value          REAL NOT NULL,
    delta          REAL NOT NULL,
    outcome        TEXT NOT NULL DEFAULT '',
    readback       REAL
);
CREATE INDEX twin_writes_line ON twin_writes(line_id, at);
CREATE TRIGGER twin_writes_append_only BEFORE UPDATE ON twin_writes
BEGIN
    SELECT RAISE(ABORT, 'twin_writes: the write history is append-only');
END;
CREATE TRIGGER twin_writes_no_delete BEFORE DELETE ON twin_writes
BEGIN
    SELECT RAISE(ABORT, 'twin_writes: the write history is append-only');
END;

-- Shadow evidence: a model's predictions compared with what the line did on
-- a run that ended after the model was made. One row per model and run.
CREATE TABLE twin_shadow (
    model_id      TEXT NOT NULL,
    run_id        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    steps         INTEGER NOT NULL,
    nrmse         REAL,
    coverage      REAL,
    evidence_json TEXT NOT NULL,
    PRIMARY KEY (model_id, run_id)
);

-- Twin gate evaluations (eval.TwinGate over measured inputs).
CREATE TABLE twin_gate_evals (
    gate_eval_id TEXT PRIMARY KEY,
    model_id     TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    created_by   TEXT NOT NULL DEFAULT '',
    passed       INTEGER NOT NULL CHECK (passed IN (0, 1)),
    tuning_mode  TEXT NOT NULL DEFAULT '',
    report_json  TEXT NOT NULL
);
CREATE INDEX twin_gate_evals_model ON twin_gate_evals(model_id, created_at);

-- Recalibration requests (upstream twin_update_runs). At most one request
-- per dedup key is queued, running or cooling down: the partial unique
-- index refuses a second one even under races.
CREATE TABLE twin_calibrations (
    request_id     TEXT PRIMARY KEY,
    dedup_key      TEXT NOT NULL,
    scene_id       TEXT NOT NULL,
    line_id        TEXT NOT NULL,
    recipe_id      TEXT NOT NULL DEFAULT '',
    model_id       TEXT NOT NULL DEFAULT '',
    state          TEXT NOT NULL CHECK (state IN ('queued', 'running', 'cooldown', 'done', 'failed')),
    reason         TEXT NOT NULL DEFAULT '',
    signals_json   TEXT NOT NULL DEFAULT '{}',
    policy_json    TEXT NOT NULL DEFAULT '{}',
    dataset_id     TEXT NOT NULL DEFAULT '',
    job_id         TEXT NOT NULL DEFAULT '',
    new_model_id   TEXT NOT NULL DEFAULT '',  -- the candidate the job registered
    error          TEXT NOT NULL DEFAULT '',
    created_by     TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    started_at     INTEGER,
    completed_at   INTEGER,
    cooldown_until INTEGER
);
CREATE UNIQUE INDEX twin_calibrations_active ON twin_calibrations(dedup_key) WHERE state IN ('queued', 'running', 'cooldown');
CREATE INDEX twin_calibrations_state ON twin_calibrations(state, created_at);
