package sim

import (
	"math"
	"testing"
)

// A closed line gives every controller the same conditions: the same seed
// and run give the same disturbances and sensor noise whatever the
// controls; the wear grows only with Wear; a run starts settled at its
// controls; the oracle's steady weight is what the plant settles to.
func TestClosedLineSameConditions(t *testing.T) {
	cfg := ClosedLoopConfig{Seed: 7, RunSteps: 300, AgeRuns: 24, Wear: true, MaterialLots: true}
	a, b := NewClosedLine(cfg), NewClosedLine(cfg)
	ua := Controls{HoldPressure: 65, HoldTime: 8, MeltTemperatureSetpoint: 245}
	ub := Controls{HoldPressure: 60, HoldTime: 8, MeltTemperatureSetpoint: 245}
	nodes := ClosedNodes()
	col := map[string]int{}
	for j, n := range nodes {
		col[n] = j
	}
	a.StartRun(3, ua)
	b.StartRun(3, ub)
	var last ClosedSample
	for k := 0; k < 300; k++ {
		sa, sb := a.Step(ua), b.Step(ub)
		for _, n := range []string{NodeAmbientTemperature, NodeMaterialBatchFactor} {
			if sa.Truth[col[n]] != sb.Truth[col[n]] {
				t.Fatalf("step %d: %s differs between controllers", k, n)
			}
		}
		if sa.WearG != sb.WearG {
			t.Fatalf("step %d: wear differs", k)
		}
		// the same noise draw: measured − truth agrees up to the rounding
		j := col[NodeAmbientTemperature]
		if math.Abs((sa.Measured[j]-sa.Truth[j])-(sb.Measured[j]-sb.Truth[j])) > 0.011 {
			t.Fatalf("step %d: the noise differs", k)
		}
		last = sa
	}
	if w0 := a.WearAt(0, 0); !(a.WearAt(10, 0) > w0) || w0 != mouldWear(24) {
		t.Fatalf("wear %g → %g", w0, a.WearAt(10, 0))
	}
	flat := NewClosedLine(ClosedLoopConfig{Seed: 7, RunSteps: 300, AgeRuns: 24})
	if flat.WearAt(10, 100) != mouldWear(24) {
		t.Fatal("the wear grows without Wear")
	}
	flat.StartRun(3, ua)
	if s := flat.Step(ua); s.Truth[col[NodeMaterialBatchFactor]] != 1 {
		t.Fatalf("batch %g without material lots", s.Truth[col[NodeMaterialBatchFactor]])
	}
	// settled at its controls: the last step's weight is the steady one
	if d := math.Abs(a.SteadyWeight(ua) - last.Truth[col[NodePartWeight]]); d > 0.02 {
		t.Fatalf("steady weight off by %.4f g", d)
	}
	// the pressure moves the steady weight by about the true gain
	up := ua
	up.HoldPressure++
	if g := a.SteadyWeight(up) - a.SteadyWeight(ua); math.Abs(g-0.12) > 0.02 {
		t.Fatalf("steady gain %.4f g/bar", g)
	}
}
