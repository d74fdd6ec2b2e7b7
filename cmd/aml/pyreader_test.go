package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPyReaderVerifiesDataset builds a dataset with the CLI and checks it with
// examples/read_dataset.py, the standard-library Python reader documented in
// docs/dataset-format.md: the reader must recompute the registered dataset
// hash, and must fail once one byte of an array file is changed.
func TestPyReaderVerifiesDataset(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH; skipping the examples/read_dataset.py check")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "read_dataset.py"))
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	if _, errs, code := aml(t, "sim", "injection", "--runs", "4", "--seed", "3", "--duration", "10m", "--data", d); code != 0 {
		t.Fatalf("sim: exit %d: %s", code, errs)
	}

	// The example spec, with split ratios that suit 4 runs (1 val, 1 test,
	// 2 train).
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "specs", "injection.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatalf("examples/specs/injection.json: %v", err)
	}
	split, ok := spec["split"].(map[string]any)
	if !ok {
		t.Fatalf("examples/specs/injection.json has no split object")
	}
	split["valRatio"], split["testRatio"] = 0.25, 0.25
	b, err = json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		t.Fatal(err)
	}

	out, errs, code := aml(t, "dataset", "build", "--spec", specPath, "--data", d, "--json")
	if code != 0 {
		t.Fatalf("dataset build: exit %d: %s", code, errs)
	}
	var res struct {
		Dataset struct {
			Path         string `json:"path"`
			SHA256       string `json:"sha256"`
			TrainWindows int    `json:"trainWindows"`
			ValWindows   int    `json:"valWindows"`
			TestWindows  int    `json:"testWindows"`
		} `json:"dataset"`
	}
	mustJSON(t, out, &res)
	ds := res.Dataset
	if ds.Path == "" || len(ds.SHA256) != 64 || ds.TrainWindows == 0 || ds.ValWindows == 0 || ds.TestWindows == 0 {
		t.Fatalf("unexpected build result: %+v", ds)
	}
	dir := filepath.Join(d, filepath.FromSlash(ds.Path))

	reader := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(py, append([]string{script}, args...)...)
		outb, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(outb), 0
		case errors.As(err, &ee):
			return string(outb), ee.ExitCode()
		default:
			t.Fatalf("run %s: %v", script, err)
			return "", -1
		}
	}

	// Intact dataset: every check passes and the hash is the registered one.
	got, rc := reader(dir, "--expect-sha256", ds.SHA256)
	if rc != 0 {
		t.Fatalf("read_dataset.py on the intact dataset: exit %d\n%s", rc, got)
	}
	if !strings.Contains(got, ds.SHA256) || !strings.Contains(got, "\nOK\n") {
		t.Fatalf("read_dataset.py output lacks the hash or OK:\n%s", got)
	}
	// A wrong expected hash fails; bad usage is exit 2.
	if got, rc := reader(dir, "--expect-sha256", strings.Repeat("0", 64)); rc != 1 {
		t.Fatalf("wrong --expect-sha256: exit %d, want 1\n%s", rc, got)
	}
	if got, rc := reader(dir, "--expect-sha256", "xyz"); rc != 2 {
		t.Fatalf("malformed --expect-sha256: exit %d, want 2\n%s", rc, got)
	}
	if got, rc := reader(); rc != 2 {
		t.Fatalf("no arguments: exit %d, want 2\n%s", rc, got)
	}

	// One flipped byte in an array file must be caught.
	yPath := filepath.Join(dir, "arrays", "y.f32")
	y, err := os.ReadFile(yPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(y) == 0 {
		t.Fatal("arrays/y.f32 is empty")
	}
	y[len(y)/2] ^= 0x01
	if err := os.WriteFile(yPath, y, 0o644); err != nil {
		t.Fatal(err)
	}
	got, rc = reader(dir, "--expect-sha256", ds.SHA256)
	if rc == 0 {
		t.Fatalf("read_dataset.py accepted a dataset with a flipped byte in arrays/y.f32:\n%s", got)
	}
	if !strings.Contains(got, "arrays/y.f32") {
		t.Fatalf("read_dataset.py failed (exit %d) without naming arrays/y.f32:\n%s", rc, got)
	}
}
