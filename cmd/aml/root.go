package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/store"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// app carries the global flags and lazily opened resources of one
// invocation.
type app struct {
	dataDir  string
	jsonOut  bool
	logLevel string
	stdout   io.Writer
	stderr   io.Writer
	log      *slog.Logger
	// --db: a postgres:// URL, or empty for SQLite in --data.
	dbURL string
	ctx   context.Context
	// proc opens the deployment's resources on first use (openProc).
	proc *service.Process
	// cmd is the command being run (set before it runs).
	cmd *cobra.Command
	// emitted: the command wrote its result to stdout.
	emitted bool
	// rescueAfter is aml worker --rescue-after (PostgreSQL queue).
	rescueAfter time.Duration
	// remote is --server/--token: the CLI as a client (client.go).
	remote remoteConfig
	// clock stamps what the certificate commands record (issue, approve,
	// revoke, execute); nil is the wall clock. Tests inject a fixed one.
	clock func() time.Time
	// appl runs the use cases on the local data directory (invoke.go).
	appl *amlapp.App
	// lines are this process's governed line writers (aml serve
	// --line-writers; the execute commands' --opcua-endpoint and --map);
	// requireLine: a write on another line is refused (the CLI's flags).
	lines       *opcua.LineWriters
	requireLine bool
}

// demoWall is aml demo's wall clock (nil: time.Now); tests set one.
var demoWall func() time.Time

// now is the CLI's clock (app.clock, else the wall clock).
func (a *app) now() time.Time {
	if a.clock != nil {
		return a.clock()
	}
	return time.Now()
}

// context is the command's context for openers (Background before a
// command runs).
func (a *app) context() context.Context {
	if a.ctx != nil {
		return a.ctx
	}
	return context.Background()
}

// usageError marks a command-line usage problem (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// process is the deployment named by --data and --db; its resources
// open on first use and close when the command ends.
func (a *app) process() *service.Process {
	if a.proc == nil {
		a.proc = service.New(service.Config{DataDir: a.dataDir, DBURL: a.dbURL, Trainers: service.NativeTrainers(testTrainers()), RescueAfter: a.rescueAfter, Log: a.log, Now: a.now})
	}
	return a.proc
}

func (a *app) openStore() (store.Store, error) {
	if err := a.checkDataDir(); err != nil {
		return nil, err
	}
	return a.process().Store(a.context())
}

// creators are the commands that may create a data directory; every
// other command refuses one that does not exist (a typo in --data must
// not answer from an empty store).
var creators = map[string]bool{"init": true, "sim": true, "ingest": true, "demo": true, "serve": true, "worker": true, "token": true}

// checkDataDir refuses a --data that does not exist unless the command
// creates one.
func (a *app) checkDataDir() error {
	if a.cmd == nil || a.dataDir == "" {
		return nil
	}
	top := a.cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	if creators[top.Name()] {
		return nil
	}
	if _, err := os.Stat(a.dataDir); errors.Is(err, fs.ErrNotExist) {
		return core.FieldErrorf(core.CodeNotFound, "data", "data directory %q does not exist (a typo in --data or AML_DATA?); create one with 'aml init --data %s', or by ingesting or simulating into it", a.dataDir, a.dataDir)
	}
	return nil
}

func newInitCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create the data directory and its database (private: 0700), or check an existing one",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := a.openStore(); err != nil {
				return err
			}
			req := amlapp.InfoRequest{}
			resp, err := a.call(cmd, "info", "", &req)
			if err != nil {
				return err
			}
			return a.show("info", &req, resp)
		},
	}
}

