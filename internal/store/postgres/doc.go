// Package postgres is AML's PostgreSQL storage back-end for plants that
// outgrow one SQLite file: many lines, many processes, many machines on one
// database. It implements the same ports as internal/store/sqlite —
// core.Meta, core.TimeSeries, core.Datasets and core.Jobs — with the same
// error codes and conflict rules; internal/store/storetest runs one
// conformance suite against both. Only the samples (core.TimeSeries) are
// this package's own code: the metadata, datasets, jobs and models
// (internal/store/records), the audit log, API tokens, connector status and
// the twin records (internal/store/twinstore) are not written twice: one Go
// implementation runs on both back-ends through internal/store/sqldb, which
// this package opens over the same pool (Store.SQL) with PostgreSQL's
// dialect — "$N" placeholders, an advisory lock that serialises the twin
// and audit stores' write transactions across processes as SQLite's single
// writer does, and row and named locks where the records' concurrent
// transactions read before they write. Store therefore satisfies
// internal/store.Store, everything a command or `aml serve` needs.
//
// Opened by Open(ctx, "postgres://user@host:port/db?sslmode=disable"); any
// extra URL parameter is a session setting, so ?search_path=plant7 keeps a
// plant's tables in their own schema (the tests give every test a schema).
// The CLI selects it with `--db postgres://...` (or AML_DB) for every
// command (cmd/aml/backend.go). What a PostgreSQL database offers beyond
// the records it declares as the capabilities of internal/store.Store
// (capabilities in store.go): the job queue runs River on the same pool
// (QueueDB, for internal/jobs' queue_pg.go), dataset and model files go to
// internal/artifact's PostgreSQL store (Artifacts), fetched into the local
// data directory when a command needs them, and events reach the other
// processes with LISTEN/NOTIFY (RelayEvents, internal/events/pgrelay).
// docs/postgres.md is the operator's view.
//
// Why it looks the way it does:
//
//   - One pgx connection pool (pgxpool), and a database/sql view of it for
//     the shared stores (internal/store/sqldb). PostgreSQL does its own
//     locking, so unlike SQLite there is no single writer connection; the
//     places where SQLite relied on its one writer for atomicity of a
//     read-then-write take explicit locks instead (FOR UPDATE on the recipe
//     when numbering versions, an advisory lock around the job-limit check,
//     the partial unique index for "one production model": the Dialect's
//     RowLock and NamedLockSQL, used by internal/store/records).
//   - Samples use the same layout as SQLite's — (node pk, ts) key, interned
//     (line, product, recipe, run) context — in a table range-partitioned
//     by ts, one partition per UTC calendar month created on demand, plus a
//     default partition. Partitions are created in their own short
//     transaction before the rows are written, so a long ingest does not
//     hold DDL locks; if that fails (lock timeout), the rows go to the
//     default partition and are moved out when the month's partition is
//     made later. A BRIN index on ts serves time-range scans; the primary
//     key is the (node, ts) B-tree. With the TimescaleDB extension
//     installed the table is a hypertable instead (detected in the
//     migration; no partitions are then made here).
//   - Bulk ingest keys, orders and de-duplicates each batch in Go, then
//     streams it with COPY: straight into samples when no stored sample
//     lies in the batch's time range of any of its nodes (new data, the
//     common case), else into a per-connection temporary staging table
//     and upserts from there in one statement: re-writing a (node, ts) of
//     the same context replaces it; a sample of another context at an
//     occupied instant is AML_CONFLICT, as in SQLite. A new-data batch
//     within one month goes straight into that month's partition (no
//     per-row routing through samples; the partition's bound still checks
//     every row, and a refused or missing partition falls back to samples);
//     the overlap check, the batch's savepoint and the release of the
//     previous one travel as one pipelined round trip. A batch is held as
//     24-byte keyed rows (sampleRow: time, value, the index of its node
//     and of its context and state), not as the caller's 112-byte
//     samples. CSV ingest hands the transaction's Append the parser's
//     small batches (1 024 samples, reused), which it validates and keys
//     at once — a month without its partition has it started then, on
//     another connection, while the parse goes on — and gathers up to
//     262 144 rows (≈ 7 MiB) before writing them as Write writes one
//     batch, so a file of up to that many samples costs a handful of
//     round trips and goes in as one COPY in (node, ts) order, each
//     node's rows appended at the right edge of the key in a month that
//     holds no later keys (bench/pg_copy.sh compares it with psql's
//     \copy); the gathered rows of a longer file are written in COPYs
//     of that size which run on while the parse goes on (as WriteAhead's);
//     WriteAhead (ahead.go), for a caller that writes many batches itself,
//     runs a batch's COPY on the connection while the next batch is keyed
//     and encoded, its errors reported by the next statement or the commit;
//     the stream's node checks read a batch's
//     nodes in one statement inside the transaction (GetNodes), not
//     through the pool, whose second connection may still be starting
//     (Open dials it beside the first). The COPY rows are
//     PostgreSQL's binary format written by hand (copybin.go says why:
//     pgx's generic CopyFrom boxes every value; BenchmarkWriteSamples and
//     bench/RESULTS.md show the difference).
//   - Migrations are embedded SQL files with the same version numbers as
//     SQLite's (TestSchemaParity compares tables and columns after
//     migrating both), applied under an advisory lock so that several
//     processes opening one database at once migrate it exactly once.
//     AML_SCHEMA_TOO_NEW and AML_SCHEMA_MISMATCH mean what they mean for
//     SQLite.
package postgres
