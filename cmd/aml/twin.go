package main

import (
	"io"
	"os"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/spf13/cobra"
)

func newTwinCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "twin", Short: "Digital twin contracts"}
	scene := &cobra.Command{Use: "scene", Short: "Store, freeze, show and list scene contracts"}
	cmd.AddCommand(scene, newTwinSnapshotCmd(a), newTwinShadowCmd(a), newTwinCalibrateCmd(a))
	cmd.AddCommand(newTwinObjectiveCmd(a), newTwinTrialCmd(a), newTwinOptimizeCmd(a), newTwinGateCmd(a), newTwinEnvelopeCmd(a), newTwinStepTestCmd(a))

	var (
		pr     amlapp.ScenePutRequest
		defInj bool
	)
	put := &cobra.Command{
		Use:   "put FILE | --default-injection",
		Short: "Store a scene file or contract (YAML or JSON) as a draft, with its objective, replacing a draft of the same id and version",
	}
	opCommand(a, put, "scene.put", "as", &pr, func(args []string) error {
		if defInj && len(args) == 0 {
			pr.Preset = amlapp.PresetDefaultInjection
			return nil
		}
		doc, err := docArg(put, args, defInj)
		if err != nil {
			return err
		}
		f, err := contract.ParseSceneFile(doc)
		if err == nil {
			pr.Scene, pr.Objective = f.Scene, f.Objective
		}
		return err
	})
	put.Flags().BoolVar(&defInj, "default-injection", false, "store the built-in injection-moulding scene instead of a file")
	asFlag(put.Flags(), "author (default $USER)")

	var fr amlapp.SceneFreezeRequest
	freeze := &cobra.Command{
		Use:   "freeze ID --version V --expect-hash H [--by PERSON]",
		Short: "Freeze a draft scene (compare-and-set on the hash the approver reviewed)",
		Args:  argsExact(1),
	}
	opCommand(a, freeze, "scene.freeze", "as", &fr, func(args []string) error {
		fr.ID = args[0]
		if fr.Version == "" || fr.ExpectHash == "" {
			return usagef("%s: --version and --expect-hash are required", freeze.CommandPath())
		}
		return nil
	})
	freeze.Flags().StringVar(&fr.Version, "version", "", "scene version (MAJOR.MINOR.PATCH)")
	freeze.Flags().StringVar(&fr.ExpectHash, "expect-hash", "", "the content hash the approver reviewed")
	asFlag(freeze.Flags(), "the approver (default $USER)")

	var sr amlapp.SceneShowRequest
	show := opCommand(a, &cobra.Command{Use: "show ID [--version V]", Short: "Show a scene contract (latest version unless --version); --json prints {scene, hash}", Args: argsExact(1)},
		"scene.show", "", &sr, func(args []string) error { sr.ID = args[0]; return nil })
	show.Flags().StringVar(&sr.Version, "version", "", "scene version (default: the latest)")

	var lr amlapp.SceneListRequest
	list := opCommand(a, &cobra.Command{Use: "list [--line L]", Short: "List scene contracts with their status and hash", Args: argsExact(0)}, "scene.list", "", &lr, nil)
	list.Flags().StringVar(&lr.Line, "line", "", "only scenes of this line")
	var dr amlapp.SceneDraftRequest
	draft := opCommand(a, &cobra.Command{Use: "init --model ID [--id SCENE]", Short: "Draft a scene file (YAML: scene + objective) from a model, to edit, check and put", Args: argsExact(0)}, "scene.draft", "", &dr, nil)
	draft.Flags().StringVar(&dr.Model, "model", "", "the model (required)")
	draft.Flags().StringVar(&dr.ID, "id", "", "scene id (default: LINE-MODEL)")
	var cr amlapp.SceneCheckRequest
	check := &cobra.Command{Use: "check FILE [--model ID] [--bind var=node]...", Short: "Check a scene file: contract, bindings to the line's nodes, fit to a model; every problem at once", Args: argsExact(1)}
	opCommand(a, check, "scene.check", "", &cr, func(args []string) error {
		b, err := readArg(check, args[0])
		cr.Document = string(b)
		return err
	})
	check.Flags().StringVar(&cr.Model, "model", "", "also check the fit to this model (default: the objective's twinModelId)")
	check.Flags().StringToStringVar(&cr.Bindings, "bind", nil, "bind a variable to a node (var=node), as snapshot take")
	scene.AddCommand(put, freeze, show, list, draft, check)
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
