// Package service bundles what the interfaces (internal/api, internal/mcp,
// internal/web and the CLI's "aml serve") share in one process: the store,
// the data directory, the job runner and queue, the event bus and the
// certificate key. It holds no logic of its own; each interface calls the
// domain packages (dataset, jobs, registry, twin/...) with these.
package service

import (
	"log/slog"

	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/twin/cert"
)

// Deps are the shared resources of a serving process.
type Deps struct {
	Store   store.Store
	DataDir string
	// Runner runs jobs; Queue (may be nil in tests) schedules them.
	Runner *jobs.Runner
	Queue  *jobs.Queue
	Bus    *events.Bus
	// Key signs certificates (cert.LoadOrCreateKey(DataDir)).
	Key *cert.KeyPair
	Log *slog.Logger
}
