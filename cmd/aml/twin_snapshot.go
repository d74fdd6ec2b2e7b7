package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/snapshot"
	"github.com/spf13/cobra"
)

// snapshotEstimator builds the state estimator of "aml twin snapshot take
// --model ID" (the engine's calibrated model over the recent window). It
// is nil until the twin engine wires it in; --model then fails clearly.
// The estimator may also derive bindings itself; --bind always wins.
var snapshotEstimator func(a *app, modelID string) (snapshot.StateEstimator, error)

// snapshotTakeResult is the --json output of snapshot take.
type snapshotTakeResult struct {
	Snapshot *contract.TwinSnapshot `json:"snapshot"`
	Report   *snapshot.Report       `json:"report"`
}

// snapshotShowResult is the --json output of snapshot show.
type snapshotShowResult struct {
	Snapshot *contract.TwinSnapshot `json:"snapshot"`
	Info     twinstore.SnapshotInfo `json:"info"`
}

func newTwinSnapshotCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "Take, show and list twin snapshots (the line's state from the live store)"}

	var fScene, fRun, fAt, fModel, fPhase, fBy string
	var fStrict bool
	var fMaxAge time.Duration
	var fBind []string
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
unmeasured states with the model.`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fScene == "" {
				return usagef("%s: --scene is required", cmd.CommandPath())
			}
			id, version, _ := strings.Cut(fScene, "@")
			o := snapshot.Options{RunID: fRun, Strict: fStrict, MaxAge: fMaxAge, Phase: fPhase, CreatedBy: fBy}
			if o.CreatedBy == "" {
				o.CreatedBy = os.Getenv("USER")
			}
			if fMaxAge < 0 {
				return usagef("--max-age must be positive")
			}
			if len(fBind) > 0 {
				o.Bindings = map[string]string{}
				for _, b := range fBind {
					v, n, ok := strings.Cut(b, "=")
					if !ok || v == "" || n == "" {
						return usagef("--bind %q: want VARIABLE=NODE", b)
					}
					if _, dup := o.Bindings[v]; dup {
						return usagef("--bind: variable %s bound twice", v)
					}
					o.Bindings[v] = n
				}
			}
			if fAt != "" {
				ms, err := parseTime("at", fAt)
				if err != nil {
					return err
				}
				o.Now, o.Replay = time.UnixMilli(*ms).UTC(), true
			}
			if fModel != "" {
				if snapshotEstimator == nil {
					return usagef("--model: model-based state estimation is not available in this build (no twin engine wired in)")
				}
				est, err := snapshotEstimator(a, fModel)
				if err != nil {
					return err
				}
				o.Estimator = est
				// The model's dataset knows each quantity's node; --bind wins.
				if b, ok := est.(interface{ Bindings() map[string]string }); ok {
					if o.Bindings == nil {
						o.Bindings = map[string]string{}
					}
					for v, n := range b.Bindings() {
						if _, set := o.Bindings[v]; !set {
							o.Bindings[v] = n
						}
					}
				}
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			scene, err := s.GetScene(cmd.Context(), id, version)
			if err != nil {
				return err
			}
			snap, rep, err := snapshot.Take(cmd.Context(), s, scene, o)
			if err != nil {
				if rep != nil && !a.jsonOut {
					printSnapshotVars(a.stderr, rep)
				}
				return err
			}
			if err := s.PutSnapshot(cmd.Context(), snap, fStrict); err != nil {
				return err
			}
			return a.emit(snapshotTakeResult{Snapshot: snap, Report: rep}, func(w io.Writer) {
				printSnapshot(w, snap, fStrict)
				printSnapshotVars(w, rep)
				for _, n := range rep.Notes {
					fmt.Fprintf(w, "note: %s\n", n)
				}
			})
		},
	}
	f := take.Flags()
	f.StringVar(&fScene, "scene", "", "scene id, optionally @version (default: its latest version)")
	f.StringVar(&fRun, "run", "", "run (default: the newest active, else newest run of the scene's line)")
	f.BoolVar(&fStrict, "strict", false, "refuse stale, missing or future data")
	f.DurationVar(&fMaxAge, "max-age", 0, "freshness limit (default 60s)")
	f.StringArrayVar(&fBind, "bind", nil, "VARIABLE=NODE binding (repeatable)")
	f.StringVar(&fAt, "at", "", "take the snapshot as of this past instant (RFC 3339 or epoch ms)")
	f.StringVar(&fModel, "model", "", "estimate unmeasured states with this model")
	f.StringVar(&fPhase, "phase", "", "process phase (one of the scene's phases; default: assumed)")
	f.StringVar(&fBy, "by", "", "author (default $USER)")
	cmd.AddCommand(take)

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a stored snapshot (verified against its hash); --json prints it in full",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			snap, info, err := s.GetSnapshotInfo(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.emit(snapshotShowResult{Snapshot: snap, Info: info}, func(w io.Writer) {
				printSnapshot(w, snap, info.Strict)
				printSnapshotValues(w, snap)
			})
		},
	}
	cmd.AddCommand(show)

	var lLine string
	var lLimit int
	list := &cobra.Command{
		Use:   "list [--line L] [--limit N]",
		Short: "List stored snapshots, newest first",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			l, err := s.ListSnapshots(cmd.Context(), lLine, lLimit)
			if err != nil {
				return err
			}
			if l == nil {
				l = []twinstore.SnapshotInfo{}
			}
			return a.emit(l, func(w io.Writer) { printSnapshots(w, l) })
		},
	}
	list.Flags().StringVar(&lLine, "line", "", "only this line")
	list.Flags().IntVar(&lLimit, "limit", 100, "at most this many")
	cmd.AddCommand(list)
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
		val, age := "-", "-"
		if v.Value != nil {
			val = fmt.Sprintf("%.6g", *v.Value)
		}
		if v.TsMs != 0 {
			age = (time.Duration(v.AgeMs) * time.Millisecond).String()
		}
		node := v.NodeID
		if node == "" {
			node = "-"
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
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %-28s %.6g\n", k, m[k])
		}
	}
	group("controls", s.ControlValues)
	group("states", s.StateEstimate)
	group("disturbances", s.Disturbances)
}

func printSnapshots(w io.Writer, l []twinstore.SnapshotInfo) {
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
