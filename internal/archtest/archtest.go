// Package archtest checks the layering of AML's interfaces: the web UI
// (internal/web) and the CLI (cmd/aml) are adapters over the application
// layer (internal/app), so they import no package that does the work —
// computes, decides, signs, verifies, runs a trial, a gate or an
// optimiser, trains or builds a dataset. Their architecture tests
// (TestWebImportsNoDomainWork, TestCLIImportsNoDomainWork) call
// Violations with their own allowlist. It is imported by tests only.
package archtest

import (
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Module is the module path the import paths below are relative to.
const Module = "github.com/aml-project/aml/"

// WorkPackages are the domain packages (relative to Module) that do work:
// an adapter reaches them through an app op, never by importing them. A
// path ending in "/" covers its subpackages only; any other covers itself
// and its subpackages.
var WorkPackages = []string{
	"internal/dataset",
	"internal/eval",
	"internal/ident/",
	"internal/jobs",
	"internal/registry",
	"internal/trainer",
	"internal/twin/cert",
	"internal/twin/disturb",
	"internal/twin/engine",
	"internal/twin/envelope",
	"internal/twin/gate",
	"internal/twin/govern",
	"internal/twin/guard",
	"internal/twin/recal",
	"internal/twin/shadow",
	"internal/twin/snapshot",
	"internal/twin/steptest",
}

// banned reports whether import path rel (relative to Module) is one of
// WorkPackages.
func banned(rel string) bool {
	for _, b := range WorkPackages {
		if strings.HasSuffix(b, "/") {
			if strings.HasPrefix(rel, b) {
				return true
			}
		} else if rel == b || strings.HasPrefix(rel, b+"/") {
			return true
		}
	}
	return false
}

// Violations parses the non-test files among files and returns one message
// per import of a work package that allow does not list — allow is keyed
// "FILE PATH" (FILE as given, slash-separated; PATH relative to Module)
// with the reason as value — and one per allow entry that matches no
// import any more (a stale exception). The messages are sorted.
func Violations(files []string, allow map[string]string) ([]string, error) {
	fset := token.NewFileSet()
	seen := map[string]bool{}
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return nil, err
			}
			rel, ok := strings.CutPrefix(path, Module)
			if !ok || !banned(rel) {
				continue
			}
			key := filepath.ToSlash(name) + " " + rel
			seen[key] = true
			if _, ok := allow[key]; !ok {
				out = append(out, fmt.Sprintf("%s imports %s, which does the work itself: call an app op (or list %q with the reason)", name, path, key))
			}
		}
	}
	for k := range allow {
		if !seen[k] {
			out = append(out, fmt.Sprintf("the allowlist names %q, which is no longer imported: remove it", k))
		}
	}
	sort.Strings(out)
	return out, nil
}
