package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/safefile"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// optFloat is a float flag that is "not given" unless set.
type optFloat struct{ p **float64 }

func (o optFloat) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%q is not a finite number", s)
	}
	*o.p = &v
	return nil
}
func (o optFloat) String() string {
	if *o.p == nil {
		return ""
	}
	return strconv.FormatFloat(**o.p, 'g', -1, 64)
}
func (optFloat) Type() string { return "number" }

// optString is a string flag that is "not given" unless set.
type optString struct{ p **string }

func (o optString) Set(s string) error { *o.p = &s; return nil }
func (o optString) String() string {
	if *o.p == nil {
		return ""
	}
	return **o.p
}
func (optString) Type() string { return "string" }

func nodeSpecFlags(fl *pflag.FlagSet, s *amlapp.NodeSpec, writable, readOnly *bool) {
	fl.BoolVar(writable, "writable", false, "a setpoint the twin may write (kind dcw)")
	fl.BoolVar(readOnly, "read-only", false, "a measurement (kind daq)")
	fl.Var(optString{&s.Unit}, "unit", "unit (e.g. degC, bar)")
	fl.Var(optFloat{&s.Min}, "min", "lower end of the normal range")
	fl.Var(optFloat{&s.Max}, "max", "upper end of the normal range")
	fl.Var(optString{&s.Meaning}, "meaning", "what the signal is")
}

func newNodeSetCmd(a *app) *cobra.Command {
	var (
		req                amlapp.NodeSetRequest
		writable, readOnly bool
	)
	cmd := opCommand(a, &cobra.Command{
		Use:   "set NODE --line L [--writable|--read-only] [--unit U] [--min A] [--max B] [--meaning TEXT]",
		Short: "Set a node's metadata: writable (a setpoint) or not, unit, normal range, meaning (audited)",
		Long: `Set what node NODE of line L is; flags left out keep the node's current
value (a node CSV ingest created is a read-only measurement without unit or
range). A snapshot binds a scene's controls only to writable nodes with a
range. Every change is audited with the node before and after. For a whole
line at once use 'aml line apply FILE'.`,
		Args: argsExact(1),
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
	var req amlapp.LineApplyRequest
	apply := opCommand(a, &cobra.Command{
		Use:   "apply FILE",
		Short: "Apply a line file (YAML or JSON): every node's writable flag, unit, range and meaning, in one audited transaction",
		Long: `Apply the line file FILE (YAML, or JSON), e.g.

  line: line-1
  nodes:
    - id: temp_zone1
      unit: degC
      min: 150
      max: 260
      physicalMeaning: barrel temperature, zone 1
    - id: hold_pressure_sp
      unit: bar
      min: 50
      max: 90
      writable: true

A field left out keeps the node's value; nodes not listed are untouched. All
nodes are applied or none; a node of another line is refused. See
docs/line-file.md.`,
		Args: argsExact(1),
	}, "line.apply", "", &req, func(args []string) error {
		b, err := safefile.ReadFile(args[0], 16<<20)
		if err != nil {
			return safefile.Refusal(core.CodeInvalidArgument, err, "line file")
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&req); err != nil {
			return core.FieldErrorf(core.CodeInvalidArgument, "file", "%s: not a line file: %v", args[0], err)
		}
		return nil
	})
	cmd.AddCommand(apply)
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
		Long: `Read the batch records in FILE — a CSV with the columns
run,recipe,recipe_version,start,end,confirmed_by (start and end in epoch ms
or RFC 3339; end may be empty) or a JSON array of {run, recipe,
recipeVersion, start, end, confirmedBy} — and record each: the run's recipe
version is set, an active run is ended, and a context segment confirmed by
the named person is stored and audited. Register the recipe versions first
(aml recipe put). See docs/lineage.md.`,
		Args: argsExact(1),
	}, "run.events", "", &req, func(args []string) error {
		b, err := safefile.ReadFile(args[0], 64<<20)
		if err != nil {
			return safefile.Refusal(core.CodeInvalidArgument, err, "run events file")
		}
		req.Events, err = parseRunEvents(args[0], b)
		return err
	})
	cmd.Flags().StringVar(&req.Line, "line", "", "the runs' line (required)")
	return cmd
}

func parseRunEvents(name string, b []byte) ([]amlapp.RunEvent, error) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		var evs []amlapp.RunEvent
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&evs); err != nil {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "file", "%s: not a JSON array of run events: %v", name, err)
		}
		return evs, nil
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "file", "%s: %v", name, err)
	}
	if len(rows) < 2 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "file", "%s: a header and at least one record are needed", name)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[strings.ToLower(strings.TrimSpace(h))] = i
	}
	for _, need := range []string{"run", "recipe", "recipe_version", "start", "confirmed_by"} {
		if _, ok := col[need]; !ok {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "file", "%s: no column %q (want run,recipe,recipe_version,start,end,confirmed_by)", name, need)
		}
	}
	var out []amlapp.RunEvent
	for i, r := range rows[1:] {
		at := fmt.Sprintf("%s:%d", name, i+2)
		cell := func(c string) string {
			if j, ok := col[c]; ok && j < len(r) {
				return strings.TrimSpace(r[j])
			}
			return ""
		}
		v, err := strconv.Atoi(cell("recipe_version"))
		if err != nil {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, at, "%s: recipe_version %q is not a whole number", at, cell("recipe_version"))
		}
		ev := amlapp.RunEvent{Run: cell("run"), Recipe: cell("recipe"), RecipeVersion: v, ConfirmedBy: cell("confirmed_by")}
		if err := ev.Start.Set(cell("start")); err != nil {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, at, "%s: start: %v", at, err)
		}
		if e := cell("end"); e != "" {
			var end amlapp.Instant
			if err := end.Set(e); err != nil {
				return nil, core.FieldErrorf(core.CodeInvalidArgument, at, "%s: end: %v", at, err)
			}
			ev.End = &end
		}
		out = append(out, ev)
	}
	return out, nil
}
