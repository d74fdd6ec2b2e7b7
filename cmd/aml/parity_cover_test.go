package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryRoutedCommandHasParity: every command that calls an op (and so
// runs locally or with --server) appears in a --server parity test, which
// compares its --json document on a local data dir and through a server
// over a copy of it. A new routed command without a parity case fails here.
func TestEveryRoutedCommandHasParity(t *testing.T) {
	var src strings.Builder
	for _, f := range []string{"client_test.go", "client_twin_test.go", "client_more_test.go", "client_cert_test.go", "connect_remote_test.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	all := src.String()
	root := newRoot(&app{})
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Annotations[annotOp] == "" {
			return
		}
		n++
		path := strings.TrimPrefix(c.CommandPath(), "aml ")
		args := `"` + strings.ReplaceAll(path, " ", `", "`) + `"`
		if !strings.Contains(all, args) && !strings.Contains(all, `both("`+path) {
			t.Errorf("aml %s (op %s) has no --server parity case", path, c.Annotations[annotOp])
		}
	}
	walk(root)
	if n < 50 {
		t.Fatalf("only %d routed commands found", n)
	}
}
