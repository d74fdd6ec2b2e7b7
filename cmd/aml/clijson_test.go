package main

//go:generate go test -run TestCLIJSONDoc -update-cli-json .

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/spf13/cobra"
)

var updateCLIJSON = flag.Bool("update-cli-json", false, "rewrite the generated tables of docs/cli-json.md")

// cliJSONNotes says where a command prints something other than its op's
// answer through a.show (the rule of docs/cli-json.md).
var cliJSONNotes = map[string]string{
	"audit.list":       "page with `--after` the last item's `seq` (the answer's `nextAfter` is not printed)",
	"cert.execute":     "the result is printed also when the execution failed (exit 1, no error document)",
	"cert.verify":      "the report is printed also when verification failed (exit 1, no error document)",
	"ingest.csv":       "`aml ingest csv FILE...` prints one object for all files: `{\"files\": [ingest.FileReport...], \"samples\", \"seconds\"}`",
	"line.apply":       "with `--from-map MAP --print`: the converted line file, an object (`app.LineApplyRequest`); nothing is applied",
	"job.logs":         "one answer holding the whole log (all pages; with `-f` once the job ended)",
	"job.retry":        "with `--wait`: the job once it ended (exit 1 unless it is done, no error document)",
	"job.submit":       "with `--wait`: the job once it ended (exit 1 unless it is done, no error document)",
	"steptest.execute": "the answer once the test ended (locally it runs in the call; with `--server` followed with `steptest.show`, `execution` then without its samples), printed also when it failed (exit 1, no error document); `--no-wait`: the answer at start (`status` `running`, `test.progress`)",
	"ts.query":         "samples: one `core.Page` object `{node, points: [{tsUs, value, state}], hasMore, nextAfterTsUs}` (times in epoch µs), all pages merged (`--limit` bounds them); `--bucket`: the answer",
}

// cliJSONOther is the --json output of the commands that call no op.
var cliJSONOther = map[string]string{
	"aml bench ident":     "object: the benchmark report (`benchident.Report`)",
	"aml connect mqtt":    "object: the connector's stats when it stops (`mqtt.Stats`)",
	"aml connect opcua":   "object: the connector's stats when it stops (`opcua.Stats`)",
	"aml demo":            "object: the demo's result (`demo.Result`); with `--benefit` the study's (`benefit.Result`: `modes` holds one object per mode with `name`, `meanAbsError`, `inSpecFraction`, `violations`, `approvals`, `writes`, `recalibrationTriggers`, `recalibrations`); the step log is not printed",
	"aml env list":        "array of `envlease.Status` (`[]` for none)",
	"aml env rebuild":     "object: `envlease.RebuildResult`",
	"aml env unlock":      "object: `envlease.UnlockResult`",
	"aml mcp":             "none: stdout is the MCP stdio transport (newline-delimited JSON-RPC messages), whatever `--json`",
	"aml serve":           "none: a server; it logs on stderr until stopped",
	"aml sim injection":   "object: `{line, product, recipe, recipeVersion, contentHash, runs, runsCreated, samples, nodes, seed, csvFiles, seconds}`",
	"aml sim serve-opcua": "object when it stops: `{endpoint, nodes, stats}`",
	"aml worker":          "none: a worker; it logs on stderr until stopped",
}

// cliCallers are the commands that call an op through a.show without
// being routed (they run on the data directory only).
var cliCallers = map[string][]string{
	"cert.key.rotate": {"aml cert rotate-key"},
	"info":            {"aml init"},
}

// typeName is t without the module path ("app.List[core.Node]").
func typeName(t reflect.Type) string {
	return strings.ReplaceAll(t.String(), "github.com/aml-project/aml/internal/", "")
}

