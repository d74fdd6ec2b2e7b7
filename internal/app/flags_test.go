package app_test

import (
	"math"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/eval"
)

// The flags on bad evidence: a coverage outside its target ± the
// measurement's tolerance, a shadow run beyond the twin gate's bounds.
func TestEvidenceFlags(t *testing.T) {
	tol, off := app.CoverageCheck(0.9, 0.89, 100, 100)
	if math.IsNaN(tol) || tol <= 0 || off != "" {
		t.Errorf("within: %v %q", tol, off)
	}
	if _, off := app.CoverageCheck(0.9, 0.9-tol-0.01, 100, 100); off != "below" {
		t.Errorf("below: %q", off)
	}
	if _, off := app.CoverageCheck(0.9, math.Min(1, 0.9+tol+0.01), 100, 100); 0.9+tol+0.01 <= 1 && off != "above" {
		t.Errorf("above: %q", off)
	}
	if tol, off := app.CoverageCheck(0.9, 0.1, 0, 100); !math.IsNaN(tol) || off != "" {
		t.Errorf("no calibration windows: %v %q", tol, off)
	}
	p, err := eval.LookupTwinProfile(eval.ProfileTwinMeasured)
	if err != nil {
		t.Fatal(err)
	}
	if f := app.ShadowFlags(1.90, 0.95, p); len(f) != 1 || !strings.Contains(f[0], "NRMSE 1.9 beyond the gate's 0.25") {
		t.Errorf("NRMSE 1.90: %q", f)
	}
	if f := app.ShadowFlags(0.1, 0.5, p); len(f) != 1 || !strings.Contains(f[0], "coverage 50.0% below the gate's 80%") {
		t.Errorf("coverage 50%%: %q", f)
	}
	if f := app.ShadowFlags(0.1, 0.95, p); len(f) != 0 {
		t.Errorf("good evidence flagged: %q", f)
	}
	if f := app.ShadowFlags(math.NaN(), math.NaN(), p); len(f) != 0 {
		t.Errorf("missing figures flagged: %q", f)
	}
}
