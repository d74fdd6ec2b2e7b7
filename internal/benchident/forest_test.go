package benchident

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStaticForestReportsChoices: a static CV with tuning reports what
// each fold's tuning chose (Result.Chosen, also in --json), one entry per
// fold; without tuning there is none.
func TestStaticForestReportsChoices(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	b.WriteString("a,b,c,class\n")
	for i := 0; i < 90; i++ {
		a, bb, c := rng.Float64(), rng.Float64(), rng.Float64()
		cls := 1
		if a+0.3*bb > 0.7 {
			cls = 2
		}
		fmt.Fprintf(&b, "%.4f,%.4f,%.4f,%d\n", a, bb, c, cls)
	}
	csv := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(csv, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		params string
		folds  int
	}{
		{`{"trees": 30, "tune": "oob", "task": "regression"}`, 3},
		{`{"trees": 30, "task": "regression"}`, 0},
	} {
		cfgJSON := fmt.Sprintf(`{"name": "choices", "kind": "static", "train": [{"file": %q}], "inputs": ["a", "b", "c"], "outputs": ["class"],
			"staticCV": {"folds": 3, "metric": "accuracy"}, "trainers": [{"ref": "static_forest@1", "params": %s}], "seed": 1}`, csv, tc.params)
		p := filepath.Join(dir, "c.json")
		if err := os.WriteFile(p, []byte(cfgJSON), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), cfg, t.TempDir(), func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		res := rep.Results[0]
		if res.Error != "" || res.Accuracy == nil {
			t.Fatalf("%s: %+v", tc.params, res)
		}
		if len(res.Chosen) != tc.folds {
			t.Errorf("%s: chosen %q, want one entry per fold (%d)", tc.params, res.Chosen, tc.folds)
		}
		js, _ := json.Marshal(res)
		if (tc.folds > 0) != strings.Contains(string(js), `"chosen"`) {
			t.Errorf("%s: JSON %s", tc.params, js)
		}
	}
}
