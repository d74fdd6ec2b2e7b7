package main

// aml twin objective|trial|optimize|gate: the twin engine from the command
// line (internal/twin/engine, internal/twin/gate).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/aml-project/aml/internal/twin/snapshot"
	"github.com/spf13/cobra"
)

func init() {
	// aml twin snapshot take --model ID: the twin engine estimates the
	// unmeasured states and supplies the scene → node bindings of the
	// model's dataset.
	snapshotEstimator = func(a *app, modelID string) (snapshot.StateEstimator, error) {
		s, err := a.openStore()
		if err != nil {
			return nil, err
		}
		return engine.Load(context.Background(), s, a.dataDir, modelID)
	}
}

func actor(by string) string {
	if by != "" {
		return by
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "aml"
}

// twinInputs loads a stored snapshot with its scene and objective.
func twinInputs(ctx context.Context, a *app, snapID, objID string) (store.Store, *contract.TwinSnapshot, *contract.SceneContract, *contract.ObjectiveProfile, error) {
	s, err := a.openStore()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	snap, err := s.GetSnapshot(ctx, snapID)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	scene, err := s.GetScene(ctx, snap.SceneID, snap.SceneVersion)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if objID == "" {
		if len(scene.ObjectiveProfileIDs) == 0 {
			return nil, nil, nil, nil, usagef("--objective: scene %s names no objective profile", scene.SceneID)
		}
		objID = scene.ObjectiveProfileIDs[0]
	}
	obj, _, err := s.GetObjective(ctx, objID)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return s, snap, scene, obj, nil
}

func newTwinEngineCmds(a *app) []*cobra.Command {
	return []*cobra.Command{newTwinObjectiveCmd(a), newTwinTrialCmd(a), newTwinOptimizeCmd(a), newTwinGateCmd(a)}
}

func newTwinObjectiveCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "objective", Short: "Store and show objective profiles (targets, weights, control costs, horizon, trust region)"}
	var defInj bool
	var by string
	put := &cobra.Command{
		Use:   "put FILE | --default-injection",
		Short: "Store an objective profile (JSON); a profile with the same id is replaced (trials keep the hash they used)",
		RunE: func(cmd *cobra.Command, args []string) error {
			var o *contract.ObjectiveProfile
			switch {
			case defInj && len(args) == 0:
				o = contract.DefaultInjectionObjective()
			case !defInj && len(args) == 1:
				data, err := readArg(cmd, args[0])
				if err != nil {
					return err
				}
				o = &contract.ObjectiveProfile{}
				dec := json.NewDecoder(strings.NewReader(string(data)))
				dec.DisallowUnknownFields()
				if err := dec.Decode(o); err != nil {
					return contract.Invalidf("objective", "not a valid objective profile: %v", err)
				}
			default:
				return usagef("%s takes FILE or --default-injection", cmd.CommandPath())
			}
			if by != "" {
				o.CreatedBy = by
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			h, err := s.PutObjective(cmd.Context(), o)
			if err != nil {
				return err
			}
			out := objectivePut{ObjectiveID: o.ObjectiveID, Hash: h}
			return a.emit(out, func(w io.Writer) { printObjectivePut(w, out) })
		},
	}
	put.Flags().BoolVar(&defInj, "default-injection", false, "store the built-in injection objective (weight-quality)")
	put.Flags().StringVar(&by, "by", "", "author")
	show := &cobra.Command{
		Use:  "show ID",
		Args: argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			o, h, err := s.GetObjective(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := objectiveShow{Objective: o, Hash: h}
			return a.emit(out, func(w io.Writer) { printObjective(w, out) })
		},
	}
	cmd.AddCommand(put, show)
	return cmd
}

func readArg(cmd *cobra.Command, name string) ([]byte, error) {
	var data []byte
	var err error
	if name == "-" {
		data, err = io.ReadAll(cmd.InOrStdin())
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, usagef("read %s: %v", name, err)
	}
	return data, nil
}

// trialOutput is what aml twin trial prints.
type trialOutput struct {
	Record twinstore.TrialRecord  `json:"record"`
	Detail *engine.TrialDetail    `json:"detail"`
	Trial  *contract.VirtualTrial `json:"trial"`
}

