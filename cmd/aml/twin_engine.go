package main

// aml twin objective|trial|optimize|gate: the twin engine's ops
// (internal/app, internal/twin/engine, internal/twin/gate).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/spf13/cobra"
)

func newTwinObjectiveCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "objective", Short: "Store and show objective profiles (targets, weights, control costs, horizon, trust region)"}
	var (
		pr     amlapp.ObjectivePutRequest
		defInj bool
	)
	put := &cobra.Command{
		Use:   "put FILE | --default-injection [--by PERSON]",
		Short: "Store an objective profile (JSON); a profile with the same id is replaced (trials keep the hash they used)",
	}
	opCommand(a, put, "objective.put", "by", &pr, func(args []string) error {
		if defInj && len(args) == 0 {
			pr.Preset = amlapp.PresetDefaultInjection
			return nil
		}
		doc, err := docArg(put, args, defInj)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.DisallowUnknownFields()
		pr.Objective = &contract.ObjectiveProfile{}
		if err := dec.Decode(pr.Objective); err != nil {
			return contract.Invalidf("objective", "not a valid objective profile: %v", err)
		}
		return nil
	}, func(w io.Writer, o amlapp.ObjectivePutResponse) {
		fmt.Fprintf(w, "stored objective %s (hash %s)\n", o.ObjectiveID, o.Hash)
	})
	put.Flags().BoolVar(&defInj, "default-injection", false, "store the built-in injection objective (weight-quality)")
	put.Flags().String("by", "", "author (default $USER)")
	put.Flags().StringVar(&pr.Line, "line", "", "the line the profile belongs to (sets lineId; without one a profile is global, admin only)")
	var sr amlapp.ObjectiveShowRequest
	show := opCommand(a, &cobra.Command{Use: "show ID", Short: "Show an objective profile with its hash", Args: argsExact(1)}, "objective.show", "", &sr,
		func(args []string) error { sr.ID = args[0]; return nil },
		func(w io.Writer, o amlapp.ObjectiveShowResponse) {
			b, _ := json.MarshalIndent(o.Objective, "", "  ")
			fmt.Fprintf(w, "%s\nhash %s\n", b, o.Hash)
		})
	cmd.AddCommand(put, show)
	return cmd
}

func newTwinTrialCmd(a *app) *cobra.Command {
	var (
		req        amlapp.TrialRunRequest
		sets       []string
		candidates string
	)
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
	}
	opCommand(a, cmd, "trial.run", "by", &req, func([]string) error {
		if req.Model == "" || req.Snapshot == "" {
			return usagef("--model and --snapshot are required")
		}
		if (len(sets) == 0) == (candidates == "") {
			return usagef("give either --set control=value (repeatable) or --candidate FILE")
		}
		if candidates != "" {
			data, err := readArg(cmd, candidates)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(data, &req.Candidate); err != nil {
				return contract.Invalidf("candidate", "want a JSON array of {control: value} objects: %v", err)
			}
			return nil
		}
		req.Set = map[string]float64{}
		for _, kv := range sets {
			k, v, ok := strings.Cut(kv, "=")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				return usagef("--set %q: want CONTROL=NUMBER", kv)
			}
			req.Set[k] = x
		}
		return nil
	}, func(w io.Writer, r amlapp.TrialRunResponse) { printTrial(w, r.Record, r.Detail) })
	f := cmd.Flags()
	f.StringVar(&req.Model, "model", "", "twin model (format aml.hybrid/1)")
	f.StringVar(&req.Snapshot, "snapshot", "", "snapshot to start from (aml twin snapshot take)")
	f.StringVar(&req.Objective, "objective", "", "objective profile (default: the scene's first)")
	f.StringArrayVar(&sets, "set", nil, "CONTROL=VALUE moved at step 0 and held (repeatable)")
	f.StringVar(&candidates, "candidate", "", "JSON file with the full control trajectory")
	f.String("by", "", "author (default $USER)")
	return cmd
}

