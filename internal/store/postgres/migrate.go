package postgres

import (
	"context"
	"embed"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/migration"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one embedded schema step (shared layout: internal/store/migration).
type Migration = migration.Migration

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) { return migration.Load(migrationFS, "migrations") }

// SchemaVersion reports the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v *int
	err := s.pool.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v)
	if err != nil || v == nil {
		return 0, dbErr(err, "read schema version")
	}
	return *v, nil
}

// migrateLock is the advisory lock key that serialises migrations of one
// database across processes (the text 'aml.migrate' hashed by PostgreSQL).
const migrateLock = `SELECT pg_advisory_xact_lock(hashtext('aml.migrate:' || current_schema()))`

// migrate applies pending migrations, each in its own transaction. Every
// transaction takes the advisory lock first and re-reads what is applied,
// so processes opening the database together apply each step once. A
// database that already has every step, with the same checksums and none
// newer, is recognised by one query (upToDate) and left alone: every
// command opens the store, and the per-step check costs five round trips
// a step.
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []Migration) error {
	if upToDate(ctx, pool, ms) {
		return nil
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		checksum   text NOT NULL,
		applied_at bigint NOT NULL)`); err != nil && !isUnique(err) && pgCode(err) != "42710" && pgCode(err) != "42P07" {
		// Two processes creating the table at once: the loser gets a
		// unique violation on the catalog or "type/relation already
		// exists" (42710, 42P07), and the table exists either way.
		return dbErr(err, "create schema_migrations")
	}
	for _, m := range ms {
		if err := applyOne(ctx, pool, m, len(ms)); err != nil {
			return err
		}
	}
	return nil
}

// applyOne applies migration m in its own transaction unless it is already
// recorded (with the same checksum) in schema_migrations.
func applyOne(ctx context.Context, pool *pgxpool.Pool, m Migration, known int) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return dbErr(err, "begin migration %d", m.Version)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, migrateLock); err != nil {
		return dbErr(err, "lock migrations")
	}
	var maxApplied *int
	if err := tx.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&maxApplied); err != nil {
		return dbErr(err, "read schema_migrations")
	}
	if maxApplied != nil && *maxApplied > known {
		return core.Errorf(core.CodeSchemaTooNew,
			"the database schema is at version %d but this aml binary knows versions up to %d; use a newer aml (refusing to touch the data)", *maxApplied, known)
	}
	var sum string
	err = tx.QueryRow(ctx, `SELECT checksum FROM schema_migrations WHERE version=$1`, m.Version).Scan(&sum)
	if err == nil {
		if sum != m.Checksum {
			return core.Errorf(core.CodeSchemaMismatch,
				"migration %04d_%s was applied with a different checksum (%.12s, binary has %.12s): this database was made by a different build", m.Version, m.Name, sum, m.Checksum)
		}
		return nil
	}
	if !noRows(err) {
		return dbErr(err, "read schema_migrations")
	}
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return core.Wrap(core.CodeInternal, err, "apply migration %04d_%s", m.Version, m.Name)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations(version, name, checksum, applied_at) VALUES ($1,$2,$3,$4)`,
		m.Version, m.Name, m.Checksum, time.Now().UnixMilli()); err != nil {
		return dbErr(err, "record migration %d", m.Version)
	}
	if err := tx.Commit(ctx); err != nil {
		return dbErr(err, "commit migration %d", m.Version)
	}
	return nil
}

// upToDate reports whether schema_migrations records exactly the steps of
// ms with their checksums. Anything else — no table yet, a step missing,
// another checksum, a newer step, an error — is false, and migrate's
// step-by-step path, under the lock, applies or refuses as it always did.
func upToDate(ctx context.Context, pool *pgxpool.Pool, ms []Migration) bool {
	rows, err := pool.Query(ctx, `SELECT version, checksum FROM schema_migrations ORDER BY version`)
	if err != nil {
		return false
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var v int
		var sum string
		if err := rows.Scan(&v, &sum); err != nil || i >= len(ms) || ms[i].Version != v || ms[i].Checksum != sum {
			return false
		}
		i++
	}
	return rows.Err() == nil && i == len(ms)
}
