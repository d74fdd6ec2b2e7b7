package main

import (
	"strings"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/spf13/cobra"
)

func newTwinSnapshotCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "Take, show and list twin snapshots (the line's state from the live store)"}

	var (
		req   amlapp.SnapshotTakeRequest
		scene string
		binds []string
	)
	take := &cobra.Command{
		Use:   "take --scene ID[@VERSION] [--run RUN] [--strict] [--max-age 60s] [--bind var=node]... [--at T] [--model ID]",
		Short: "Take a snapshot of a scene's variables from the store and record it",
		Args:  argsExact(0),
	}
	opCommand(a, take, "snapshot.take", "as", &req, func([]string) error {
		if scene == "" {
			return usagef("%s: --scene is required", take.CommandPath())
		}
		if req.MaxAge < 0 {
			return usagef("--max-age must be positive")
		}
		req.Scene, req.SceneVersion, _ = strings.Cut(scene, "@")
		for _, b := range binds {
			v, n, ok := strings.Cut(b, "=")
			if !ok || v == "" || n == "" {
				return usagef("--bind %q: want VARIABLE=NODE", b)
			}
			if _, dup := req.Bindings[v]; dup {
				return usagef("--bind: variable %s bound twice", v)
			}
			if req.Bindings == nil {
				req.Bindings = map[string]string{}
			}
			req.Bindings[v] = n
		}
		return nil
	})
	f := take.Flags()
	f.StringVar(&scene, "scene", "", "scene id, optionally @version (default: its latest version)")
	f.StringVar(&req.Run, "run", "", "run (default: the newest active, else newest run of the scene's line)")
	f.BoolVar(&req.Strict, "strict", false, "refuse stale, missing or future data")
	f.Var(&req.MaxAge, "max-age", "freshness limit (default 60s)")
	f.StringArrayVar(&binds, "bind", nil, "VARIABLE=NODE binding (repeatable)")
	instantFlag(f, &req.At, "at", "take the snapshot as of this past instant (RFC 3339 or epoch ms)")
	f.StringVar(&req.Model, "model", "", "estimate unmeasured states with this model")
	f.StringVar(&req.Phase, "phase", "", "process phase (one of the scene's phases; default: assumed)")
	asFlag(f, "author (default $USER)")

	var sr amlapp.SnapshotShowRequest
	show := opCommand(a, &cobra.Command{Use: "show ID", Short: "Show a stored snapshot (verified against its hash); --json prints it in full", Args: argsExact(1)},
		"snapshot.show", "", &sr, func(args []string) error { sr.ID = args[0]; return nil })

	lr := amlapp.SnapshotListRequest{Limit: 100}
	list := opCommand(a, &cobra.Command{Use: "list [--line L] [--limit N]", Short: "List stored snapshots, newest first", Args: argsExact(0)},
		"snapshot.list", "", &lr, nil)
	list.Flags().StringVar(&lr.Line, "line", "", "only this line")
	list.Flags().IntVar(&lr.Limit, "limit", lr.Limit, "at most this many")
	cmd.AddCommand(take, show, list)
	return cmd
}
