-- 0014: sample times in epoch microseconds (they were epoch milliseconds),
-- so that records sampled faster than 1 kHz or at a period that is not a
-- whole number of milliseconds keep every sample. The table is rebuilt
-- with the same layout (hypertable with weekly chunks under TimescaleDB,
-- else monthly range partitions, each existing month's partition made
-- again with its bounds in µs) and the rows copied across; an in-place
-- UPDATE of the key would collide and move rows between partitions. The
-- context spans move with it. Run windows, events, audit and every other
-- time stay in epoch milliseconds.
DO $$
DECLARE
    r  record;
    lo bigint;
    hi bigint;
BEGIN
    ALTER INDEX samples_ts_brin RENAME TO samples_ms_ts_brin;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'timescaledb') THEN
        ALTER TABLE samples RENAME TO samples_ms;
        CREATE TABLE samples (
            node  bigint NOT NULL,
            ts    bigint NOT NULL,
            value double precision NOT NULL,
            state text,
            ctx   bigint NOT NULL,
            PRIMARY KEY (node, ts)
        );
        EXECUTE 'SELECT create_hypertable(''samples'', ''ts'', chunk_time_interval => 604800000000::bigint)';
    ELSE
        FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'samples'::regclass LOOP
            EXECUTE format('ALTER TABLE %I RENAME TO %I', r.relname, 'ms_' || r.relname);
        END LOOP;
        ALTER TABLE samples RENAME TO samples_ms;
        CREATE TABLE samples (
            node  bigint NOT NULL,
            ts    bigint NOT NULL,
            value double precision NOT NULL,
            state text,
            ctx   bigint NOT NULL,
            PRIMARY KEY (node, ts)
        ) PARTITION BY RANGE (ts);
        CREATE TABLE samples_default PARTITION OF samples DEFAULT;
        FOR r IN SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'samples_ms'::regclass LOOP
            IF r.bound LIKE 'FOR VALUES FROM%' THEN
                lo := substring(r.bound FROM 'FROM \(''?(-?[0-9]+)''?\)')::bigint;
                hi := substring(r.bound FROM 'TO \(''?(-?[0-9]+)''?\)')::bigint;
                EXECUTE format('CREATE TABLE %I PARTITION OF samples FOR VALUES FROM (%s) TO (%s)',
                    substr(r.relname, 4), lo * 1000, hi * 1000);
            END IF;
        END LOOP;
    END IF;
    INSERT INTO samples (node, ts, value, state, ctx) SELECT node, ts * 1000, value, state, ctx FROM samples_ms;
    DROP TABLE samples_ms CASCADE;
END
$$;
CREATE INDEX samples_ts_brin ON samples USING brin (ts);
UPDATE sample_ctx SET min_ts = min_ts * 1000, max_ts = max_ts * 1000 + 999;
