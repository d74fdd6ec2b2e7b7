package main

// aml connect status, and the status reporting every running connector
// does (docs/connectors.md, "Connector status").

import (
	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/store"
	"github.com/spf13/cobra"
)

// statusStore is the connector status table of the data dir's store.
func statusStore(s store.Store) *connect.StatusStore {
	return connect.NewStatusStore(s.SQL())
}

func newConnectStatusCmd(a *app) *cobra.Command {
	var req amlapp.ConnectorListRequest
	cmd := opCommand(a, &cobra.Command{
		Use:   "status [--line L]",
		Short: "List the connectors that report to this data dir: state, counters, gaps, staleness",
		Args:  argsExact(0),
	}, "connector.list", "", &req, nil)
	cmd.Flags().StringVar(&req.Line, "line", "", "only this line")
	return cmd
}
