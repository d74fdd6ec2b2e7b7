package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIngestSequentialPlacesEachFile: with --sequential every file starts
// one hour after the previous file's last sample — the third file too (its
// offset is its own, not added to the second's).
func TestIngestSequentialPlacesEachFile(t *testing.T) {
	d, src := t.TempDir(), t.TempDir()
	var files []string
	for i := range 3 {
		var b strings.Builder
		b.WriteString("time_ms,level\n")
		for k := 0; k <= 2; k++ {
			fmt.Fprintf(&b, "%d,%d\n", k*1000, i)
		}
		p := filepath.Join(src, fmt.Sprintf("part%d.csv", i))
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	args := append([]string{"ingest", "csv", "--line", "L", "--product", "P", "--recipe", "R", "--sequential", "--json", "--data", d}, files...)
	out, errs, code := aml(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Files []struct{ FirstTs, LastTs int64 }
	}
	mustJSON(t, out, &res)
	if len(res.Files) != 3 {
		t.Fatalf("%d files", len(res.Files))
	}
	for i := 1; i < 3; i++ {
		if got, want := res.Files[i].FirstTs, res.Files[i-1].LastTs+3_600_000; got != want {
			t.Errorf("file %d starts at %d, want %d (an hour after file %d)", i, got, want, i-1)
		}
	}
}
