package sqlite

import (
	"context"
	"database/sql"
	"log/slog"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/events"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The back-end's capabilities (internal/store.Store): what the embedded
// store offers besides its records, the same three questions PostgreSQL
// answers in its own way.

// Artifacts is the artifact capability (artifact.Provider): none — on one
// machine the files under the data directory are the truth.
func (s *Store) Artifacts(context.Context, string) (artifact.Store, error) { return nil, nil }

// QueueDB is the job-queue capability (jobs.QueueHost): River runs on the
// single writer connection, so River and AML never fight over SQLite's
// lock. There is no PostgreSQL pool (the second result is always nil).
func (s *Store) QueueDB() (*sql.DB, *pgxpool.Pool) { return s.w, nil }

// RelayEvents is the event capability (events.Relayer): nothing to relay —
// the process that serves the file runs the jobs its clients watch.
func (s *Store) RelayEvents(context.Context, *events.Bus, *slog.Logger) error { return nil }
