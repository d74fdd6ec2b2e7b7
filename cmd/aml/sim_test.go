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

// TestSimAnotherLineOwnProduct: a product or recipe id belongs to the
// first line that used it, so `sim injection --line L` in a data
// directory that holds the default line derives a product and a recipe of
// L's own (before, it reused the default line's and was refused:
// AML_CONFLICT); an explicit id of the default line is still refused,
// without naming that line.
func TestSimAnotherLineOwnProduct(t *testing.T) {
	d := t.TempDir()
	if _, errs, code := aml(t, "sim", "injection", "--runs", "1", "--duration", "5m", "--data", d); code != 0 {
		t.Fatalf("sim default line: %d %s", code, errs)
	}
	later := []string{"--runs", "1", "--duration", "5m", "--start", "2026-03-01T00:00:00Z", "--data", d}
	// The simulator's node ids are the default line's here: another line
	// may not take them over (before, they silently moved to press-2).
	_, errs, code := aml(t, append([]string{"sim", "injection", "--line", "press-2"}, later...)...)
	if code != 1 || !strings.Contains(errs, "error: AML_CONFLICT: node") || strings.Contains(errs, "line-injection-01") {
		t.Fatalf("sim --line press-2 over the default line's nodes: %d %s", code, errs)
	}
	out, errs, code := aml(t, "sim", "injection", "--line", "press-2", "--json", "--runs", "1", "--duration", "5m", "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("sim --line press-2: %d %s", code, errs)
	}
	var res struct{ Line, Product, Recipe string }
	mustJSON(t, out, &res)
	if res.Line != "press-2" || res.Product != "product-injection-a-press-2" || res.Recipe != "recipe-injection-a-press-2" {
		t.Fatalf("line press-2 simulated as %+v", res)
	}
	_, errs, code = aml(t, append([]string{"sim", "injection", "--line", "press-3", "--product", "product-injection-a"}, later...)...)
	if code != 1 || !strings.Contains(errs, "error: AML_CONFLICT: product") || strings.Contains(errs, "line-injection-01") {
		t.Fatalf("sim --line press-3 with the default line's product: %d %s", code, errs)
	}
}
