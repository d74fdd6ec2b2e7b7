package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestErrorsDocUpToDate: docs/errors.md is what the registry generates.
func TestErrorsDocUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "errors.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: generate it with go generate ./internal/core", err)
	}
	if want := render(); !bytes.Equal(got, want) {
		t.Fatalf("docs/errors.md differs from the registry in internal/core/codes.go: run go generate ./internal/core and commit the result")
	}
}
