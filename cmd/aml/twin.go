package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/spf13/cobra"
)

func newTwinCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "twin", Short: "Digital twin contracts"}
	scene := &cobra.Command{Use: "scene", Short: "Store, freeze, show and list scene contracts"}
	cmd.AddCommand(scene, newTwinSnapshotCmd(a), newTwinShadowCmd(a), newTwinCalibrateCmd(a))
	cmd.AddCommand(newTwinObjectiveCmd(a), newTwinTrialCmd(a), newTwinOptimizeCmd(a), newTwinGateCmd(a))

	var (
		pr     amlapp.ScenePutRequest
		defInj bool
	)
	put := &cobra.Command{
		Use:   "put FILE | --default-injection",
		Short: "Store a scene contract (JSON) as a draft, replacing a draft of the same id and version",
		Long: `Validate the scene contract in FILE ("-" for standard input) and store it
as a draft, authored by whoever stores it. A draft with the same scene id and
version is replaced; a frozen one is never changed (AML_SCENE_FROZEN: create
a new version). With --default-injection the built-in injection-moulding
scene is stored instead. Prints the content hash to pass to
"aml twin scene freeze --expect-hash".`,
	}
	opCommand(a, put, "scene.put", "", &pr, func(args []string) error {
		if defInj && len(args) == 0 {
			pr.Preset = amlapp.PresetDefaultInjection
			return nil
		}
		doc, err := docArg(put, args, defInj)
		if err != nil {
			return err
		}
		pr.Scene, err = contract.ParseScene(doc)
		return err
	}, printScenePut)
	put.Flags().BoolVar(&defInj, "default-injection", false, "store the built-in injection-moulding scene instead of a file")

	var fr amlapp.SceneFreezeRequest
	freeze := &cobra.Command{
		Use:   "freeze ID --version V --expect-hash H [--by PERSON]",
		Short: "Freeze a draft scene (compare-and-set on the hash the approver reviewed)",
		Long: `Freeze the draft scene ID at version V, making it immutable. H is the
content hash the approver reviewed (as printed by put and show); if the
scene changed since, the freeze fails with AML_CONFLICT and nothing changes.
The approver is --by, default $USER (with --server: the token's owner). The
freeze is recorded in the audit log.`,
		Args: argsExact(1),
	}
	opCommand(a, freeze, "scene.freeze", "by", &fr, func(args []string) error {
		fr.ID = args[0]
		if fr.Version == "" || fr.ExpectHash == "" {
			return usagef("%s: --version and --expect-hash are required", freeze.CommandPath())
		}
		return nil
	}, printSceneFrozen)
	freeze.Flags().StringVar(&fr.Version, "version", "", "scene version (MAJOR.MINOR.PATCH)")
	freeze.Flags().StringVar(&fr.ExpectHash, "expect-hash", "", "the content hash the approver reviewed")
	freeze.Flags().String("by", "", "the approver (default $USER)")

	var sr amlapp.SceneShowRequest
	show := opCommand(a, &cobra.Command{Use: "show ID [--version V]", Short: "Show a scene contract (latest version unless --version); --json prints {scene, hash}", Args: argsExact(1)},
		"scene.show", "", &sr, func(args []string) error { sr.ID = args[0]; return nil }, printScene)
	show.Flags().StringVar(&sr.Version, "version", "", "scene version (default: the latest)")

	var lr amlapp.SceneListRequest
	list := listCommand(a, &cobra.Command{Use: "list [--line L]", Short: "List scene contracts with their status and hash", Args: argsExact(0)}, "scene.list", &lr, nil, printScenes)
	list.Flags().StringVar(&lr.Line, "line", "", "only scenes of this line")
	scene.AddCommand(put, freeze, show, list)
	return cmd
}

// docArg reads the document FILE of a put command given without its
// preset flag.
func docArg(cmd *cobra.Command, args []string, preset bool) ([]byte, error) {
	if preset || len(args) != 1 {
		return nil, usagef("%s takes FILE or --default-injection (not both)", cmd.CommandPath())
	}
	return readArg(cmd, args[0])
}

// readArg reads FILE, "-" for standard input (a path on this machine, also
// with --server: the parsed document is sent).
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

func printScene(w io.Writer, r amlapp.SceneShowResponse) {
	c := r.Scene
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
	fmt.Fprintf(w, "\nhash %s\ncreated %s by %s\n", r.Hash, c.CreatedAt.UTC().Format(time.RFC3339), c.CreatedBy)
	fmt.Fprintf(w, "phases: %s\nphysics profile: %s\n", strings.Join(c.Phases, ", "), c.PhysicsProfileID)
	if len(c.ObjectiveProfileIDs) > 0 {
		fmt.Fprintf(w, "objective profiles: %s\n", strings.Join(c.ObjectiveProfileIDs, ", "))
	}
	fmt.Fprintf(w, "controls (%d):\n", len(c.Controls))
	for _, v := range c.Controls {
		fmt.Fprintf(w, "  %-24s [%s, %s] %s  maxStep %s  %s\n", v.ID, fmtOpt(v.Min), fmtOpt(v.Max), v.Unit, fmtOpt(v.MaxStep), v.PhysicalMeaning)
	}
	vars := func(title string, vs []contract.SceneVariable) {
		if len(vs) == 0 {
			return
		}
		fmt.Fprintf(w, "%s (%d):\n", title, len(vs))
		for _, v := range vs {
			fmt.Fprintf(w, "  %-24s %-11s [%s, %s] %s  %s\n", v.ID, v.Role, fmtOpt(v.Min), fmtOpt(v.Max), v.Unit, v.PhysicalMeaning)
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
				lim = fmt.Sprintf("[%s, %s]", fmtOpt(k.Min), fmtOpt(k.Max))
			case contract.KindMaxDelta:
				lim = "maxDelta " + fmtOpt(k.MaxDelta)
			case contract.KindRate:
				lim = "maxRatePerSec " + fmtOpt(k.MaxRatePerSec)
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

func printScenePut(w io.Writer, r amlapp.SceneSummary) {
	fmt.Fprintf(w, "scene %s version %s stored as draft (line %s)\nhash %s\n", r.SceneID, r.SceneVersion, r.LineID, r.Hash)
}

func printSceneFrozen(w io.Writer, r amlapp.SceneSummary) {
	fmt.Fprintf(w, "scene %s version %s frozen by %s at %s\nhash %s\n", r.SceneID, r.SceneVersion, r.FrozenBy, r.FrozenAt, r.Hash)
}

func printScenes(w io.Writer, l []amlapp.SceneSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENE\tVERSION\tLINE\tSTATUS\tHASH")
	for _, s := range l {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.16s…\n", s.SceneID, s.SceneVersion, s.LineID, s.Status, s.Hash)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d scene(s)\n", len(l))
}
