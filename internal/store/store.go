// Package store names what a back-end offers the rest of AML. The
// back-ends live in its subpackages: sqlite (embedded, the default) and
// postgres (scale-out), each keeping only its opening, migrations and
// samples (time series); sqldb (the shared SQL handle and its dialects),
// records (metadata, datasets, jobs, models) and twinstore (the twin
// records) hold the code both share, and storetest the conformance suite
// both pass.
//
// Code that needs only samples, datasets and jobs takes a core.Store; code
// that also needs the twin records or the shared SQL handle (audit log,
// tokens, connector status) takes a Store.
package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is a complete back-end: core.Store, the twin records, the SQL
// handle of the stores shared between back-ends, and the back-end's
// capabilities.
type Store interface {
	core.Store
	twinstore.Records
	SQL() *sqldb.DB

	// The capabilities, declared by every back-end rather than guessed
	// from its type: where dataset and model files are shared
	// (artifact.Provider; nil on SQLite), which database the job queue
	// lives in (QueueDB, jobs.QueueHost: SQLite's writer pool or the
	// PostgreSQL pool), and how events reach the other processes on the
	// database (events.Relayer; nothing to do on SQLite).
	artifact.Provider
	events.Relayer
	QueueDB() (sqlite *sql.DB, postgres *pgxpool.Pool)

	// SchemaVersion is the newest applied migration.
	SchemaVersion(ctx context.Context) (int, error)
	// Location names the database for people: the SQLite file, or the
	// PostgreSQL URL without its password.
	Location() string
	// ApplyNodes creates or updates every node of nodes in one
	// transaction with one audit entry (action "line.apply" by actor): all
	// of them or none. A node of another line is AML_CONFLICT.
	ApplyNodes(ctx context.Context, actor, line string, nodes []core.Node) error
	// RecordRunEvent records a plant's batch record of one run (recipe
	// version, end, a confirmed context segment) in one audited
	// transaction.
	RecordRunEvent(ctx context.Context, actor string, ev core.RunEvent) (core.Run, core.ContextSegment, error)
	// Retention (internal/retention) pages through old jobs and models.
	ListEndedJobsBefore(ctx context.Context, before time.Time, afterEnded int64, afterID string, limit int) ([]core.Job, error)
	ListRetiredModelsBefore(ctx context.Context, before time.Time) ([]core.Model, error)
}
