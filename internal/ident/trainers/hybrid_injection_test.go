package trainers_test

// An external test: testfix trains with the real job runner and the
// native trainers of this package, so it cannot be imported from inside.

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/testfix"
)

// TestHybridInjectionPassesGates: on the simulated injection line (24 runs
// of 30 min), the hybrid model of part weight (examples/physics/injection.aml
// + residual ensemble) passes the seed's model gates (upstream-mpc-v1: G1
// one-step ≤ 0.10, G2 rollout ≤ 0.25, G3 gap ≤ 0.20, G4 rows/runs, G5) and
// its conformal intervals, calibrated on the val runs for 90 %, cover the
// test runs within ±3 points.
func TestHybridInjectionPassesGates(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 24 runs and trains a hybrid ensemble")
	}
	st, dir := testfix.SQLite(t)
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed = 24, 7
	ds := testfix.InjectionDataset(t, st, dir, testfix.Injection(t, cfg))
	j, _, _ := testfix.TrainHybrid(t, st, dir, ds.ID, testfix.HybridParams(t, dir, ""), time.Date(2026, 1, 6, 0, 0, 0, 0, time.UTC))
	var m struct {
		Test struct {
			MeanNRMSE        float64 `json:"meanNrmse"`
			MeanOneStepNRMSE float64 `json:"meanOneStepNrmse"`
		} `json:"test"`
		ValTestGap float64 `json:"valTestGap"`
		Coverage   struct {
			Measured float64 `json:"measured"`
		} `json:"coverage"`
	}
	if err := json.Unmarshal(j.Metrics, &m); err != nil {
		t.Fatal(err)
	}
	t.Logf("injection hybrid: test one-step NRMSE %.4f, rollout %.4f, val/test gap %.3f, gates passed %v, test coverage %.4f (target 0.90)",
		m.Test.MeanOneStepNRMSE, m.Test.MeanNRMSE, m.ValTestGap, j.GatePassed, m.Coverage.Measured)
	if !j.GatePassed {
		t.Errorf("the hybrid model does not pass the model gates: %s", j.Gates)
	}
	if math.Abs(m.Coverage.Measured-0.90) > 0.03 {
		t.Errorf("test coverage %.4f is not within ±3 points of 0.90", m.Coverage.Measured)
	}
}
