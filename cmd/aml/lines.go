package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/app/linemap"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ingest"
	"github.com/aml-project/aml/internal/safefile"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

func parseFinite(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return v, nil
}

func parseText(s string) (string, error) { return s, nil }

func nodeSpecFlags(fl *pflag.FlagSet, s *amlapp.NodeSpec, writable, readOnly *bool) {
	fl.BoolVar(writable, "writable", false, "a setpoint the twin may write (kind dcw)")
	fl.BoolVar(readOnly, "read-only", false, "a measurement (kind daq)")
	fl.Var(opt[string]{&s.Unit, parseText}, "unit", "unit (e.g. degC, bar)")
	fl.Var(opt[float64]{&s.Min, parseFinite}, "min", "lower end of the normal range")
	fl.Var(opt[float64]{&s.Max, parseFinite}, "max", "upper end of the normal range")
	fl.Var(opt[string]{&s.Meaning, parseText}, "meaning", "what the signal is")
}

func newNodeSetCmd(a *app) *cobra.Command {
	var (
		req                amlapp.NodeSetRequest
		writable, readOnly bool
	)
	cmd := opCommand(a, &cobra.Command{
		Use:   "set NODE --line L [--writable|--read-only] [--unit U] [--min A] [--max B] [--meaning TEXT]",
		Short: "Set a node's metadata: writable (a setpoint) or not, unit, normal range, meaning (audited)",
		Args:  argsExact(1),
	}, "node.set", "", &req, func(args []string) error {
		req.ID = args[0]
		if writable && readOnly {
			return usagef("--writable and --read-only exclude each other")
		}
		if writable || readOnly {
			req.Writable = &writable
		}
		return nil
	})
	cmd.Flags().StringVar(&req.Line, "line", "", "the node's line (required)")
	nodeSpecFlags(cmd.Flags(), &req.NodeSpec, &writable, &readOnly)
	return cmd
}

func newLineCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "line", Short: "A line's metadata from a line file"}
	var draft linemap.Draft
	var fromMap, mapKind string
	var printOnly bool
	build := func(args []string) error {
		if len(args) > 1 || (fromMap == "") != (len(args) == 1) || (printOnly && fromMap == "") {
			return usagef("aml line apply takes FILE or --from-map MAP (--print needs --from-map)")
		} else if fromMap != "" {
			d, err := linemap.ReadFile(fromMap, mapKind)
			draft = d
			return err
		}
		b, err := safefile.ReadFile(args[0], 16<<20)
		if err != nil {
			return safefile.Refusal(core.CodeInvalidArgument, err, "line file")
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&draft.Req); err != nil {
			return core.FieldErrorf(core.CodeInvalidArgument, "file", "%s: not a line file: %v", args[0], err)
		}
		return nil
	}
	apply := opCommand(a, &cobra.Command{
		Use:   "apply FILE | --from-map MAP [--map-kind opcua|mqtt] [--print]",
		Short: "Apply a line file (YAML or JSON), or one converted from an OPC UA or MQTT map file: every node's writable flag, unit, range and meaning, in one audited transaction",
	}, "line.apply", "", &draft.Req, build)
	apply.Flags().StringVar(&fromMap, "from-map", "", "convert this OPC UA or MQTT map file (read here, not by the server) into the line file")
	apply.Flags().StringVar(&mapKind, "map-kind", "", "the map file's kind: opcua or mqtt (default: detected)")
	apply.Flags().BoolVar(&printOnly, "print", false, "print the converted line file (YAML) to edit first; apply nothing")
	run := apply.RunE
	apply.RunE = func(c *cobra.Command, args []string) error {
		if !printOnly {
			return run(c, args)
		}
		if err := build(args); err != nil {
			return err
		}
		return a.emit(draft.Req, func(w io.Writer) { _, _ = w.Write(draft.YAML()) })
	}
	cmd.AddCommand(apply, newLineOverviewCmd(a))
	return cmd
}

func newRecipeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "recipe", Short: "Recipe versions: a recipe's parameters, content-hashed"}
	var req amlapp.RecipePutRequest
	put := opCommand(a, &cobra.Command{
		Use:   "put FILE --line L --product P --recipe R",
		Short: "Register a recipe's parameters (a YAML or JSON object in FILE) as its next version; the same content is the same version",
		Args:  argsExact(1),
	}, "recipe.put", "", &req, func(args []string) error {
		b, err := safefile.ReadFile(args[0], 4<<20)
		if err != nil {
			return safefile.Refusal(core.CodeInvalidArgument, err, "recipe file")
		}
		if err := yaml.Unmarshal(b, &req.Params); err != nil {
			return core.FieldErrorf(core.CodeInvalidArgument, "params", "%s: not a parameter object: %v", args[0], err)
		}
		return nil
	})
	put.Flags().StringVar(&req.Line, "line", "", "line id (required)")
	put.Flags().StringVar(&req.Product, "product", "", "product id (required)")
	put.Flags().StringVar(&req.Recipe, "recipe", "", "recipe id (required)")
	cmd.AddCommand(put)
	return cmd
}

// newRunEventsCmd is aml runs events: a plant's batch records from a CSV
// (run,recipe,recipe_version,start,end,confirmed_by) or JSON file.
func newRunEventsCmd(a *app) *cobra.Command {
	var req amlapp.RunEventsRequest
	cmd := opCommand(a, &cobra.Command{
		Use:   "events FILE --line L",
		Short: "Record a plant's batch records (which recipe version each run ran, its end, who confirmed it): the evidence dataset lineage verifies on",
		Args:  argsExact(1),
	}, "run.events", "", &req, func(args []string) error {
		b, err := safefile.ReadFile(args[0], 64<<20)
		if err != nil {
			return safefile.Refusal(core.CodeInvalidArgument, err, "run events file")
		}
		recs, err := ingest.ParseBatchRecords(args[0], b)
		for _, r := range recs {
			ev := amlapp.RunEvent{Run: r.Run, Recipe: r.Recipe, RecipeVersion: r.RecipeVersion, Start: amlapp.Instant(r.StartMs), ConfirmedBy: r.ConfirmedBy}
			if r.EndMs != nil {
				end := amlapp.Instant(*r.EndMs)
				ev.End = &end
			}
			req.Events = append(req.Events, ev)
		}
		return err
	})
	cmd.Flags().StringVar(&req.Line, "line", "", "the runs' line (required)")
	return cmd
}
