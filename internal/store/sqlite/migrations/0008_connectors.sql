-- 0008: live connector status (package internal/connect, status.go). Each
-- running connector (aml connect opcua|mqtt, aml demo --live) upserts its
-- row every few seconds and on every state change, so another process
-- (aml serve: API, UI, event stream) can show it. A row whose updated_at
-- is older than three of its own interval_ms is stale: the process that
-- wrote it stopped without saying so. Times are epoch milliseconds.
CREATE TABLE connector_status (
    connector_id   TEXT NOT NULL CHECK (connector_id <> ''),   -- "opcua:URL", "mqtt:URL"
    line_id        TEXT NOT NULL CHECK (line_id <> ''),
    kind           TEXT NOT NULL CHECK (kind IN ('opcua','mqtt')),
    endpoint       TEXT NOT NULL,                              -- OPC UA endpoint or MQTT broker URL
    state          TEXT NOT NULL CHECK (state IN ('idle','connecting','connected','reconnecting','stopped','failed')),
    run_id         TEXT NOT NULL DEFAULT '',
    received       INTEGER NOT NULL DEFAULT 0,
    stored         INTEGER NOT NULL DEFAULT 0,
    malformed      INTEGER NOT NULL DEFAULT 0,
    gaps           INTEGER NOT NULL DEFAULT 0,
    connects       INTEGER NOT NULL DEFAULT 0,
    last_sample_ms INTEGER,                                    -- source time of the newest value, NULL before the first
    last_error     TEXT NOT NULL DEFAULT '',
    interval_ms    INTEGER NOT NULL CHECK (interval_ms > 0),   -- the reporting period
    host           TEXT NOT NULL DEFAULT '',
    pid            INTEGER NOT NULL DEFAULT 0,
    started_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (connector_id, line_id)
);
CREATE INDEX connector_status_line ON connector_status(line_id);
