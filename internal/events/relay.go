package events

import (
	"context"
	"log/slog"
)

// Relayer is a back-end's event capability; every back-end declares it
// (internal/store.Store requires it). RelayEvents carries bus's Relayed
// events to and from the other processes sharing the store's database
// until ctx ends, so that `aml serve` shows the progress of jobs its
// workers on other machines run. A back-end whose database one process
// serves (SQLite: that process runs the jobs its clients watch) has
// nothing to relay and returns nil; PostgreSQL relays with LISTEN/NOTIFY
// (internal/events/pgrelay).
type Relayer interface {
	RelayEvents(ctx context.Context, bus *Bus, log *slog.Logger) error
}