// emit prints v as JSON in --json mode, otherwise calls human.
func (a *app) emit(v any, human func(w io.Writer)) error {
	a.emitted = true
	if a.jsonOut {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	human(a.stdout)
	return nil
}

// interactive reports whether progress bars may be drawn.
func (a *app) interactive() bool {
	if a.jsonOut {
		return false
	}
	f, ok := a.stdout.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "aml",
		Short:         "AML turns production-line time series into models and safe setpoint recommendations",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(a.logLevel)); err != nil {
				return usagef("--log-level: %q is not one of debug, info, warn, error", a.logLevel)
			}
			a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl}))
			a.ctx = cmd.Context()
			a.cmd = cmd
			return service.CheckDB(a.dbURL)
		},
	}
	defData := os.Getenv("AML_DATA")
	if defData == "" {
		defData = "./aml-data"
	}
	root.PersistentFlags().StringVar(&a.dataDir, "data", defData, "data directory (env AML_DATA)")
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print a machine-readable JSON result on stdout (and nothing else)")
	root.PersistentFlags().StringVar(&a.dbURL, "db", os.Getenv("AML_DB"), "database: a postgres:// URL (env AML_DB); default the embedded SQLite store in --data")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "warn", "log level: debug, info, warn, error (logs go to stderr)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	root.AddCommand(newIngestCmd(a), newRunsCmd(a), newNodesCmd(a), newTSCmd(a), newSimCmd(a), newDBCmd(a), newDatasetCmd(a), newJobCmd(a), newWorkerCmd(a), newModelCmd(a), newEnvCmd(a), newRetentionCmd(a), newBenchCmd(a), newAuditCmd(a), newTwinCmd(a), newDemoCmd(a))
	root.AddCommand(newCertCmd(a), newChannelCmd(a))
	root.AddCommand(newMCPCmd(a))
	root.AddCommand(newConnectCmd(a))
	root.AddCommand(newTokenCmd(a), newServeCmd(a), newInitCmd(a))
	root.AddCommand(newPhysicsCmd(a), newTrainerCmd(a), newLineCmd(a), newRecipeCmd(a), newGateCmd(a), newBenefitCmd(a))
	a.bindRemote(root) // last: wraps every command added above
	applyHelp(root)
	return root
}

// run executes the CLI and returns the process exit status: 0 success,
// 1 error (one line "error: CODE: message" on stderr), 2 usage error (a
// command-line mistake, or any error whose code is of kind usage).
func run(args []string, stdout, stderr io.Writer) int {
	return runApp(&app{stdout: stdout, stderr: stderr, log: slog.New(slog.NewTextHandler(stderr, nil))}, args)
}

// runApp runs the command line args on a (its writers and clock set).
func runApp(a *app, args []string) int {
	stderr := a.stderr
	root := newRoot(a)
	root.SetArgs(args)
	root.SetOut(a.stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if a.proc != nil {
		if cerr := a.proc.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	if err == nil {
		return 0
	}
	// A flag error stops parsing: --json after it still asks for JSON.
	if !a.jsonOut && slices.Contains(args, "--json") {
		a.jsonOut = true
	}
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		fmt.Fprintf(stderr, "error: %s: %s\n", core.CodeUsage, oneLine(err.Error()))
		fmt.Fprintf(stderr, "run 'aml help' or add --help for usage\n")
		a.jsonError(core.CodeUsage, oneLine(err.Error()), "", nil)
		return 2
	}
	code := core.CodeOf(err)
	msg := err.Error()
	var ae *core.Error
	field, text := "", msg
	var problems []core.Problem
	if errors.As(err, &ae) {
		msg, field, text, problems = ae.Message, ae.Field, ae.Message, ae.Problems
		if f := ae.Field; f != "" && !mentions(msg, f) {
			msg = f + ": " + msg
		}
	}
	if len(problems) > 1 { // one finding per line
		msg = fmt.Sprintf("%d problem(s):", len(problems))
		for _, p := range problems {
			msg += "\n  " + p.Field + ": " + oneLine(p.Message)
		}
	} else {
		msg = oneLine(msg)
	}
	fmt.Fprintf(stderr, "error: %s: %s\n", code, msg)
	a.jsonError(code, text, field, problems)
	if core.KindOf(err) == core.KindUsage {
		return 2
	}
	return 1
}

func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "requires at most", "invalid argument", "required flag", "flag needs an argument"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

// argsExact/argsMin wrap cobra's validators so violations are usage errors.
func argsExact(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

func argsMin(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s needs at least %d argument(s)", cmd.CommandPath(), n)
		}
		return nil
	}
}

// mentions reports whether msg already starts with field or with field
// without its last ":part" (a file:line:col field on a "file:line: ..."
// message), so the CLI does not print the position twice.
func mentions(msg, field string) bool {
	if strings.HasPrefix(msg, field+" ") || strings.HasPrefix(msg, field+":") {
		return true
	}
	if i := strings.LastIndexByte(field, ':'); i > 0 {
		return strings.HasPrefix(msg, field[:i]+":")
	}
	return false
}

// jsonError writes the error as the --json document on stdout,
// {"error": {"code", "message", "field", "problems"}}, unless the command
// already wrote its result there (a verify or execute report says what
// failed); the stderr line is written either way.
func (a *app) jsonError(code, msg, field string, problems []core.Problem) {
	if !a.jsonOut || a.emitted {
		return
	}
	type body struct {
		Code     string         `json:"code"`
		Message  string         `json:"message"`
		Field    string         `json:"field,omitempty"`
		Problems []core.Problem `json:"problems,omitempty"`
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]body{"error": {Code: code, Message: msg, Field: field, Problems: problems}})
}
