package main

import (
	"path/filepath"
	"testing"

	"github.com/aml-project/aml/internal/archtest"
)

// cliWorkImports are the imports of a work-doing domain package
// (archtest.WorkPackages) the CLI still has, keyed "FILE PATH", each with
// why it cannot go through an op.
var cliWorkImports = map[string]string{}

// TestCLIImportsNoDomainWork: the CLI's commands are adapters over the
// app ops (local mode and --server give the same answer, with role, line
// scope and limits enforced once): no non-test file imports a work-doing
// domain package unless cliWorkImports lists it with its reason.
func TestCLIImportsNoDomainWork(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := archtest.Violations(files, cliWorkImports)
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range got {
		t.Error(msg)
	}
}
