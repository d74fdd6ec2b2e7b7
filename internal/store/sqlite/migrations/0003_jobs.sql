-- 0003: training jobs (one job = one experiment) and the model registry.
CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    dataset_id       TEXT NOT NULL REFERENCES datasets(id),
    dataset_sha256   TEXT NOT NULL,
    trainer_ref      TEXT NOT NULL,
    params_json      TEXT NOT NULL DEFAULT '{}',
    seed             INTEGER NOT NULL DEFAULT 0,
    parent_id        TEXT NOT NULL DEFAULT '',
    change_note      TEXT NOT NULL DEFAULT '',
    env_name         TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL CHECK (status IN ('queued','provisioning','training','evaluating','done','failed','cancelled','timeout','interrupted')),
    stage            TEXT NOT NULL DEFAULT '',
    progress         REAL NOT NULL DEFAULT 0 CHECK (progress >= 0 AND progress <= 1),
    metrics_json     TEXT,
    gates_json       TEXT,
    gate_passed      INTEGER NOT NULL DEFAULT 0,
    artifacts_path   TEXT NOT NULL DEFAULT '',
    model_id         TEXT,
    error_code       TEXT NOT NULL DEFAULT '',
    error            TEXT NOT NULL DEFAULT '',
    attempt          INTEGER NOT NULL DEFAULT 0,
    retry_count      INTEGER NOT NULL DEFAULT 0,
    max_retries      INTEGER NOT NULL DEFAULT 2 CHECK (max_retries BETWEEN 0 AND 2),
    timeout_sec      INTEGER NOT NULL DEFAULT 1800,
    stall_sec        INTEGER NOT NULL DEFAULT 600,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    worker           TEXT NOT NULL DEFAULT '',
    heartbeat_at     INTEGER,
    last_progress_at INTEGER,
    created_by       TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    ended_at         INTEGER,
    -- done always carries its model; a terminal always has an end time.
    CHECK (status <> 'done' OR model_id IS NOT NULL),
    CHECK (status NOT IN ('done','failed','cancelled','timeout','interrupted') OR ended_at IS NOT NULL)
);
CREATE INDEX jobs_status ON jobs(status, created_at);
CREATE INDEX jobs_dataset ON jobs(dataset_id);

CREATE TABLE models (
    id                TEXT PRIMARY KEY,
    job_id            TEXT NOT NULL,
    dataset_id        TEXT NOT NULL REFERENCES datasets(id),
    line_id           TEXT NOT NULL,
    product_id        TEXT NOT NULL,
    recipe_id         TEXT NOT NULL,
    purpose           TEXT NOT NULL,
    objective_id      TEXT NOT NULL DEFAULT '',
    trainer_ref       TEXT NOT NULL,
    stage             TEXT NOT NULL CHECK (stage IN ('candidate','shadow','production','retired')),
    artifact_kind     TEXT NOT NULL,
    schema_version    INTEGER NOT NULL DEFAULT 1,
    model_interface   TEXT NOT NULL DEFAULT '',
    artifact_path     TEXT NOT NULL,
    artifact_hash     TEXT NOT NULL CHECK (length(artifact_hash) = 64),
    artifacts_pruned  INTEGER NOT NULL DEFAULT 0,
    legacy            TEXT NOT NULL DEFAULT '',
    lineage_verified  INTEGER NOT NULL DEFAULT 0,
    twin              INTEGER NOT NULL DEFAULT 0,
    gate_passed       INTEGER NOT NULL DEFAULT 0,
    metrics_json      TEXT,
    gates_json        TEXT,
    created_at        INTEGER NOT NULL,
    stage_changed_at  INTEGER NOT NULL,
    stage_changed_by  TEXT NOT NULL DEFAULT ''
);
-- Exactly one production model per (line, product, recipe, purpose, objective).
CREATE UNIQUE INDEX models_one_production ON models(line_id, product_id, recipe_id, purpose, objective_id) WHERE stage = 'production';
CREATE INDEX models_context ON models(line_id, product_id, recipe_id, purpose, stage);

CREATE TABLE model_stage_history (
    id        INTEGER PRIMARY KEY,
    model_id  TEXT NOT NULL REFERENCES models(id),
    from_stage TEXT NOT NULL,
    to_stage  TEXT NOT NULL,
    by        TEXT NOT NULL,
    reason    TEXT NOT NULL DEFAULT '',
    at        INTEGER NOT NULL
);
CREATE INDEX model_stage_history_model ON model_stage_history(model_id, id);
