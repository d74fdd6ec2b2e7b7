// Package service opens the shared resources of one process and bundles
// them: the store of the selected back-end, the data directory, the job
// runner and queue, the event bus and the certificate key (Process opens
// each on first use; Deps carries them). It runs no use case: the
// application layer (internal/app) runs every use case on these, and the
// interfaces (internal/api, internal/mcp, internal/web, cmd/aml) call the
// application. A process's workers (StartWorkers, Recalibrate) are the
// one loop it runs.
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