func newTwinTrialCmd(a *app) *cobra.Command {
	var fModel, fSnap, fObj, fCand, fBy string
	var fSet []string
	cmd := &cobra.Command{
		Use:   "trial --model ID --snapshot ID (--set control=value ... | --candidate FILE) [--objective ID]",
		Short: "Run one virtual trial of a candidate setpoint move (never written to the machine) and store it",
		Long: `Roll the model out from the snapshot with the candidate controls and
compare with holding the snapshot's setpoints: interval tube, every scene
constraint on the tube edges, OOD of the trajectory, cost over the horizon.
--set control=value moves a control at step 0 and holds it (controls not
named keep their snapshot value); --candidate FILE gives the full trajectory
as a JSON array of {control: value} per horizon step. A candidate that breaks
a range or step limit is recorded as rejected (CONTROL_SAFETY).`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fModel == "" || fSnap == "" {
				return usagef("--model and --snapshot are required")
			}
			if (len(fSet) == 0) == (fCand == "") {
				return usagef("give either --set control=value (repeatable) or --candidate FILE")
			}
			s, snap, scene, obj, err := twinInputs(cmd.Context(), a, fSnap, fObj)
			if err != nil {
				return err
			}
			var cand []map[string]float64
			if fCand != "" {
				data, err := readArg(cmd, fCand)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(data, &cand); err != nil {
					return contract.Invalidf("candidate", "want a JSON array of {control: value} objects: %v", err)
				}
			} else {
				step := map[string]float64{}
				for k, v := range snap.ControlValues {
					step[k] = v
				}
				for _, kv := range fSet {
					k, v, ok := strings.Cut(kv, "=")
					x, err := strconv.ParseFloat(v, 64)
					if !ok || err != nil {
						return usagef("--set %q: want CONTROL=NUMBER", kv)
					}
					if _, known := step[k]; !known {
						return usagef("--set %s: not a control of scene %s (controls: %s)", k, scene.SceneID, strings.Join(sortedKeys(snap.ControlValues), ", "))
					}
					step[k] = x
				}
				cand = make([]map[string]float64, obj.HorizonSteps)
				for i := range cand {
					cand[i] = step
				}
			}
			now := time.Now().UTC()
			res, err := engine.RunTrial(cmd.Context(), s, a.dataDir, fModel, engine.TrialInput{Scene: scene, Snapshot: snap, Objective: obj,
				Candidate: cand, TrialID: newTwinID("trial", now), CreatedBy: actor(fBy), Now: now})
			if err != nil {
				return err
			}
			rec, err := s.PutTrial(cmd.Context(), res.Trial, twinstore.TrialManual, "")
			if err != nil {
				return err
			}
			return a.emit(trialOutput{Record: rec, Detail: res.Detail, Trial: res.Trial}, func(w io.Writer) { printTrial(w, rec, res.Detail) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&fModel, "model", "", "twin model (format aml.hybrid/1)")
	f.StringVar(&fSnap, "snapshot", "", "snapshot to start from (aml twin snapshot take)")
	f.StringVar(&fObj, "objective", "", "objective profile (default: the scene's first)")
	f.StringArrayVar(&fSet, "set", nil, "CONTROL=VALUE moved at step 0 and held (repeatable)")
	f.StringVar(&fCand, "candidate", "", "JSON file with the full control trajectory")
	f.StringVar(&fBy, "by", "", "author (default $USER)")
	return cmd
}

func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var twinIDSeq int

func newTwinID(prefix string, now time.Time) string {
	twinIDSeq++
	return fmt.Sprintf("%s-%s-%d-%d", prefix, now.UTC().Format("20060102T150405.000"), os.Getpid()%100000, twinIDSeq)
}

func printTrial(w io.Writer, rec twinstore.TrialRecord, d *engine.TrialDetail) {
	t := rec.Trial
	verdict := "PASSED"
	if !rec.Passed {
		verdict = "REJECTED " + rec.RejectCode
	}
	fmt.Fprintf(w, "trial %s  %s  (model %s, snapshot %s; never executed)\n", t.TrialID, verdict, t.ModelID, t.SnapshotID)
	if len(t.CandidateControlTrajectory) > 0 {
		fmt.Fprintf(w, "candidate (step 0): %s\n", fmtControls(t.CandidateControlTrajectory[0]))
	}
	bc := t.BaselineComparison
	fmt.Fprintf(w, "cost %.4g vs holding %.4g: improvement %.4g\n", bc.CandidateCost, bc.BaselineCost, bc.Improvement)
	fmt.Fprintf(w, "uncertainty: coverage %.3f, max std %.4g, %d ensemble members; OOD distance %.3g accepted %v %s\n",
		t.Uncertainty.Coverage, t.Uncertainty.MaxStd, t.Uncertainty.EnsembleSize, t.OutOfDistribution.Distance, t.OutOfDistribution.Accepted, t.OutOfDistribution.RejectCode)
	for _, c := range t.ConstraintResults {
		mark := "ok  "
		if !c.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %-14s %s\n", mark, c.ID, c.Detail)
	}
	for i, r := range t.Rejections {
		if i == 5 {
			fmt.Fprintf(w, "  … %d more findings (--json lists them all)\n", len(t.Rejections)-i)
			break
		}
		fmt.Fprintf(w, "  rejected at step %d: %s: %s\n", r.Step, r.Field, r.Message)
	}
	if d != nil {
		for _, tr := range d.Traces {
			if tr.Kind != "output" || len(tr.Mean) == 0 {
				continue
			}
			n := len(tr.Mean) - 1
			fmt.Fprintf(w, "  %-12s end of horizon %.4g [%.4g, %.4g]  (holding: %.4g)%s\n", tr.ID, tr.Mean[n], tr.Lower[n], tr.Upper[n], tr.Baseline[n],
				map[bool]string{true: "", false: "  physics only"}[tr.Calibrated])
		}
	}
}

func fmtControls(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%.4g", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// optimizeOutput is what aml twin optimize prints.
type optimizeOutput struct {
	Result *engine.OptimizeResult `json:"result"`
	Record *twinstore.TrialRecord `json:"record,omitempty"`
}

func newTwinOptimizeCmd(a *app) *cobra.Command {
	var fModel, fSnap, fObj, fMode, fBy string
	var fSeed uint64
	var fMax int
	cmd := &cobra.Command{
		Use:   "optimize --model ID --snapshot ID [--mode auto|safe_small_step|precise_search] [--objective ID]",
		Short: "Search the setpoint move with the lowest cost that passes constraints, UQ and OOD; store its trial",
		Long: `Search candidate moves within the trust region and the write policy and
keep the lowest-cost one that passes every constraint on the tube edges, the
uncertainty and the OOD checks (holding the setpoints is always a
candidate). --mode auto (default) is safe_small_step until the model's
latest twin gate evaluation passed, then precise_search. The best trial is
stored (aml cert issue --trial ID makes it a certificate).`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fModel == "" || fSnap == "" {
				return usagef("--model and --snapshot are required")
			}
			s, snap, scene, obj, err := twinInputs(cmd.Context(), a, fSnap, fObj)
			if err != nil {
				return err
			}
			mode, err := resolveMode(cmd.Context(), s, fModel, fMode)
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			res, err := engine.RunOptimize(cmd.Context(), s, a.dataDir, fModel, engine.OptimizeInput{Scene: scene, Snapshot: snap, Objective: obj,
				Mode: mode, Seed: fSeed, MaxCandidates: fMax, TrialID: newTwinID("trial", now), CreatedBy: actor(fBy), Now: now})
			if err != nil {
				return err
			}
			out := optimizeOutput{Result: res}
			if res.Best != nil {
				rec, err := s.PutTrial(cmd.Context(), res.Best, twinstore.TrialOptimize, "")
				if err != nil {
					return err
				}
				out.Record = &rec
			}
			return a.emit(out, func(w io.Writer) { printOptimize(w, out) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&fModel, "model", "", "twin model (format aml.hybrid/1)")
	f.StringVar(&fSnap, "snapshot", "", "snapshot to start from")
	f.StringVar(&fObj, "objective", "", "objective profile (default: the scene's first)")
	f.StringVar(&fMode, "mode", "auto", "auto, safe_small_step or precise_search")
	f.Uint64Var(&fSeed, "seed", 1, "seed of the search order")
	f.IntVar(&fMax, "max-candidates", 0, "candidates to evaluate at most (default 200)")
	f.StringVar(&fBy, "by", "", "author (default $USER)")
	return cmd
}

// resolveMode maps --mode auto to the tuning mode of the model's latest
// gate evaluation (safe_small_step without one).
func resolveMode(ctx context.Context, s store.Store, modelID, mode string) (string, error) {
	switch mode {
	case engine.ModeSafeSmallStep, engine.ModePreciseSearch:
		return mode, nil
	case "auto", "":
		g, err := s.LatestGateEval(ctx, modelID)
		if err != nil || !g.Passed {
			return engine.ModeSafeSmallStep, nil
		}
		return engine.ModePreciseSearch, nil
	}
	return "", usagef("--mode %q: want auto, %s or %s", mode, engine.ModeSafeSmallStep, engine.ModePreciseSearch)
}

func newTwinGateCmd(a *app) *cobra.Command {
	var o gate.Options
	var fModel, fScene string
	cmd := &cobra.Command{
		Use:   "gate --model ID --scene ID[@VERSION] [--snapshots 12] [--profile twin-v2]",
		Short: "Evaluate the twin acceptance gate with measured inputs (evaluation, fresh trials, shadow evidence) and store it",
		Long: `Apply the twin acceptance profile (default twin-v2) to inputs the platform
measures: the model's stored test accuracy, calibration rows and test
coverage; virtual trials run now on snapshots replayed at instants of the
dataset's test runs (stored with purpose "gate"); and the stored shadow
evidence (aml twin shadow). The result is stored; promotion of a twin model
to production needs a passing one, and "aml twin optimize --mode auto" uses
precise_search once it passes.`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fModel == "" || fScene == "" {
				return usagef("--model and --scene are required")
			}
			o.SceneID, o.SceneVersion, _ = strings.Cut(fScene, "@")
			o.By = actor(o.By)
			s, err := a.openStore()
			if err != nil {
				return err
			}
			r, err := gate.Evaluate(cmd.Context(), s, a.dataDir, fModel, o)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) { printGate(w, r) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&fModel, "model", "", "twin model")
	f.StringVar(&fScene, "scene", "", "scene id, optionally @version")
	f.StringVar(&o.ObjectiveID, "objective", "", "objective profile (default: the scene's first)")
	f.IntVar(&o.Snapshots, "snapshots", gate.DefaultSnapshots, "replayed snapshots (one trial each)")
	f.StringVar(&o.Profile, "profile", "", "twin acceptance profile (default twin-v2)")
	f.StringVar(&o.By, "by", "", "actor (default $USER)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the optimiser's search order")
	return cmd
}

func printGate(w io.Writer, r *gate.Result) {
	verdict := "FAILED"
	if r.Report.Passed {
		verdict = "PASSED"
	}
	fmt.Fprintf(w, "twin gate %s for model %s: %s (profile %s, stage %s, tuning mode %s)\n", r.GateEvalID, r.ModelID, verdict, r.Report.Profile, r.Report.Stage, r.TuningMode)
	for _, c := range r.Report.Checks {
		mark := "ok  "
		if !c.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s %-20s %s\n", mark, c.ID, c.Detail)
	}
	fmt.Fprintf(w, "%d gate trials", len(r.Trials))
	if n := len(r.NoRecommendation); n > 0 {
		fmt.Fprintf(w, ", %d points without a passing candidate (not trials)", n)
	}
	if len(r.Failures) > 0 {
		fmt.Fprintf(w, ", %d snapshots could not be taken (first: %s)", len(r.Failures), r.Failures[0].Error)
	}
	fmt.Fprintln(w)
}

// objectivePut and objectiveShow are what "aml twin objective put|show"
// print (and POST /objectives, GET /objectives/{id} return).
type objectivePut struct {
	ObjectiveID string `json:"objectiveId"`
	Hash        string `json:"hash"`
}

type objectiveShow struct {
	Objective *contract.ObjectiveProfile `json:"objective"`
	Hash      string                     `json:"hash"`
}

func printObjectivePut(w io.Writer, o objectivePut) {
	fmt.Fprintf(w, "stored objective %s (hash %s)\n", o.ObjectiveID, o.Hash)
}

func printObjective(w io.Writer, o objectiveShow) {
	b, _ := json.MarshalIndent(o.Objective, "", "  ")
	fmt.Fprintf(w, "%s\nhash %s\n", b, o.Hash)
}

func printOptimize(w io.Writer, out optimizeOutput) {
	res := out.Result
	fmt.Fprintf(w, "mode %s: %d candidates evaluated (moves at steps %v)\n", res.Mode, res.Evaluated, res.MoveSteps)
	if out.Record == nil {
		fmt.Fprintf(w, "no candidate passes: %s\n", res.NoPass)
		return
	}
	printTrial(w, *out.Record, res.BestDetail)
}
