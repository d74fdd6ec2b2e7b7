package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/migration"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one embedded schema step (shared layout: internal/store/migration).
type Migration = migration.Migration

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) { return migration.Load(migrationFS, "migrations") }

// SchemaVersion reports the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v)
	return int(v.Int64), err
}

func migrate(ctx context.Context, db *sql.DB, ms []Migration) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		checksum   TEXT NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "create schema_migrations")
	}
	applied := map[int]string{}
	rows, err := db.QueryContext(ctx, `SELECT version, checksum FROM schema_migrations`)
	if err != nil {
		return core.Wrap(core.CodeStoreUnavailable, err, "read schema_migrations")
	}
	maxApplied := 0
	for rows.Next() {
		var v int
		var c string
		if err := rows.Scan(&v, &c); err != nil {
			rows.Close()
			return err
		}
		applied[v] = c
		maxApplied = max(maxApplied, v)
	}
	rows.Close()
	if maxApplied > len(ms) {
		return core.Errorf(core.CodeSchemaTooNew,
			"the database schema is at version %d but this aml binary knows versions up to %d; use a newer aml (refusing to touch the data)", maxApplied, len(ms))
	}
	for _, m := range ms {
		if c, ok := applied[m.Version]; ok {
			if c != m.Checksum {
				return core.Errorf(core.CodeSchemaMismatch,
					"migration %04d_%s was applied with a different checksum (%.12s, binary has %.12s): this database was made by a different build", m.Version, m.Name, c, m.Checksum)
			}
			continue
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return core.Wrap(core.CodeStoreUnavailable, err, "begin migration %d", m.Version)
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			tx.Rollback()
			return core.Wrap(core.CodeInternal, err, "apply migration %04d_%s", m.Version, m.Name)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, name, checksum, applied_at) VALUES (?,?,?,?)`,
			m.Version, m.Name, m.Checksum, time.Now().UnixMilli()); err != nil {
			tx.Rollback()
			return core.Wrap(core.CodeInternal, err, "record migration %d", m.Version)
		}
		if err := tx.Commit(); err != nil {
			return core.Wrap(core.CodeStoreUnavailable, err, "commit migration %d", m.Version)
		}
	}
	return nil
}
