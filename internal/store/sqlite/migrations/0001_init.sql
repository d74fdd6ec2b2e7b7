-- 0001: metadata (lines, products, recipes, nodes, runs, context segments)
-- and the time-series tables.

CREATE TABLE lines (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE TABLE products (
    id         TEXT PRIMARY KEY,
    line_id    TEXT NOT NULL REFERENCES lines(id),
    name       TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE TABLE recipes (
    id         TEXT PRIMARY KEY,
    line_id    TEXT NOT NULL REFERENCES lines(id),
    product_id TEXT NOT NULL REFERENCES products(id),
    name       TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE TABLE recipe_versions (
    recipe_id    TEXT NOT NULL REFERENCES recipes(id),
    version      INTEGER NOT NULL CHECK (version >= 1),
    params       TEXT NOT NULL,
    content_hash TEXT NOT NULL CHECK (length(content_hash) = 64),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (recipe_id, version)
);
CREATE UNIQUE INDEX recipe_versions_hash ON recipe_versions(recipe_id, content_hash);

-- pk is the compact key the samples table uses; id is the public node id.
CREATE TABLE nodes (
    pk         INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE CHECK (id <> ''),
    line_id    TEXT NOT NULL DEFAULT '',
    unit       TEXT NOT NULL DEFAULT '',
    min        REAL,
    max        REAL,
    kind       TEXT NOT NULL CHECK (kind IN ('daq', 'dcw')),
    meaning    TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE TABLE runs (
    id             TEXT PRIMARY KEY CHECK (id <> ''),
    line_id        TEXT NOT NULL REFERENCES lines(id),
    product_id     TEXT NOT NULL REFERENCES products(id),
    recipe_id      TEXT NOT NULL REFERENCES recipes(id),
    recipe_version INTEGER,
    started_ms     INTEGER NOT NULL,
    ended_ms       INTEGER CHECK (ended_ms IS NULL OR ended_ms >= started_ms),
    status         TEXT NOT NULL CHECK (status IN ('active', 'ended', 'aborted')),
    created_at     INTEGER NOT NULL
);
CREATE INDEX runs_context ON runs(line_id, product_id, recipe_id, started_ms);

CREATE TABLE context_segments (
    id             INTEGER PRIMARY KEY,
    run_id         TEXT NOT NULL REFERENCES runs(id),
    recipe_id      TEXT NOT NULL REFERENCES recipes(id),
    recipe_version INTEGER NOT NULL,
    content_hash   TEXT NOT NULL,
    from_ms        INTEGER NOT NULL,
    to_ms          INTEGER,
    confirmed_by   TEXT NOT NULL CHECK (confirmed_by <> ''),
    confirmed_at   INTEGER NOT NULL,
    FOREIGN KEY (recipe_id, recipe_version) REFERENCES recipe_versions(recipe_id, version)
);
CREATE INDEX context_segments_run ON context_segments(run_id);

-- Each distinct (line, product, recipe, run) tuple samples were taken in.
-- Samples reference it by pk so a row stays small. min_ts/max_ts bound the
-- timestamps ever written in the context (an over-approximation once samples
-- are replaced); context-filtered queries use them to narrow range scans.
CREATE TABLE sample_ctx (
    pk      INTEGER PRIMARY KEY,
    line    TEXT NOT NULL,
    product TEXT NOT NULL,
    recipe  TEXT NOT NULL,
    run     TEXT NOT NULL,
    min_ts  INTEGER,
    max_ts  INTEGER,
    UNIQUE (line, product, recipe, run)
);

-- One row per node and millisecond: writing the same (node, ts) again
-- replaces the row, which makes re-ingest idempotent. state is NULL for 'ok'.
CREATE TABLE samples (
    node  INTEGER NOT NULL,
    ts    INTEGER NOT NULL,
    value REAL NOT NULL,
    state TEXT,
    ctx   INTEGER NOT NULL,
    PRIMARY KEY (node, ts)
) WITHOUT ROWID;
