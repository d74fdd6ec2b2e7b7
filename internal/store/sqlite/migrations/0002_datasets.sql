-- 0002: dataset registry. A row is inserted only after the dataset's files
-- were completely written and renamed into place.
CREATE TABLE datasets (
    id               TEXT PRIMARY KEY,
    line_id          TEXT NOT NULL,
    product_id       TEXT NOT NULL,
    recipe_id        TEXT NOT NULL,
    purpose          TEXT NOT NULL,
    path             TEXT NOT NULL UNIQUE,
    sha256           TEXT NOT NULL CHECK (length(sha256) = 64),
    spec_json        TEXT NOT NULL,
    train_windows    INTEGER NOT NULL,
    val_windows      INTEGER NOT NULL,
    test_windows     INTEGER NOT NULL,
    runs             INTEGER NOT NULL,
    bytes            INTEGER NOT NULL,
    lineage_verified INTEGER NOT NULL CHECK (lineage_verified IN (0, 1)),
    note             TEXT NOT NULL DEFAULT '',
    created_by       TEXT NOT NULL,
    created_at       INTEGER NOT NULL
);
CREATE INDEX datasets_context ON datasets(line_id, product_id, recipe_id, created_at);

-- What uses a dataset (jobs, models). A referenced dataset cannot be deleted.
CREATE TABLE dataset_refs (
    dataset_id TEXT NOT NULL REFERENCES datasets(id),
    kind       TEXT NOT NULL,
    ref_id     TEXT NOT NULL,
    PRIMARY KEY (dataset_id, kind, ref_id)
);
