package main

import (
	"embed"
	"strings"

	"github.com/spf13/cobra"
)

// The long help of the commands is prose, kept as text files (one per
// command: help/twin-snapshot-take.txt is "aml twin snapshot take"),
// applied to the command tree once it is built.
//
//go:embed help/*.txt
var helpFiles embed.FS

// helpName is the help file of cmd.
func helpName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return "help/aml.txt"
	}
	return "help/" + strings.ReplaceAll(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), " ", "-") + ".txt"
}

// applyHelp sets the long help of every command that has a help file.
func applyHelp(cmd *cobra.Command) {
	if b, err := helpFiles.ReadFile(helpName(cmd)); err == nil {
		cmd.Long = strings.TrimRight(string(b), "\n")
	}
	for _, c := range cmd.Commands() {
		applyHelp(c)
	}
}
