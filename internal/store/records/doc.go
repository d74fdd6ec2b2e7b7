// Package records is the one implementation, on both back-ends, of the
// records every command shares: the metadata (lines, products, recipes and
// their versions, nodes, runs, context segments: core.Meta), the dataset
// registry (core.Datasets), jobs and the model registry (core.Jobs), and the
// listings retention pages through. sqlite.Store and postgres.Store embed a
// *Core over their internal/store/sqldb handle, as they embed twinstore's
// Store, so its methods are the back-end's. What stays in a back-end is
// opening, migrations and the samples (core.TimeSeries), whose paths
// genuinely differ: SQLite's prepared multi-row inserts and paged reads,
// PostgreSQL's binary COPY and monthly partitions.
//
// The statements are written once, with SQLite's placeholders, over tables
// that have the same columns on both back-ends (migrations 0001–0003,
// checked by postgres.TestSchemaParity): flags are integers 0/1, times
// epoch milliseconds, JSON is text, so one scan serves both. Where the
// back-ends differ the Dialect says so, and nowhere else:
//
//   - concurrency. On SQLite one writer connection serialises every write
//     transaction. On PostgreSQL many workers write at once, so these
//     transactions take no store-wide lock (sqldb.BeginConcurrent): every
//     state change is one compare-and-set UPDATE … WHERE status=from (under
//     READ COMMITTED a second updater of the row waits for the first and
//     re-checks the WHERE clause, so exactly one of two racing transitions
//     wins), and the few read-then-write transactions lock what they read:
//     the recipe row while numbering its versions and the dataset row while
//     deleting it (Dialect.RowLock, "FOR UPDATE"), a named advisory lock
//     around the job-limit count (Tx.LockName), and the partial unique
//     index for "one production model". The claim, heartbeat and progress
//     statements are the ones PostgreSQL ran before this package existed;
//   - prepared statements: the hot single-row statements (claims,
//     transitions, heartbeats, reads of one job or dataset) go through
//     sqldb's Fast* methods: on SQLite statements prepared once per pool,
//     on PostgreSQL pgx's pool directly, as before this package existed.
//
// Ingest runs inside a back-end's own transaction (PostgreSQL's is a pgx
// transaction, for COPY). EnsureNode and EnsureRun take a Conn, so the
// nodes and runs that samples create follow these rules too.
package records
