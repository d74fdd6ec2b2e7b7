package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimCSVStreamed: --csv exports each streamed run beside the store, one
// row per stored sample, and a limit beyond one call is refused up front.
func TestSimCSVStreamed(t *testing.T) {
	d, dir := t.TempDir(), filepath.Join(t.TempDir(), "csv")
	out, errs, code := aml(t, "sim", "injection", "--runs", "2", "--seed", "3", "--duration", "10m", "--csv", dir, "--data", d, "--json")
	if code != 0 {
		t.Fatalf("sim: %d %s", code, errs)
	}
	var res struct {
		Samples  int      `json:"samples"`
		CSVFiles []string `json:"csvFiles"`
	}
	mustJSON(t, out, &res)
	if len(res.CSVFiles) != 3 || filepath.Base(res.CSVFiles[2]) != "nodes.csv" {
		t.Fatalf("csv files %v", res.CSVFiles)
	}
	rows := 0
	for _, p := range res.CSVFiles[:2] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rows += strings.Count(string(b), "\n") - 1
	}
	if rows != res.Samples || rows < 10_000 {
		t.Errorf("%d CSV rows for %d samples", rows, res.Samples)
	}

	_, errs, code = aml(t, "sim", "injection", "--runs", "200", "--duration", "168h", "--data", t.TempDir())
	if code != 1 || !strings.Contains(errs, "AML_INVALID_ARGUMENT") || !strings.Contains(errs, "at most 1000000000 allowed in one call") {
		t.Errorf("1.2 G samples: exit %d, %s", code, errs)
	}
}
