package main

// aml line overview: the operator's view of a line (line.overview).

import (
	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/spf13/cobra"
)

func newLineOverviewCmd(a *app) *cobra.Command {
	var req amlapp.LineOverviewRequest
	cmd := opCommand(a, &cobra.Command{
		Use:   "overview --line L [--writes N] [--stale-after D]",
		Short: "A line at a glance: each node's newest value against its range with alarms, connectors, certificates awaiting approval or execution, the last governed writes with readback",
		Args:  argsExact(0),
	}, "line.overview", "", &req, nil)
	cmd.Flags().StringVar(&req.Line, "line", "", "the line (required)")
	cmd.Flags().IntVar(&req.Writes, "writes", 0, "at most this many recent writes (default 10, at most 100)")
	cmd.Flags().Var(&req.StaleAfter, "stale-after", "a newest value older than this is stale (0s means 5m)")
	return cmd
}
