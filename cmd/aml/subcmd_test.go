package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// subCLI runs one command tree built by mk under a minimal root that
// declares --json the way the real root does, and returns stdout, stderr
// and the command's error (tests that need the error value itself, not
// only the exit status run() maps it to).
// subCLIClock is the clock of the commands subCLI runs (nil: the wall
// clock); a test that sets it restores it with t.Cleanup.
var subCLIClock func() time.Time

func subCLI(t *testing.T, d string, mk func(*app) *cobra.Command, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{dataDir: d, stdout: &out, stderr: &errb, clock: subCLIClock}
	root := &cobra.Command{Use: "aml", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	sub := mk(a)
	root.AddCommand(sub)
	root.SetArgs(append([]string{sub.Name()}, args...))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	if a.proc != nil {
		if err := a.proc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.String(), errb.String(), err
}
