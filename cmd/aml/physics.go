package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/physics"
	"github.com/aml-project/aml/internal/safefile"
	"github.com/spf13/cobra"
)

// readPhysicsFile reads a physics model file on this machine (the person
// running the CLI names it): a regular file of at most the source limit.
func readPhysicsFile(path string) ([]byte, error) {
	b, err := safefile.ReadFile(path, physics.MaxSourceBytes)
	if err != nil {
		return nil, safefile.Refusal(core.CodeInvalidArgument, err, "physics model file")
	}
	return b, nil
}

func newPhysicsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "physics", Short: "Stored physics models (.aml): put, list, show"}
	var pr amlapp.PhysicsPutRequest
	put := opCommand(a, &cobra.Command{
		Use:   "put FILE",
		Short: "Store a physics model: validated, hashed; trainer params name it by id",
		Args:  argsExact(1),
	}, "physics.put", "", &pr, func(args []string) error {
		b, err := readPhysicsFile(args[0])
		if err != nil {
			return err
		}
		pr.Source, pr.FileName = string(b), filepath.Base(args[0])
		return nil
	})
	var lr amlapp.PhysicsListRequest
	list := opCommand(a, &cobra.Command{Use: "list", Short: "List stored physics models", Args: argsExact(0)}, "physics.list", "", &lr, nil)
	var sr amlapp.PhysicsRequest
	show := opCommand(a, &cobra.Command{Use: "show ID", Short: "A stored physics model with its source", Args: argsExact(1)}, "physics.show", "", &sr, arg0(&sr.ID))
	cmd.AddCommand(put, list, show)
	return cmd
}

// uploadPhysicsParam replaces a physics parameter naming a file on this
// machine by the id of its stored content (physics.put): a person at the
// machine may keep naming a local file, which goes through the upload.
func (a *app) uploadPhysicsParam(cmd *cobra.Command, params json.RawMessage) (json.RawMessage, error) {
	if len(params) == 0 {
		return params, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return params, nil
	}
	var ref string
	if raw, ok := m["physics"]; !ok || json.Unmarshal(raw, &ref) != nil || ref == "" || strings.HasPrefix(ref, core.PhysicsIDPrefix) {
		return params, nil
	}
	b, err := readPhysicsFile(ref)
	if err != nil {
		return nil, err
	}
	var pm core.PhysicsModel
	if err := a.invoke(cmd, "physics.put", "", &amlapp.PhysicsPutRequest{Source: string(b), FileName: filepath.Base(ref)}, &pm); err != nil {
		return nil, err
	}
	m["physics"], _ = json.Marshal(pm.ID)
	return json.Marshal(m)
}

func newTrainerCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "trainer", Short: "Trainers: list them, show one's params; register an external trainer (admin)"}
	var rr amlapp.TrainerRegisterRequest
	register := opCommand(a, &cobra.Command{
		Use:   "register NAME --exec PATH [--env VAR]...",
		Short: "Register an external trainer program under NAME (admin; audited); jobs name it ext:NAME",
		Args:  argsExact(1),
	}, "trainer.register", "", &rr, func(args []string) error {
		rr.Name = args[0]
		if rr.Exec != "" && !filepath.IsAbs(rr.Exec) && a.remote.server == "" {
			abs, err := filepath.Abs(rr.Exec)
			if err != nil {
				return err
			}
			rr.Exec = abs
		}
		return nil
	})
	fl := register.Flags()
	fl.StringVar(&rr.Exec, "exec", "", "the program's path (required; made absolute locally)")
	fl.StringSliceVar(&rr.Env, "env", nil, "parent environment variables passed to the program (repeatable)")
	var lr amlapp.TrainerListRequest
	list := opCommand(a, &cobra.Command{Use: "list", Short: "List native and registered external trainers", Args: argsExact(0)}, "trainer.list", "", &lr, nil)
	var sr amlapp.TrainerShowRequest
	show := opCommand(a, &cobra.Command{
		Use:   "show NAME",
		Short: "A trainer: kind, model formats and a table of its params (--json: with their JSON schema)",
		Args:  argsExact(1),
	}, "trainer.show", "", &sr, func(args []string) error { sr.Name = args[0]; return nil })
	cmd.AddCommand(register, list, show)
	return cmd
}

// appOptions are the application's options for this process. The work
// budget of dataset builds is AML_MAX_DATASET_CELLS when set (grid cells,
// default 50 000 000), their quotas AML_MAX_DATASET_WINDOWS (default
// 200 000) and AML_MAX_DATASET_MIB (default 4096): what a request over
// the API or MCP may ask for at most.
func (a *app) appOptions() amlapp.Options {
	o := amlapp.Options{Now: a.now, Version: version, RequireLineWriter: a.requireLine}
	if a.lines != nil {
		o.LineWriters = a.lines
	}
	if v := os.Getenv("AML_MAX_DATASET_CELLS"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			o.MaxDatasetCells = n
		}
	}
	if v := os.Getenv("AML_MAX_DATASET_WINDOWS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			o.MaxDatasetWindows = n
		}
	}
	if v := os.Getenv("AML_MAX_DATASET_MIB"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			o.MaxDatasetBytesMiB = n
		}
	}
	return o
}
