// Command gen writes docs/errors.md: every registered error code
// (internal/core/codes.go) with its kind, the HTTP status the API answers
// it with (auth.HTTPStatus) and its description. Run it from the module
// root as
//
//	go generate ./internal/core
//
// (or go run ./internal/core/gen -o docs/errors.md); a test fails when the
// committed file differs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

func main() {
	out := flag.String("o", "docs/errors.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, render(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// render is the text of docs/errors.md.
func render() []byte {
	var b bytes.Buffer
	b.WriteString(`# Error codes

<!-- Generated from internal/core/codes.go by "go generate ./internal/core"; do not edit. -->

Every error AML reports carries a stable code: the CLI prints
` + "`error: CODE: message`" + ` on stderr, the API answers
` + "`{\"code\", \"message\", \"field\"}`" + ` with an HTTP status, the web UI shows
the code on its error page and the MCP tools return
` + "`{code, kind, message, field, status, problems}`" + ` as the tool error. Codes are
part of the public contract: one is never renamed or reused, only added.

Each code has one kind, and the kind alone decides the HTTP status (the
API, the web UI and MCP share ` + "`auth.HTTPStatus`" + `) and the CLI's exit
status: 2 for kind ` + "`usage`" + `, 1 for every other error. An error without
an AML code is ` + "`AML_INTERNAL`" + ` (500). The one exception is a request
with a method the route does not allow: ` + "`AML_USAGE`" + ` answered 405.

## Kinds

| Kind | HTTP status | Meaning |
|------|-------------|---------|
`)
	for _, k := range core.Kinds() {
		fmt.Fprintf(&b, "| `%s` | %d | %s |\n", k, auth.HTTPStatus(k), k.Doc())
	}
	b.WriteString(`
## Codes

| Code | Kind | HTTP status | Meaning |
|------|------|-------------|---------|
`)
	for _, c := range core.Codes() {
		fmt.Fprintf(&b, "| `%s` | `%s` | %d | %s |\n", c.Code, c.Kind, auth.HTTPStatus(c.Kind), c.Doc)
	}
	return b.Bytes()
}
