package main

import (
	"context"
	"strings"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
)

// The storage back-end is chosen by --db (env AML_DB): empty for the
// embedded SQLite file in --data (the default), or a postgres:// URL. Every
// command runs on both: openStore returns the selected store, and what
// differs between the back-ends is asked of the store (its capabilities,
// internal/store.Store): on PostgreSQL, dataset and model files are shared
// through the database (Artifacts) and materialised under --data when a
// command needs them, and events are relayed between processes
// (RelayEvents).

// usesPostgres reports whether --db selects PostgreSQL.
func (a *app) usesPostgres() bool {
	return strings.HasPrefix(a.dbURL, "postgres://") || strings.HasPrefix(a.dbURL, "postgresql://")
}

// checkDB validates --db (called before any command runs).
func (a *app) checkDB() error {
	if a.dbURL != "" && !a.usesPostgres() {
		return usagef("--db %q: want a postgres:// URL (omit --db for the embedded SQLite store in --data)", redactURL(a.dbURL))
	}
	return nil
}

func redactURL(u string) string {
	if at := strings.LastIndexByte(u, '@'); at > 0 {
		if i := strings.Index(u, "://"); i > 0 && i < at {
			return u[:i+3] + "…" + u[at:]
		}
	}
	return u
}

// openBackend is openStore typed as the core ports (commands that need
// only samples, datasets and jobs).
func (a *app) openBackend() (core.Store, error) { return a.openStore() }

// artifacts returns the store's shared artifact store (datasets and models
// in the database on PostgreSQL, materialised under --data), or nil where
// the files in --data are the truth (SQLite).
func (a *app) artifacts() (artifact.Store, error) {
	if a.arts != nil {
		return a.arts, nil
	}
	st, err := a.openStore()
	if err != nil {
		return nil, err
	}
	s, err := st.Artifacts(a.context(), a.dataDir)
	if err != nil {
		return nil, err
	}
	a.arts = s
	return s, nil
}

// relayEvents carries the process's job, model and certificate events to
// and from the other processes on the same database (the store's
// RelayEvents: internal/events/pgrelay on PostgreSQL), so that `aml serve`
// shows the progress of jobs its workers on other machines run. No-op on
// SQLite: one process runs the jobs its clients watch (aml serve), or
// nobody watches (aml worker with the embedded store has no event stream).
func (a *app) relayEvents(ctx context.Context, bus *events.Bus) error {
	st, err := a.openStore()
	if err != nil {
		return err
	}
	return st.RelayEvents(ctx, bus, a.log)
}
