package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Under --json an error is stdout's one JSON document,
// {"error": {"code", "message", "field"}} — usage errors too — and the
// stderr line stays for people.
func TestJSONErrors(t *testing.T) {
	d := t.TempDir()
	for _, c := range []struct {
		name  string
		args  []string
		exit  int
		code  string
		field string
	}{
		{"not found", []string{"model", "show", "nope"}, 1, "AML_NOT_FOUND", "model"},
		{"usage", []string{"model", "show"}, 2, "AML_USAGE", ""},
		{"unknown flag", []string{"model", "list", "--nope"}, 2, "AML_USAGE", ""},
		{"bad flag value", []string{"cert", "list", "--status", "dancing"}, 2, "AML_USAGE", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := aml(t, append(c.args, "--data", d, "--json")...)
			if code != c.exit || !strings.HasPrefix(errs, "error: "+c.code+": ") {
				t.Fatalf("exit %d stderr %q", code, errs)
			}
			var doc map[string]struct{ Code, Message, Field string }
			dec := json.NewDecoder(strings.NewReader(out))
			if err := dec.Decode(&doc); err != nil || dec.More() {
				t.Fatalf("stdout is not one JSON document: %v %q", err, out)
			}
			e, ok := doc["error"]
			if !ok || len(doc) != 1 || e.Code != c.code || e.Message == "" || e.Field != c.field {
				t.Fatalf("document %q", out)
			}
		})
	}
}

// One spelling for who acts: every command with an actor flag takes --as
// (--by is only the hidden older spelling of the same value), and the
// commands that change a model's stage take it too.
func TestActorFlagIsAs(t *testing.T) {
	root := newRoot(&app{})
	var walk func(c *cobra.Command)
	seen := map[string]bool{}
	walk = func(c *cobra.Command) {
		if by := c.Flags().Lookup("by"); by != nil {
			as := c.Flags().Lookup("as")
			if as == nil || !by.Hidden || as.Value != by.Value {
				t.Errorf("%s: --by without --as sharing its value", c.CommandPath())
			}
		}
		if c.Flags().Lookup("as") != nil {
			seen[c.CommandPath()] = true
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	for _, want := range []string{"aml model promote", "aml model retire", "aml twin scene freeze", "aml cert approve", "aml twin optimize"} {
		if !seen[want] {
			t.Errorf("%s has no --as", want)
		}
	}
}
