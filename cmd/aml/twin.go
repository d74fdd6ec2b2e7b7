package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/spf13/cobra"
)

// sceneResult is the --json output of scene put and freeze.
type sceneResult struct {
	SceneID      string `json:"sceneId"`
	SceneVersion string `json:"sceneVersion"`
	LineID       string `json:"lineId"`
	Status       string `json:"status"`
	Hash         string `json:"hash"`
	FrozenBy     string `json:"frozenBy,omitempty"`
	FrozenAt     string `json:"frozenAt,omitempty"`
}

func sceneSummary(c *contract.SceneContract) (sceneResult, error) {
	h, err := c.Hash()
	if err != nil {
		return sceneResult{}, err
	}
	r := sceneResult{SceneID: c.SceneID, SceneVersion: c.SceneVersion, LineID: c.LineID, Status: string(c.Status), Hash: h, FrozenBy: c.FrozenBy}
	if !c.FrozenAt.IsZero() {
		r.FrozenAt = c.FrozenAt.UTC().Format(time.RFC3339)
	}
	return r, nil
}

func newTwinCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "twin", Short: "Digital twin contracts"}
	scene := &cobra.Command{Use: "scene", Short: "Store, freeze and show scene contracts"}
	cmd.AddCommand(scene, newTwinSnapshotCmd(a))
	cmd.AddCommand(newTwinShadowCmd(a), newTwinCalibrateCmd(a))
	cmd.AddCommand(newTwinEngineCmds(a)...)

	var defInj bool
	put := &cobra.Command{
		Use:   "put FILE | --default-injection",
		Short: "Store a scene contract (JSON) as a draft, replacing a draft of the same id and version",
		Long: `Validate the scene contract in FILE ("-" for standard input) and store it
as a draft. A draft with the same scene id and version is replaced; a frozen
one is never changed (AML_SCENE_FROZEN: create a new version). With
--default-injection the built-in injection-moulding scene is stored instead.
Prints the content hash to pass to "aml twin scene freeze --expect-hash".`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c *contract.SceneContract
			switch {
			case defInj && len(args) != 0:
				return usagef("%s: give FILE or --default-injection, not both", cmd.CommandPath())
			case defInj:
				c = contract.DefaultInjectionScene()
			case len(args) != 1:
				return usagef("%s takes 1 argument (FILE) or --default-injection, got %d argument(s)", cmd.CommandPath(), len(args))
			default:
				var data []byte
				var err error
				if args[0] == "-" {
					data, err = io.ReadAll(cmd.InOrStdin())
				} else {
					data, err = os.ReadFile(args[0])
				}
				if err != nil {
					return usagef("read %s: %v", args[0], err)
				}
				if c, err = contract.ParseScene(data); err != nil {
					return err
				}
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			if err := s.PutScene(cmd.Context(), c); err != nil {
				return err
			}
			r, err := sceneSummary(c)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) { printScenePut(w, r) })
		},
	}
	put.Flags().BoolVar(&defInj, "default-injection", false, "store the built-in injection-moulding scene instead of a file")
	scene.AddCommand(put)

	var fVersion, fHash, fBy string
	freeze := &cobra.Command{
		Use:   "freeze ID --version V --expect-hash H [--by PERSON]",
		Short: "Freeze a draft scene (compare-and-set on the hash the approver reviewed)",
		Long: `Freeze the draft scene ID at version V, making it immutable. H is the
content hash the approver reviewed (as printed by put and show); if the
scene changed since, the freeze fails with AML_CONFLICT and nothing changes.
The approver is --by, default $USER. The freeze is recorded in the audit log.`,
		Args: argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fVersion == "" {
				return usagef("%s: --version is required", cmd.CommandPath())
			}
			if fHash == "" {
				return usagef("%s: --expect-hash is required", cmd.CommandPath())
			}
			by := fBy
			if by == "" {
				by = os.Getenv("USER")
			}
			if strings.TrimSpace(by) == "" {
				return usagef("%s: the approver is unknown; set --by or $USER", cmd.CommandPath())
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			c, err := s.FreezeScene(cmd.Context(), args[0], fVersion, by, strings.ToLower(fHash))
			if err != nil {
				return err
			}
			r, err := sceneSummary(c)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) { printSceneFrozen(w, r) })
		},
	}
	freeze.Flags().StringVar(&fVersion, "version", "", "scene version (MAJOR.MINOR.PATCH)")
	freeze.Flags().StringVar(&fHash, "expect-hash", "", "the content hash the approver reviewed")
	freeze.Flags().StringVar(&fBy, "by", "", "the approver (default $USER)")
	scene.AddCommand(freeze)

	var sVersion string
	show := &cobra.Command{
		Use:   "show ID [--version V]",
		Short: "Show a scene contract (latest version unless --version); --json prints the full contract",
		Args:  argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.openStore()
			if err != nil {
				return err
			}
			c, err := s.GetScene(cmd.Context(), args[0], sVersion)
			if err != nil {
				return err
			}
			h, err := c.Hash()
			if err != nil {
				return err
			}
			return a.emit(c, func(w io.Writer) { printScene(w, c, h) })
		},
	}
	show.Flags().StringVar(&sVersion, "version", "", "scene version (default: the latest)")
	scene.AddCommand(show)
	return cmd
}

