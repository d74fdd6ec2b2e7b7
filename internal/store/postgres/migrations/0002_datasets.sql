-- 0002: dataset registry (same tables and columns as SQLite's 0002). A row
-- is inserted only after the dataset's files were completely written.
CREATE TABLE datasets (
    id               text PRIMARY KEY,
    line_id          text NOT NULL,
    product_id       text NOT NULL,
    recipe_id        text NOT NULL,
    purpose          text NOT NULL,
    path             text NOT NULL UNIQUE,
    sha256           text NOT NULL CHECK (length(sha256) = 64),
    spec_json        text NOT NULL,
    train_windows    integer NOT NULL,
    val_windows      integer NOT NULL,
    test_windows     integer NOT NULL,
    runs             integer NOT NULL,
    bytes            bigint NOT NULL,
    lineage_verified integer NOT NULL CHECK (lineage_verified IN (0, 1)),
    note             text NOT NULL DEFAULT '',
    created_by       text NOT NULL,
    created_at       bigint NOT NULL
);
CREATE INDEX datasets_context ON datasets(line_id, product_id, recipe_id, created_at);

-- What uses a dataset (jobs, models). A referenced dataset cannot be deleted.
CREATE TABLE dataset_refs (
    dataset_id text NOT NULL REFERENCES datasets(id),
    kind       text NOT NULL,
    ref_id     text NOT NULL,
    PRIMARY KEY (dataset_id, kind, ref_id)
);
