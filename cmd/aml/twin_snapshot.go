package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/snapshot"
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
		Long: `Read the recent samples of every node bound to the scene's variables, clean
them (state, node range, Hampel) and record the current value of each
control, state and disturbance with its freshness, the data quality, the
recent window on the grid and the state estimate. The snapshot is sealed
(hashed) and stored; the report tells what the data lacked.

A variable's node is --bind var=node, else the scene's nodeId, else the node
with the variable's id (the default injection scene needs
--bind weight=part_weight). --run picks the run (default: the newest active,
else newest run of the line). --at T takes the snapshot as of a past instant
(samples after T are ignored). --strict refuses (AML_SNAPSHOT_QUALITY) any
stale or missing variable or future sample. --model ID estimates the
unmeasured states with the model (and binds the variables its dataset names;
--bind wins).`,
		Args: argsExact(0),
	}
	opCommand(a, take, "snapshot.take", "by", &req, func([]string) error {
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
	}, func(w io.Writer, r amlapp.SnapshotTakeResponse) {
		printSnapshot(w, r.Snapshot, req.Strict)
		printSnapshotVars(w, r.Report)
		for _, n := range r.Report.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
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
	f.String("by", "", "author (default $USER)")

	var sr amlapp.SnapshotShowRequest
	show := opCommand(a, &cobra.Command{Use: "show ID", Short: "Show a stored snapshot (verified against its hash); --json prints it in full", Args: argsExact(1)},
		"snapshot.show", "", &sr, func(args []string) error { sr.ID = args[0]; return nil },
		func(w io.Writer, r amlapp.SnapshotShowResponse) {
			printSnapshot(w, r.Snapshot, r.Info.Strict)
			printSnapshotValues(w, r.Snapshot)
		})

	lr := amlapp.SnapshotListRequest{Limit: 100}
	list := listCommand(a, &cobra.Command{Use: "list [--line L] [--limit N]", Short: "List stored snapshots, newest first", Args: argsExact(0)},
		"snapshot.list", &lr, nil, printSnapshots)
	list.Flags().StringVar(&lr.Line, "line", "", "only this line")
	list.Flags().IntVar(&lr.Limit, "limit", lr.Limit, "at most this many")
	cmd.AddCommand(take, show, list)
	return cmd
}

func printSnapshot(w io.Writer, s *contract.TwinSnapshot, strict bool) {
	fmt.Fprintf(w, "snapshot %s  scene %s@%s  line %s\n", s.SnapshotID, s.SceneID, s.SceneVersion, s.LineID)
	fmt.Fprintf(w, "captured %s  phase %s  strict %v\n", s.CapturedAt.UTC().Format(time.RFC3339Nano), s.Phase, strict)
	if s.DAQWatermark > 0 {
		fmt.Fprintf(w, "newest sample %s\n", time.UnixMilli(s.DAQWatermark).UTC().Format(time.RFC3339Nano))
	}
	q := s.DataQuality
	fmt.Fprintf(w, "fresh %v  completeness %.3f", q.Fresh, q.Completeness)
	if len(q.StaleNodeIDs) > 0 {
		fmt.Fprintf(w, "  stale/missing: %s", strings.Join(q.StaleNodeIDs, ", "))
	}
	fmt.Fprintf(w, "\nestimator %s\n", s.EstimatorVersion)
	if s.Window != nil {
		fmt.Fprintf(w, "window %d × %d ms ending %s, %d node(s)", s.Window.Steps, s.Window.BeatMs,
			time.UnixMilli(s.Window.EndMs).UTC().Format(time.RFC3339), len(s.Window.Values))
		if s.Window.RunID != "" {
			fmt.Fprintf(w, ", run %s", s.Window.RunID)
		}
		fmt.Fprintln(w)
	}
	if s.BindingSnapshotHash != "" {
		fmt.Fprintf(w, "binding %s\n", s.BindingSnapshotHash)
	}
	fmt.Fprintf(w, "hash %s\n", s.SnapshotHash)
}

func printSnapshotVars(w io.Writer, r *snapshot.Report) {
	fmt.Fprintf(w, "%-28s %-12s %-26s %14s %10s  %s\n", "VARIABLE", "ROLE", "NODE", "VALUE", "AGE", "STATUS")
	for _, v := range r.Variables {
		val, age, node := "-", "-", dash(v.NodeID)
		if v.Value != nil {
			val = fmt.Sprintf("%.6g", *v.Value)
		}
		if v.TsMs != 0 {
			age = (time.Duration(v.AgeMs) * time.Millisecond).String()
		}
		status := v.Status
		var extra []string
		if v.HeldBack > 0 {
			extra = append(extra, fmt.Sprintf("%d held back", v.HeldBack))
		}
		if d := v.Clean.State + v.Clean.Range + v.Clean.Hampel; d > 0 {
			extra = append(extra, fmt.Sprintf("%d cleaned", d))
		}
		if v.Future > 0 {
			extra = append(extra, fmt.Sprintf("%d future", v.Future))
		}
		if len(extra) > 0 {
			status += " (" + strings.Join(extra, ", ") + ")"
		}
		fmt.Fprintf(w, "%-28s %-12s %-26s %14s %10s  %s\n", v.VariableID, v.Role, node, val, age, status)
	}
	fmt.Fprintf(w, "bound %d, fresh %d; window %d/%d cells filled; future samples %d\n", r.Bound, r.Fresh, r.WindowFilled, r.WindowCells, r.FutureSamples)
}

func printSnapshotValues(w io.Writer, s *contract.TwinSnapshot) {
	group := func(title string, m map[string]float64) {
		if len(m) == 0 {
			return
		}
		fmt.Fprintf(w, "%s:\n", title)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(w, "  %-28s %.6g\n", k, m[k])
		}
	}
	group("controls", s.ControlValues)
	group("states", s.StateEstimate)
	group("disturbances", s.Disturbances)
}

func printSnapshots(w io.Writer, l []contract.SnapshotInfo) {
	if len(l) == 0 {
		fmt.Fprintln(w, "no snapshots")
		return
	}
	fmt.Fprintf(w, "%-40s %-28s %-20s %-24s %s\n", "SNAPSHOT", "SCENE", "LINE", "CAPTURED", "STRICT")
	for _, i := range l {
		fmt.Fprintf(w, "%-40s %-28s %-20s %-24s %v\n", i.SnapshotID, twinstore.SceneSubject(i.SceneID, i.SceneVersion), i.LineID,
			i.CapturedAt.Format(time.RFC3339), i.Strict)
	}
}