func fmtBound(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%g", *p)
}

func printScene(w io.Writer, c *contract.SceneContract, hash string) {
	fmt.Fprintf(w, "scene %s version %s  line %s", c.SceneID, c.SceneVersion, c.LineID)
	if c.ProductID != "" {
		fmt.Fprintf(w, "  product %s", c.ProductID)
	}
	if c.RecipeID != "" {
		fmt.Fprintf(w, "  recipe %s", c.RecipeID)
	}
	fmt.Fprintf(w, "\nstatus %s", c.Status)
	if c.Status == contract.SceneFrozen {
		fmt.Fprintf(w, " (by %s at %s)", c.FrozenBy, c.FrozenAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "\nhash %s\ncreated %s by %s\n", hash, c.CreatedAt.UTC().Format(time.RFC3339), c.CreatedBy)
	fmt.Fprintf(w, "phases: %s\nphysics profile: %s\n", strings.Join(c.Phases, ", "), c.PhysicsProfileID)
	if len(c.ObjectiveProfileIDs) > 0 {
		fmt.Fprintf(w, "objective profiles: %s\n", strings.Join(c.ObjectiveProfileIDs, ", "))
	}
	fmt.Fprintf(w, "controls (%d):\n", len(c.Controls))
	for _, v := range c.Controls {
		fmt.Fprintf(w, "  %-24s [%s, %s] %s  maxStep %s  %s\n", v.ID, fmtBound(v.Min), fmtBound(v.Max), v.Unit, fmtBound(v.MaxStep), v.PhysicalMeaning)
	}
	vars := func(title string, vs []contract.SceneVariable) {
		if len(vs) == 0 {
			return
		}
		fmt.Fprintf(w, "%s (%d):\n", title, len(vs))
		for _, v := range vs {
			fmt.Fprintf(w, "  %-24s %-11s [%s, %s] %s  %s\n", v.ID, v.Role, fmtBound(v.Min), fmtBound(v.Max), v.Unit, v.PhysicalMeaning)
		}
	}
	vars("observations", c.Observations)
	vars("states", c.States)
	vars("disturbances", c.Disturbances)
	vars("guards", c.Guards)
	if len(c.Constraints) > 0 {
		fmt.Fprintf(w, "constraints (%d):\n", len(c.Constraints))
		for _, k := range c.Constraints {
			var lim string
			switch k.Kind {
			case contract.KindHardRange:
				lim = fmt.Sprintf("[%s, %s]", fmtBound(k.Min), fmtBound(k.Max))
			case contract.KindMaxDelta:
				lim = "maxDelta " + fmtBound(k.MaxDelta)
			case contract.KindRate:
				lim = "maxRatePerSec " + fmtBound(k.MaxRatePerSec)
			case contract.KindCustom:
				lim = k.Expression
			}
			fmt.Fprintf(w, "  %-24s %-10s %-20s %s\n", k.ID, k.Kind, k.Variable, lim)
		}
	}
	p := c.WritePolicy
	fmt.Fprintf(w, "write policy: min node interval %gs, min line action interval %gs, max actions per run %d\n",
		p.MinNodeIntervalSec, p.MinLineActionIntervalSec, p.MaxActionsPerRun)
	for _, v := range c.Controls {
		if d, ok := p.MaxDeltaPerAction[v.ID]; ok {
			fmt.Fprintf(w, "  max delta per action %-24s %g\n", v.ID, d)
		}
	}
}

func printScenePut(w io.Writer, r sceneResult) {
	fmt.Fprintf(w, "scene %s version %s stored as draft (line %s)\nhash %s\n", r.SceneID, r.SceneVersion, r.LineID, r.Hash)
}

func printSceneFrozen(w io.Writer, r sceneResult) {
	fmt.Fprintf(w, "scene %s version %s frozen by %s at %s\nhash %s\n", r.SceneID, r.SceneVersion, r.FrozenBy, r.FrozenAt, r.Hash)
}
