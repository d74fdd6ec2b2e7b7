package eval

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// measured calibrates the signal model at 0.9 on val windows and measures
// the coverage on test windows of a noisy bundle; shrink scales the
// calibrated widths before measuring (1 = honest; 0 = a calibration whose
// widths were zeroed, covering nothing).
func measured(t *testing.T, val, test int, shrink float64) Evidence {
	t.Helper()
	ctx := context.Background()
	b := cfBundle(t, 2, 2, 50, val, test)
	cfNoisy(b, 42)
	p := newCfSignal(b)
	c, err := Calibrate(ctx, b, p, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	for f := range c.Widths {
		for k := range c.Widths[f] {
			c.Widths[f][k] *= shrink
		}
	}
	cov, err := c.MeasureCoverage(ctx, b, p)
	if err != nil {
		t.Fatal(err)
	}
	return Evidence{ArtifactPresent: true, Conformal: c, Coverage: cov, Stability: stableEvidence()}
}

// stableEvidence is the stability evidence of a stable linear model whose
// free run did not diverge.
func stableEvidence() *Stability {
	return &Stability{FreeRun: &FreeRunMetrics{Split: "test", Segments: 1, SegmentSteps: []int{100}, SkippedSteps: []int{}}, Linear: true, Poles: 2, MaxPoleModulus: 0.9}
}

// synthetic is evidence of an interval at 0.9 from n val windows measured
// at m on W test windows.
func synthetic(m float64, n, W int) Evidence {
	return Evidence{ArtifactPresent: true, Conformal: &Conformal{Coverage: 0.9, CalibrationWindows: n, Split: "val"},
		Coverage: &CoverageReport{Target: 0.9, Measured: m, TestWindows: W, Split: "test"}, Stability: stableEvidence()}
}

func TestGateIntervalCoverage(t *testing.T) {
	mpc, err := ProfileFor("mpc_surrogate")
	if err != nil {
		t.Fatal(err)
	}
	if mpc.ID != "upstream-mpc-v2" || mpc.Version != 2 || checkRule(mpc, "G6").Threshold != 0.05 || checkRule(mpc, "G6").Sigmas != 3 {
		t.Fatalf("default mpc profile %+v", mpc)
	}
	q, _ := ProfileFor("quality_predict")
	for _, c := range []struct {
		name   string
		ev     Evidence
		pass   bool
		detail string
	}{
		{"honest 90 % interval, measured", measured(t, 1000, 1000, 1), true, "on 1000 test window(s)"},
		{"zeroed widths: 0 % coverage, measured", measured(t, 1000, 1000, 0), false, "= |0 − 0.9|"},
		{"half widths: well under 90 %, measured", measured(t, 1000, 1000, 0.5), false, ""},
		{"0 % on few windows", synthetic(0, 20, 20), false, ""},
		{"40 % on few windows", synthetic(0.40, 20, 20), false, ""},
		{"40 % on many windows", synthetic(0.40, 2000, 2000), false, ""},
		{"85 % on many windows", synthetic(0.85, 2000, 2000), true, ""},
		{"95 % on many windows", synthetic(0.95, 2000, 2000), true, ""},
		{"92.3 % (bench)", synthetic(0.923, 200, 300), true, ""},
		{"80 % on many windows", synthetic(0.80, 2000, 2000), false, ""},
		{"100 % on many windows: too wide", synthetic(1, 2000, 2000), false, ""},
		{"no interval measured", Evidence{ArtifactPresent: true}, false, "none was measured"},
		{"calibration skipped, reason carried", Evidence{ArtifactPresent: true, CoverageSkipped: "the val split has 3 window(s)"}, false, "the val split has 3 window(s)"},
		{"coverage without its calibration", Evidence{ArtifactPresent: true, Coverage: &CoverageReport{Target: 0.9, Measured: 0.9, TestWindows: 50}}, false, "none was measured"},
		{"NaN coverage", synthetic(math.NaN(), 100, 100), false, ""},
		{"90 % on too few test windows", synthetic(0.9, 100, MinCalibrationWindows-1), false, "fewer than the 20"},
	} {
		for _, p := range []Profile{mpc, q} {
			r := GateEvidence(p, passing(), c.ev)
			g6 := checkByID(r, "G6")
			if g6.ID != "G6" || g6.Passed != c.pass || r.Passed != c.pass {
				t.Fatalf("%s, %s: G6 %+v, report passed %v", c.name, p.ID, g6, r.Passed)
			}
			if !strings.Contains(g6.Detail, c.detail) || g6.Op != OpLE || g6.Threshold < CoverageToleranceMin {
				t.Fatalf("%s, %s: G6 detail %q threshold %v", c.name, p.ID, g6.Detail, g6.Threshold)
			}
			if c.ev.Coverage != nil && !c.pass && !math.IsNaN(c.ev.Coverage.Measured) && c.ev.Conformal != nil && g6.Value <= g6.Threshold {
				t.Fatalf("%s: value %v within threshold %v", c.name, g6.Value, g6.Threshold)
			}
		}
		// v1 has no G6: the same evidence leaves it as before.
		v1, err := LookupProfile("upstream-mpc-v1")
		if err != nil {
			t.Fatal(err)
		}
		if r := GateEvidence(v1, passing(), c.ev); !r.Passed || checkByID(r, "G6").ID != "missing" || r.Version != 1 {
			t.Fatalf("%s under v1: %+v", c.name, r)
		}
	}
	// Gate (no evidence) under a profile requiring intervals fails G6 only.
	if r := Gate(mpc, passing(), true); r.Passed || checkByID(r, "G6").Passed || !checkByID(r, "G1").Passed {
		t.Fatalf("Gate without evidence: %+v", r)
	}
}

func checkRule(p Profile, id string) Rule {
	for _, r := range p.Rules {
		if r.ID == id {
			return r
		}
	}
	return Rule{ID: "missing"}
}

func TestCoverageTolerance(t *testing.T) {
	for _, c := range []struct {
		n, W   int
		lo, hi float64
	}{
		{20, 20, 0.27, 0.29},
		{100, 100, 0.12, 0.13},
		{650, 650, 0.05, 0.0501},
		{5000, 5000, 0.05, 0.05},
		{0, 100, 0.05, 0.05},
	} {
		if v := CoverageTolerance(0.9, c.n, c.W); v < c.lo || v > c.hi {
			t.Fatalf("tolerance(0.9, %d, %d) = %v, want in [%v, %v]", c.n, c.W, v, c.lo, c.hi)
		}
	}
	// With the fewest windows calibration accepts, 40 % never passes.
	if v := CoverageTolerance(0.9, MinCalibrationWindows, MinCalibrationWindows); v >= 0.5 {
		t.Fatalf("tolerance at the minimum: %v", v)
	}
}

func TestProfileForJob(t *testing.T) {
	if p, err := ProfileForJob("mpc_surrogate", ""); err != nil || p.ID != "upstream-mpc-v2" {
		t.Fatalf("default: %+v %v", p, err)
	}
	if p, err := ProfileForJob("mpc_surrogate", "upstream-mpc-v1"); err != nil || p.ID != "upstream-mpc-v1" || p.Version != 1 {
		t.Fatalf("named v1: %+v %v", p, err)
	}
	for _, bad := range []string{"upstream-mpc-v3", "UPSTREAM-MPC-V2", " upstream-mpc-v2", "upstream-mpc", "twin-v1"} {
		_, err := ProfileForJob("mpc_surrogate", bad)
		var ae *core.Error
		if core.CodeOf(err) != core.CodeInvalidArgument || !asCore(err, &ae) || ae.Field != "gateProfile" ||
			!strings.Contains(err.Error(), "upstream-mpc-v2") || !strings.Contains(err.Error(), "static-v1") {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	if _, err := ProfileForJob("mpc_surrogate", "static-v1"); core.CodeOf(err) != core.CodeInvalidArgument || !strings.Contains(err.Error(), "static_response") {
		t.Fatalf("profile of another purpose: %v", err)
	}
}
