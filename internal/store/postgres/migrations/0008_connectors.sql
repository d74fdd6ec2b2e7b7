-- 0008: live connector status (same table and columns as SQLite's 0008;
-- rules in internal/connect/status.go). Times are epoch milliseconds.
CREATE TABLE connector_status (
    connector_id   text NOT NULL CHECK (connector_id <> ''),
    line_id        text NOT NULL CHECK (line_id <> ''),
    kind           text NOT NULL CHECK (kind IN ('opcua','mqtt')),
    endpoint       text NOT NULL,
    state          text NOT NULL CHECK (state IN ('idle','connecting','connected','reconnecting','stopped','failed')),
    run_id         text NOT NULL DEFAULT '',
    received       bigint NOT NULL DEFAULT 0,
    stored         bigint NOT NULL DEFAULT 0,
    malformed      bigint NOT NULL DEFAULT 0,
    gaps           bigint NOT NULL DEFAULT 0,
    connects       bigint NOT NULL DEFAULT 0,
    last_sample_ms bigint,
    last_error     text NOT NULL DEFAULT '',
    interval_ms    bigint NOT NULL CHECK (interval_ms > 0),
    host           text NOT NULL DEFAULT '',
    pid            bigint NOT NULL DEFAULT 0,
    started_at     bigint NOT NULL,
    updated_at     bigint NOT NULL,
    PRIMARY KEY (connector_id, line_id)
);
CREATE INDEX connector_status_line ON connector_status(line_id);
