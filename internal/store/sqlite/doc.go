// Package sqlite is AML's embedded storage back-end: one SQLite file
// (aml.db) in the data directory, opened with the pure-Go driver
// modernc.org/sqlite so the binary stays CGO_ENABLED=0.
//
// It implements core.TimeSeries (samples) itself; the metadata, datasets,
// jobs and models (internal/store/records) and the twin records
// (internal/store/twinstore) are the code PostgreSQL runs too, over this
// file's connections (Store.SQL, with SQLite's sqldb.Dialect).
//
// Why it looks the way it does:
//
//   - WAL mode with two connection pools: a single writer connection whose
//     transactions start with BEGIN IMMEDIATE (so two writers queue on the
//     busy timeout instead of failing with SQLITE_BUSY half-way through), and
//     a pool of readers that never block on the writer.
//   - Samples live in a WITHOUT ROWID table keyed by (node pk, ts): a node's
//     series is one contiguous B-tree range, so per-node pages, latest and
//     bucket queries are range scans, and re-writing a (node, ts) replaces it.
//     Node ids and the (line, product, recipe, run) context are interned into
//     small integer keys to keep rows short.
//   - Inserts go through prepared multi-row INSERT statements (rowsPerStmt
//     rows each), which bench/ingest.sh compares against a plain one-row
//     prepared insert loop on the same settings.
//   - Pages of samples (the dataset build's read) are read on a pooled
//     reader connection (readDB's AppendPoints, via sql.Conn.Raw) through
//     an aggregate registered with the driver, aml_points(sink, ts, value,
//     state) over the page query: SQLite hands it every row inside one
//     statement step, so a page is one row through the driver. Row by row,
//     every sqlite3_column_* call takes and releases the connection's
//     mutex (emulated with atomics by modernc's libc) and the driver boxes
//     each value; database/sql adds its locks and Scan conversions on top
//     (bench/RESULTS.md: BenchmarkQueryPage beside BenchmarkQueryPageRows
//     and BenchmarkQueryPageDatabaseSQL). Should the rows ever reach the
//     aggregate out of ts order, the page is read again row by row.
//   - Migrations are embedded SQL files applied at open, each in its own
//     transaction and recorded with a checksum in schema_migrations. A
//     database written by a newer binary (a version this one does not know)
//     is refused with AML_SCHEMA_TOO_NEW; an applied migration whose
//     checksum differs from the embedded file is refused with
//     AML_SCHEMA_MISMATCH.
package sqlite