// jsonShape prints the zero answer of o as a.show does under --json and
// says what that document is: "array" (a list op's items) or "object".
func jsonShape(t *testing.T, o *amlapp.Op) string {
	t.Helper()
	var b bytes.Buffer
	a := &app{stdout: &b, jsonOut: true}
	rt := o.Resp
	resp := reflect.Zero(rt)
	if rt.Kind() == reflect.Pointer {
		resp = reflect.New(rt.Elem()) // an op answers a record, never nil
	}
	if err := a.show(o.Name, reflect.New(o.Req).Interface(), resp.Interface()); err != nil {
		t.Fatalf("%s: %v", o.Name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b.Bytes()))
	var doc any
	if err := dec.Decode(&doc); err != nil || dec.More() {
		t.Fatalf("%s: --json output is not one JSON document: %v\n%s", o.Name, err, b.String())
	}
	switch doc.(type) {
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	t.Fatalf("%s: --json output is neither an object nor an array: %s", o.Name, b.String())
	return ""
}

// commandsOf maps each op to the commands that call it, and lists the
// runnable commands that are not routed to an op.
func commandsOf() (map[string][]string, []string) {
	byOp := map[string][]string{}
	var other []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.HasParent() {
			if op := c.Annotations[annotOp]; op != "" {
				byOp[op] = append(byOp[op], c.CommandPath())
			} else {
				other = append(other, c.CommandPath())
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot(&app{}))
	for op, cs := range cliCallers {
		byOp[op] = append(byOp[op], cs...)
		other = slices.DeleteFunc(other, func(c string) bool { return slices.Contains(cs, c) })
	}
	return byOp, other
}

// TestCLIJSONDoc: every op's --json output is one JSON document — its
// items array for a list op, else an object — and docs/cli-json.md's
// tables are what the op registry and the command tree generate
// (go generate ./cmd/aml rewrites them).
func TestCLIJSONDoc(t *testing.T) {
	byOp, other := commandsOf()
	var ops bytes.Buffer
	ops.WriteString("| op | command | answer type | `--json` prints | note |\n|---|---|---|---|---|\n")
	for _, o := range amlapp.Ops() {
		shape := jsonShape(t, o)
		isList := false
		if rt := o.Resp; rt.Kind() == reflect.Struct {
			f, ok := rt.FieldByName("Items")
			isList = ok && f.Type.Kind() == reflect.Slice
			if isList {
				shape = "array of `" + typeName(f.Type.Elem()) + "`"
			}
		}
		if isList != strings.HasPrefix(shape, "array") {
			t.Errorf("%s: --json prints %s for an answer of type %s", o.Name, shape, typeName(o.Resp))
		}
		if !isList {
			shape = "object"
		}
		cmds := "—"
		if c := byOp[o.Name]; len(c) > 0 {
			cmds = "`" + strings.Join(c, "`, `") + "`"
		}
		fmt.Fprintf(&ops, "| `%s` | %s | `%s` | %s | %s |\n", o.Name, cmds, typeName(o.Resp), shape, cliJSONNotes[o.Name])
	}
	for op := range cliJSONNotes {
		if _, ok := amlapp.Lookup(op); !ok {
			t.Errorf("cliJSONNotes: no op %q", op)
		}
	}
	want := map[string]bool{}
	for _, c := range other {
		want[c] = true
		if _, ok := cliJSONOther[c]; !ok {
			t.Errorf("%s calls no op through a.show: say what its --json output is in cliJSONOther", c)
		}
	}
	var keys []string
	for c := range cliJSONOther {
		if !want[c] {
			t.Errorf("cliJSONOther: no command %q", c)
		}
		keys = append(keys, c)
	}
	sort.Strings(keys)
	var cmds bytes.Buffer
	cmds.WriteString("| command | `--json` prints |\n|---|---|\n")
	for _, c := range keys {
		fmt.Fprintf(&cmds, "| `%s` | %s |\n", c, cliJSONOther[c])
	}

	path := filepath.Join("..", "..", "docs", "cli-json.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(doc)
	for _, s := range []struct{ name, body string }{{"ops", ops.String()}, {"commands", cmds.String()}} {
		begin := "<!-- BEGIN " + s.name + " (generated by go generate ./cmd/aml; do not edit) -->\n"
		end := "<!-- END " + s.name + " -->"
		i, j := strings.Index(got, begin), strings.Index(got, end)
		if i < 0 || j < i {
			t.Fatalf("%s: no %q ... %q section", path, begin, end)
		}
		got = got[:i+len(begin)] + s.body + got[j:]
	}
	if *updateCLIJSON {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(doc) {
		t.Errorf("%s is out of date: run go generate ./cmd/aml", path)
	}
}
