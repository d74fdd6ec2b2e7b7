package main

import (
	"context"
	"log/slog"

	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store"
)

// watchConnectors streams the state of connectors running in other
// processes (aml connect, aml demo --live write their status rows to the
// store) as connector.state and connector.gap events on the serve
// process's bus, until ctx ends.
func watchConnectors(ctx context.Context, st store.Store, bus *events.Bus, log *slog.Logger) {
	go connect.WatchStatus(ctx, connect.NewStatusStore(st.SQL()), bus, connect.DefaultStatusInterval, log)
}
