package main

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/store/postgres"
)

// CodeUnsupportedBackend refuses a command that does not run on the
// selected storage back-end yet (a SQLite-only command given --db
// postgres://...).
const CodeUnsupportedBackend = "AML_UNSUPPORTED_BACKEND"

// The storage back-end is chosen by --db (env AML_DB): empty for the
// embedded SQLite file in --data (the default, unchanged), or a
// postgres:// URL. Commands that run on both call openBackend and use only
// the core ports; commands that still need SQLite call openStore, which
// refuses with AML_UNSUPPORTED_BACKEND when --db names PostgreSQL, so a
// command is never silently run against the wrong database.

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

func unsupportedOnPostgres() error {
	return core.Errorf(CodeUnsupportedBackend, "this command does not run on PostgreSQL yet (--db/AML_DB); it needs the embedded SQLite store: omit --db")
}

// openBackend opens the selected store: PostgreSQL for --db postgres://...,
// else the SQLite store in --data (the same handle openStore returns).
func (a *app) openBackend() (core.Store, error) {
	if !a.usesPostgres() {
		return a.openStore()
	}
	if a.pg != nil {
		return a.pg, nil
	}
	s, err := postgres.Open(a.context(), a.dbURL)
	if err != nil {
		return nil, err
	}
	a.pg = s
	return s, nil
}

// artifacts returns the shared artifact store for PostgreSQL (datasets
// and models in the database, materialised under --data), or nil for
// SQLite, where the files in --data are the truth.
func (a *app) artifacts() (artifact.Store, error) {
	if !a.usesPostgres() {
		return nil, nil
	}
	if a.arts != nil {
		return a.arts, nil
	}
	if _, err := a.openBackend(); err != nil {
		return nil, err
	}
	s, err := artifact.NewPostgres(a.context(), a.pg.Pool(), a.dataDir)
	if err != nil {
		return nil, err
	}
	a.arts = s
	return s, nil
}

// shareDataset puts a freshly built dataset's files into the shared
// artifact store (PostgreSQL), so a worker on another machine can fetch
// it. If that fails the dataset is unregistered again: a registered
// dataset is always fetchable. No-op for SQLite (arts nil).
func shareDataset(ctx context.Context, st core.Datasets, arts artifact.Store, dataDir string, d core.Dataset) error {
	if arts == nil {
		return nil
	}
	if _, err := arts.Put(context.WithoutCancel(ctx), d.Path, filepath.Join(dataDir, filepath.FromSlash(d.Path))); err != nil {
		if derr := dataset.Delete(context.WithoutCancel(ctx), st, dataDir, d.ID); derr != nil {
			return core.Wrap(core.CodeOf(err), err, "share dataset %s (and unregistering it failed: %v)", d.ID, derr)
		}
		return err
	}
	return nil
}