func printTrial(w io.Writer, rec contract.TrialRecord, d *engine.TrialDetail) {
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
		fmt.Fprintf(w, "  %s %-14s %s\n", okMark(c.Passed), c.ID, c.Detail)
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

// okMark is the mark of a check in the printers.
func okMark(ok bool) string {
	if ok {
		return "ok  "
	}
	return "FAIL"
}

func fmtControls(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%.4g", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func newTwinOptimizeCmd(a *app) *cobra.Command {
	req := amlapp.OptimizeRequest{Mode: amlapp.ModeAuto, Seed: 1}
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
	}
	opCommand(a, cmd, "optimize", "by", &req, func([]string) error {
		if req.Model == "" || req.Snapshot == "" {
			return usagef("--model and --snapshot are required")
		}
		switch req.Mode {
		case "", amlapp.ModeAuto, engine.ModeSafeSmallStep, engine.ModePreciseSearch:
			return nil
		}
		return usagef("--mode %q: want auto, %s or %s", req.Mode, engine.ModeSafeSmallStep, engine.ModePreciseSearch)
	}, func(w io.Writer, out amlapp.OptimizeResponse) {
		res := out.Result
		fmt.Fprintf(w, "mode %s: %d candidates evaluated (moves at steps %v)\n", res.Mode, res.Evaluated, res.MoveSteps)
		if out.Record == nil {
			fmt.Fprintf(w, "no candidate passes: %s\n", res.NoPass)
			return
		}
		printTrial(w, *out.Record, res.BestDetail)
	})
	f := cmd.Flags()
	f.StringVar(&req.Model, "model", "", "twin model (format aml.hybrid/1)")
	f.StringVar(&req.Snapshot, "snapshot", "", "snapshot to start from")
	f.StringVar(&req.Objective, "objective", "", "objective profile (default: the scene's first)")
	f.StringVar(&req.Mode, "mode", req.Mode, "auto, safe_small_step or precise_search")
	f.Uint64Var(&req.Seed, "seed", req.Seed, "seed of the search order")
	f.IntVar(&req.MaxCandidates, "max-candidates", 0, "candidates to evaluate at most (default 200)")
	f.String("by", "", "author (default $USER)")
	return cmd
}

func newTwinGateCmd(a *app) *cobra.Command {
	req := amlapp.GateEvaluateRequest{Snapshots: gate.DefaultSnapshots, Seed: 1}
	var scene string
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
	}
	opCommand(a, cmd, "gate.evaluate", "by", &req, func([]string) error {
		if req.Model == "" || scene == "" {
			return usagef("--model and --scene are required")
		}
		req.Scene, req.SceneVersion, _ = strings.Cut(scene, "@")
		return nil
	}, printGate)
	f := cmd.Flags()
	f.StringVar(&req.Model, "model", "", "twin model")
	f.StringVar(&scene, "scene", "", "scene id, optionally @version")
	f.StringVar(&req.Objective, "objective", "", "objective profile (default: the scene's first)")
	f.IntVar(&req.Snapshots, "snapshots", req.Snapshots, "replayed snapshots (one trial each)")
	f.StringVar(&req.Profile, "profile", "", "twin acceptance profile (default twin-v2)")
	f.String("by", "", "actor (default $USER)")
	f.Uint64Var(&req.Seed, "seed", req.Seed, "seed of the optimiser's search order")
	return cmd
}

func printGate(w io.Writer, r *gate.Result) {
	verdict := "FAILED"
	if r.Report.Passed {
		verdict = "PASSED"
	}
	fmt.Fprintf(w, "twin gate %s for model %s: %s (profile %s, stage %s, tuning mode %s)\n", r.GateEvalID, r.ModelID, verdict, r.Report.Profile, r.Report.Stage, r.TuningMode)
	for _, c := range r.Report.Checks {
		fmt.Fprintf(w, "  %s %-20s %s\n", okMark(c.Passed), c.ID, c.Detail)
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
