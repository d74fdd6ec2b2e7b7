package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSec10a_CLIBudgetEnv: the dataset build's work budget is configured
// with AML_MAX_DATASET_CELLS; a build over it is refused up front.
func TestSec10a_CLIBudgetEnv(t *testing.T) {
	d := simDir(t)
	t.Setenv("AML_MAX_DATASET_CELLS", "1000")
	_, errs, code := aml(t, "dataset", "build", "--spec", filepath.Join(d, "spec.json"), "--data", d)
	if code == 0 || !strings.Contains(errs, "AML_QUOTA_EXCEEDED") || !strings.Contains(errs, "1000 cells") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
