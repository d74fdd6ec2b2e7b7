package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A typo in --data used to create an empty store silently and answer
// "0 model(s)"; now a command that only reads refuses a data directory
// that does not exist, names it, and creates nothing. aml init (and the
// commands that put data in: ingest, sim, demo) create it, private.
func TestDataDirMustExist(t *testing.T) {
	d := filepath.Join(t.TempDir(), "aml-dat") // the typo
	for _, args := range [][]string{{"model", "list"}, {"runs", "list"}, {"dataset", "list"}, {"cert", "list"}, {"db", "info"}} {
		_, errs, code := aml(t, append(args, "--data", d)...)
		if code != 1 || !strings.Contains(errs, "AML_NOT_FOUND") || !strings.Contains(errs, d) || !strings.Contains(errs, "aml init") {
			t.Fatalf("%v on a missing data dir: exit %d %s", args, code, errs)
		}
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%v created the data dir", args)
		}
	}
	if out, errs, code := aml(t, "init", "--data", d); code != 0 || !strings.Contains(out, "schema version") {
		t.Fatalf("init: %d %s %s", code, out, errs)
	}
	st, err := os.Stat(d)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("data dir after init: %v %v", st, err)
	}
	if out, errs, code := aml(t, "model", "list", "--data", d); code != 0 || !strings.Contains(out, "0 model(s)") {
		t.Fatalf("model list after init: %d %s %s", code, out, errs)
	}
	// ingest creates its data dir.
	csv := filepath.Join(t.TempDir(), "a.csv")
	if err := os.WriteFile(csv, []byte("time_ms,x\n1,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d2 := filepath.Join(t.TempDir(), "fresh")
	if _, errs, code := aml(t, "ingest", "csv", csv, "--data", d2, "--line", "L", "--product", "P", "--recipe", "R", "--run", "r"); code != 0 {
		t.Fatalf("ingest into a new data dir: %d %s", code, errs)
	}
}

// aml line apply reads a YAML line file; aml nodes set changes one node.
func TestLineApplyCLI(t *testing.T) {
	d := t.TempDir()
	csv := filepath.Join(d, "a.csv")
	if err := os.WriteFile(csv, []byte("time_ms,temp,sp\n1,200,60\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := aml(t, "ingest", "csv", csv, "--data", d, "--line", "L", "--product", "P", "--recipe", "R", "--run", "r"); code != 0 {
		t.Fatal(errs)
	}
	file := filepath.Join(d, "line.yaml")
	if err := os.WriteFile(file, []byte("line: L\nnodes:\n  - id: temp\n    unit: degC\n    min: 150\n    max: 260\n  - id: sp\n    unit: bar\n    min: 50\n    max: 90\n    writable: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code := aml(t, "line", "apply", file, "--data", d)
	if code != 0 || !strings.Contains(out, "dcw") || !strings.Contains(out, "2 node(s)") {
		t.Fatalf("line apply: %d %s %s", code, out, errs)
	}
	if out, errs, code := aml(t, "nodes", "set", "sp", "--line", "L", "--read-only", "--data", d); code != 0 || strings.Contains(out, "dcw") {
		t.Fatalf("nodes set --read-only: %d %s %s", code, out, errs)
	}
	if _, errs, code := aml(t, "nodes", "set", "sp", "--line", "L", "--writable", "--read-only", "--data", d); code != 2 {
		t.Fatalf("--writable with --read-only: %d %s", code, errs)
	}
	if err := os.WriteFile(file, []byte("line: L\nnodes:\n  - id: temp\n    colour: red\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := aml(t, "line", "apply", file, "--data", d); code != 1 || !strings.Contains(errs, "colour") {
		t.Fatalf("unknown field: %d %s", code, errs)
	}
}
