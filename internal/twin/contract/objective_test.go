package contract

import "testing"

func exampleObjective() *ObjectiveProfile {
	return &ObjectiveProfile{
		SchemaVersion: ObjectiveSchemaVersion, CreatedAt: t0, CreatedBy: "alice", ObjectiveID: "weight-quality",
		Targets:      map[string]float64{"weight": 32.5},
		Weights:      map[string]float64{"weight": 1},
		ControlCosts: map[string]float64{"hold_pressure": 0.01, "melt_temperature_setpoint": 0.02},
		HorizonSteps: 10,
		TrustRegion:  map[string]TrustRegion{"hold_pressure": {Min: fp(55), Max: fp(85), MaxDelta: fp(6)}},
	}
}

func TestObjective(t *testing.T) {
	s := DefaultInjectionScene()
	o := exampleObjective()
	mustNil(t, o.Validate())
	mustNil(t, o.CheckAgainst(s))
	h1, _ := o.Hash()
	o.Targets["weight"] = 32.6
	if h2, _ := o.Hash(); h2 == h1 {
		t.Fatal("setpoint change kept the hash")
	}

	cases := []struct {
		name   string
		mutate func(o *ObjectiveProfile)
		fields []string
	}{
		{"no targets", func(o *ObjectiveProfile) { o.Targets, o.Weights = nil, nil }, []string{"targets"}},
		{"missing weight", func(o *ObjectiveProfile) { o.Weights = map[string]float64{} }, []string{"weights.weight", "weights"}},
		{"negative weight", func(o *ObjectiveProfile) { o.Weights["weight"] = -1 }, []string{"weights.weight"}},
		{"weight of non-target", func(o *ObjectiveProfile) { o.Weights["flash_rate"] = 1 }, []string{"weights.flash_rate"}},
		{"negative cost", func(o *ObjectiveProfile) { o.ControlCosts["hold_time"] = -0.1 }, []string{"controlCosts.hold_time"}},
		{"horizon", func(o *ObjectiveProfile) { o.HorizonSteps = 0 }, []string{"horizonSteps"}},
		{"trust region empty", func(o *ObjectiveProfile) { o.TrustRegion["hold_time"] = TrustRegion{} }, []string{"trustRegion.hold_time"}},
		{"trust region delta", func(o *ObjectiveProfile) { o.TrustRegion["hold_time"] = TrustRegion{MaxDelta: fp(0)} }, []string{"trustRegion.hold_time.maxDelta"}},
		{"target not in scene", func(o *ObjectiveProfile) { o.Targets["yield"] = 1; o.Weights["yield"] = 1 }, []string{"targets.yield"}},
		{"cost not a control", func(o *ObjectiveProfile) { o.ControlCosts["weight"] = 1 }, []string{"controlCosts.weight"}},
		{"trust region wider", func(o *ObjectiveProfile) { o.TrustRegion["hold_pressure"] = TrustRegion{Min: fp(40), Max: fp(95)} }, []string{"trustRegion.hold_pressure.min", "trustRegion.hold_pressure.max"}},
		{"not listed", func(o *ObjectiveProfile) { o.ObjectiveID = "other" }, []string{"objectiveId"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := exampleObjective()
			tc.mutate(o)
			wantProblems(t, o.CheckAgainst(s), tc.fields...)
		})
	}
}
