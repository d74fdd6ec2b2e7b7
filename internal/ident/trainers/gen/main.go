// Command gen writes docs/trainers.md: every native trainer
// (trainers.All()) with its summary, model formats and a table of its
// params, from the schema each trainer infers from its params struct
// (trainer.Described). Run it from the module root as
//
//	go generate ./internal/ident/trainers
//
// (or go run ./internal/ident/trainers/gen -o docs/trainers.md); a test
// fails when the committed file differs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/trainer"
)

func main() {
	out := flag.String("o", "docs/trainers.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, render(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// render is the text of docs/trainers.md.
func render() []byte {
	var b bytes.Buffer
	b.WriteString(`# Native trainers

<!-- Generated from the params structs in internal/ident/trainers by "go generate ./internal/ident/trainers"; do not edit. -->

A training job names its trainer and passes it params, a JSON object
(` + "`aml job submit --trainer REF --params '{...}'`" + `, op ` + "`job.submit`" + `). For
a native trainer, ` + "`job.submit`" + ` and ` + "`job.retry`" + ` check the params against
the trainer's JSON schema before the job is queued: an unknown field (the
message lists the known ones), a value of the wrong type, outside its range
or not among the allowed values is refused with ` + "`AML_INVALID_ARGUMENT`" + `
naming the field as ` + "`params.<name>`" + `. Every param is optional unless marked
required; an absent one takes its default (for several, 0 also means the
default, as the description says).

The schema of one trainer: ` + "`aml trainer show REF`" + ` (a table; with ` + "`--json`" + ` the
answer carries the schema as ` + "`params`" + `), ` + "`GET /api/v1/trainers/{ref}`" + `, op ` + "`trainer.show`" + ` (MCP tool
` + "`aml_trainer_show`" + `). ` + "`aml trainer list`" + ` names each native trainer's params.

External trainers (` + "`ext:NAME`" + `, ` + "`exec:PATH`" + `, docs/external-trainer.md)
define their own params: AML passes them through unvalidated.
`)
	ts := trainers.All()
	sort.Slice(ts, func(i, j int) bool { return ts[i].Ref() < ts[j].Ref() })
	for _, t := range ts {
		d, ok := t.(trainer.Described)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s.\n\nModel format: %s.\n\n", t.Ref(), capitalise(d.Summary()), "`"+strings.Join(d.Formats(), "`, `")+"`")
		b.WriteString("| Param | Type | Default | Range | Description |\n|-------|------|---------|-------|-------------|\n")
		for _, r := range trainer.ParamRows(d.ParamSchema()) {
			def := code(r.Default)
			if r.Required {
				def = "required"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.Name, cell(r.Type), def, cell(r.Range), cell(r.Description))
		}
	}
	return b.Bytes()
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func code(s string) string {
	if s == "" {
		return "–"
	}
	return "`" + s + "`"
}

func cell(s string) string {
	if s == "" {
		return "–"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
