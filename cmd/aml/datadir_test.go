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
