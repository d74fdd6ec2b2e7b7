-- 0014: sample times in epoch microseconds (they were epoch milliseconds),
-- so that records sampled faster than 1 kHz or at a period that is not a
-- whole number of milliseconds keep every sample. The table is rebuilt
-- (an in-place UPDATE of the primary key could collide with rows not yet
-- moved); the context spans move with it. Run windows, events, audit and
-- every other time stay in epoch milliseconds.
CREATE TABLE samples_us (
    node  INTEGER NOT NULL,
    ts    INTEGER NOT NULL,
    value REAL NOT NULL,
    state TEXT,
    ctx   INTEGER NOT NULL,
    PRIMARY KEY (node, ts)
) WITHOUT ROWID;
INSERT INTO samples_us (node, ts, value, state, ctx) SELECT node, ts * 1000, value, state, ctx FROM samples;
DROP TABLE samples;
ALTER TABLE samples_us RENAME TO samples;
UPDATE sample_ctx SET min_ts = min_ts * 1000, max_ts = max_ts * 1000 + 999;
