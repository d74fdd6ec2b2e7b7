package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestTrainersDocUpToDate: docs/trainers.md is what the native trainers'
// param schemas generate.
func TestTrainersDocUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "..", "..", "docs", "trainers.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, render()) {
		t.Fatalf("docs/trainers.md differs from the params structs in internal/ident/trainers: run go generate ./internal/ident/trainers and commit the result")
	}
}
