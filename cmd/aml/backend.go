package main

import (
	"github.com/aml-project/aml/internal/core"
)

// The storage back-end is chosen by --db (env AML_DB): empty for the
// embedded SQLite file in --data (the default), or a postgres:// URL. Every
// command runs on both: the process (internal/service) opens the selected
// store, and what differs between the back-ends is asked of the store (its
// capabilities, internal/store.Store): on PostgreSQL, dataset and model
// files are shared through the database (Artifacts) and materialised under
// --data when a command needs them, and events are relayed between
// processes (RelayEvents).

// openBackend is openStore typed as the core ports (commands that need
// only samples, datasets and jobs).
func (a *app) openBackend() (core.Store, error) { return a.openStore() }
