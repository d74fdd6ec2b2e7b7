package main

// aml twin objective|trial|optimize|gate: the twin engine's ops
// (internal/app's objective.put/show, trial.run, optimize, gate.evaluate;
// the engine and the gate run there).

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/contract"
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
	opCommand(a, put, "objective.put", "as", &pr, func(args []string) error {
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
	})
	put.Flags().BoolVar(&defInj, "default-injection", false, "store the built-in injection objective (weight-quality)")
	asFlag(put.Flags(), "author (default $USER)")
	put.Flags().StringVar(&pr.Line, "line", "", "the line the profile belongs to (sets lineId; without one a profile is global, admin only)")
	var sr amlapp.ObjectiveShowRequest
	show := opCommand(a, &cobra.Command{Use: "show ID", Short: "Show an objective profile with its hash", Args: argsExact(1)}, "objective.show", "", &sr,
		func(args []string) error { sr.ID = args[0]; return nil })
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
		Args:  argsExact(0),
	}
	opCommand(a, cmd, "trial.run", "as", &req, func([]string) error {
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
	})
	f := cmd.Flags()
	f.StringVar(&req.Model, "model", "", "twin model (format aml.hybrid/1)")
	f.StringVar(&req.Snapshot, "snapshot", "", "snapshot to start from (aml twin snapshot take)")
	f.StringVar(&req.Objective, "objective", "", "objective profile (default: the scene's first)")
	f.StringArrayVar(&sets, "set", nil, "CONTROL=VALUE moved at step 0 and held (repeatable)")
	f.StringVar(&candidates, "candidate", "", "JSON file with the full control trajectory")
	asFlag(f, "author (default $USER)")
	return cmd
}

func newTwinOptimizeCmd(a *app) *cobra.Command {
	req := amlapp.OptimizeRequest{Mode: amlapp.ModeAuto, Seed: 1}
	cmd := &cobra.Command{
		Use:   "optimize --model ID --snapshot ID [--mode auto|safe_small_step|precise_search] [--objective ID]",
		Short: "Search the setpoint move with the lowest cost that passes constraints, UQ and OOD; store its trial",
		Args:  argsExact(0),
	}
	opCommand(a, cmd, "optimize", "as", &req, func([]string) error {
		if req.Model == "" || req.Snapshot == "" {
			return usagef("--model and --snapshot are required")
		}
		switch req.Mode {
		case "", amlapp.ModeAuto, amlapp.ModeSafeSmallStep, amlapp.ModePreciseSearch:
			return nil
		}
		return usagef("--mode %q: want auto, %s or %s", req.Mode, amlapp.ModeSafeSmallStep, amlapp.ModePreciseSearch)
	})
	f := cmd.Flags()
	f.StringVar(&req.Model, "model", "", "twin model (format aml.hybrid/1)")
	f.StringVar(&req.Snapshot, "snapshot", "", "snapshot to start from")
	f.StringVar(&req.Objective, "objective", "", "objective profile (default: the scene's first)")
	f.StringVar(&req.Mode, "mode", req.Mode, "auto, safe_small_step or precise_search")
	f.Uint64Var(&req.Seed, "seed", req.Seed, "seed of the search order")
	f.IntVar(&req.MaxCandidates, "max-candidates", 0, "candidates to evaluate at most (default 200)")
	asFlag(f, "author (default $USER)")
	return cmd
}

func newTwinGateCmd(a *app) *cobra.Command {
	req := amlapp.GateEvaluateRequest{Snapshots: amlapp.DefaultGateSnapshots, Seed: 1}
	var scene string
	cmd := &cobra.Command{
		Use:   "gate --model ID --scene ID[@VERSION] [--snapshots 12] [--profile twin-v3]",
		Short: "Evaluate the twin acceptance gate with measured inputs (evaluation, fresh trials, shadow evidence) and store it",
		Args:  argsExact(0),
	}
	opCommand(a, cmd, "gate.evaluate", "as", &req, func([]string) error {
		if req.Model == "" || scene == "" {
			return usagef("--model and --scene are required")
		}
		req.Scene, req.SceneVersion, _ = strings.Cut(scene, "@")
		return nil
	})
	f := cmd.Flags()
	f.StringVar(&req.Model, "model", "", "twin model")
	f.StringVar(&scene, "scene", "", "scene id, optionally @version")
	f.StringVar(&req.Objective, "objective", "", "objective profile (default: the scene's first)")
	f.IntVar(&req.Snapshots, "snapshots", req.Snapshots, "replayed snapshots (one trial each)")
	f.StringVar(&req.Profile, "profile", "", "twin acceptance profile (default twin-v3)")
	asFlag(f, "actor (default $USER)")
	f.Uint64Var(&req.Seed, "seed", req.Seed, "seed of the optimiser's search order")
	return cmd
}

func newGateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "gate", Short: "Acceptance gates: the published profiles and their rules"}
	var req amlapp.GateProfilesRequest
	cmd.AddCommand(opCommand(a, &cobra.Command{Use: "profiles", Short: "List the model and twin gate profiles with their rules and thresholds", Args: argsExact(0)},
		"gate.profiles", "", &req, nil))
	return cmd
}
