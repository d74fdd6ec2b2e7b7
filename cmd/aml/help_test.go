package main

import (
	"io/fs"
	"testing"

	"github.com/spf13/cobra"
)

// Every help file belongs to a command (a renamed command cannot leave
// its help behind), and the commands that need one have it.
func TestHelpFiles(t *testing.T) {
	root := newRoot(&app{})
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		names[helpName(c)] = true
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	files, err := fs.Glob(helpFiles, "help/*.txt")
	if err != nil || len(files) < 39 {
		t.Fatalf("%d help files: %v", len(files), err)
	}
	for _, f := range files {
		if !names[f] {
			t.Errorf("%s is the help of no command", f)
		}
	}
	for _, path := range [][]string{{"twin", "snapshot", "take"}, {"cert", "execute"}, {"line", "apply"}, {"ingest", "csv"}} {
		c, _, err := root.Find(path)
		if err != nil || len(c.Long) < 100 {
			t.Errorf("%v: no long help", path)
		}
	}
}
