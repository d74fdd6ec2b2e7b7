package main

import (
	"io"
	"strconv"
	"time"

	"github.com/aml-project/aml/internal/render"

	amlapp "github.com/aml-project/aml/internal/app"

	"github.com/aml-project/aml/internal/core"
	"github.com/spf13/cobra"
)

// parseTime accepts epoch milliseconds or RFC 3339.
func parseTime(flag, s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return &v, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, usagef("--%s: %q is neither epoch milliseconds nor RFC 3339 (2026-01-05T06:00:00Z)", flag, s)
	}
	v := t.UnixMilli()
	return &v, nil
}

func newRunsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "runs", Short: "List and show batch runs"}
	var lr amlapp.RunListRequest
	list := opCommand(a, &cobra.Command{Use: "list", Short: "List runs (filter by line, product, recipe, status)", Args: argsExact(0)},
		"run.list", "", &lr, nil)
	list.Flags().StringVar(&lr.Line, "line", "", "only runs of this line")
	list.Flags().StringVar(&lr.Product, "product", "", "only runs of this product")
	list.Flags().StringVar(&lr.Recipe, "recipe", "", "only runs of this recipe")
	list.Flags().StringVar(&lr.Status, "status", "", "only runs with this status (active, ended, aborted)")
	var sr amlapp.RunShowRequest
	show := opCommand(a, &cobra.Command{Use: "show RUN", Short: "Show a run with its context segments and sample counts per node", Args: argsExact(1)},
		"run.show", "", &sr, func(args []string) error { sr.ID = args[0]; return nil })
	cmd.AddCommand(list, show, newRunEventsCmd(a))
	return cmd
}

func newNodesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "nodes", Short: "List signals (nodes) and set their metadata"}
	var req amlapp.NodeListRequest
	list := opCommand(a, &cobra.Command{Use: "list", Short: "List nodes with unit, range and kind", Args: argsExact(0)}, "node.list", "", &req, nil)
	list.Flags().StringVar(&req.Line, "line", "", "only nodes of this line")
	cmd.AddCommand(list, newNodeSetCmd(a))
	return cmd
}

func newTSCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "ts", Short: "Query time series"}
	var (
		req   amlapp.TSQueryRequest
		limit int
	)
	query := &cobra.Command{
		Use:         "query --node N [--run R] [--from T] [--to T] [--bucket 1s]",
		Short:       "Read one node's samples (all pages, or --limit of them) or bucketed aggregates",
		Args:        argsExact(0),
		Annotations: map[string]string{annotOp: "ts.query"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Node == "" {
				return usagef("--node is required")
			}
			if limit < 0 {
				return usagef("--limit must be ≥ 0")
			}
			if req.Bucket != 0 {
				var out amlapp.TSQueryResponse
				if err := a.invoke(cmd, "ts.query", "", &req, &out); err != nil {
					return err
				}
				if out.TSBuckets == nil {
					out.TSBuckets = &amlapp.TSBuckets{Buckets: []core.Bucket{}}
				}
				return a.emit(out, func(w io.Writer) { render.Text(w, "ts.query", &req, out) })
			}
			out := core.Page{Node: req.Node, Points: []core.Point{}}
			for {
				req.Limit = 10_000
				if limit > 0 {
					req.Limit = min(req.Limit, limit-len(out.Points))
				}
				var p amlapp.TSQueryResponse
				if err := a.invoke(cmd, "ts.query", "", &req, &p); err != nil {
					return err
				}
				if p.Page == nil {
					break
				}
				out.Points = append(out.Points, p.Points...)
				out.HasMore, out.NextAfterTs = p.HasMore, p.NextAfterTs
				if !p.HasMore || (limit > 0 && len(out.Points) >= limit) {
					break
				}
				after := p.NextAfterTs
				req.After = &after
			}
			if !out.HasMore {
				out.NextAfterTs = 0
			}
			return a.emit(out, func(w io.Writer) { render.Text(w, "ts.query", &req, amlapp.TSQueryResponse{Page: &out}) })
		},
	}
	fl := query.Flags()
	fl.StringVar(&req.Node, "node", "", "node id (required)")
	fl.StringVar(&req.Run, "run", "", "only samples of this run")
	fl.StringVar(&req.Line, "line", "", "only samples of this line")
	fl.StringVar(&req.Product, "product", "", "only samples of this product")
	fl.StringVar(&req.Recipe, "recipe", "", "only samples of this recipe")
	instantFlag(fl, &req.From, "from", "start time, inclusive (epoch ms or RFC 3339)")
	instantFlag(fl, &req.To, "to", "end time, inclusive (epoch ms or RFC 3339)")
	fl.Var(opt[int64]{&req.After, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }}, "after", "cursor: only samples strictly after this time in epoch µs (a page's nextAfterTsUs)")
	fl.IntVar(&limit, "limit", 0, "at most this many samples (0 = all)")
	fl.Var(&req.Bucket, "bucket", "aggregate into buckets of this width (e.g. 1s, 1m)")
	cmd.AddCommand(query)
	return cmd
}

func newDBCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "db", Short: "Data directory and schema"}
	var req amlapp.InfoRequest
	info := opCommand(a, &cobra.Command{Use: "info", Short: "Show the data directory, database file and schema version", Args: argsExact(0)},
		"info", "", &req, nil)
	cmd.AddCommand(info)
	return cmd
}

// The printers below print the answers of the ops, local or --server.
