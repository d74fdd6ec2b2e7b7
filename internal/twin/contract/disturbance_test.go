package contract

import "testing"

func driftScene() *SceneContract {
	s := DefaultInjectionScene()
	s.SchemaVersion = 2
	s.UnmeasuredDisturbances = []UnmeasuredDisturbance{{ID: "mould_wear", Target: "weight", Model: DisturbanceIntegratedWhiteNoise,
		PriorSD: 1, ProcessSDPerStep: fp(0.001), MaxAbs: fp(1.5)}}
	return s
}

func TestUnmeasuredDisturbanceRules(t *testing.T) {
	if err := driftScene().Validate(); err != nil {
		t.Fatalf("a valid declaration: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(s *SceneContract)
		fields []string
	}{
		{"schema 1", func(s *SceneContract) { s.SchemaVersion = 1 }, []string{"unmeasuredDisturbances"}},
		{"bad id", func(s *SceneContract) { s.UnmeasuredDisturbances[0].ID = "mould wear" }, []string{"unmeasuredDisturbances[0].id"}},
		{"id of a variable", func(s *SceneContract) { s.UnmeasuredDisturbances[0].ID = "hold_time" }, []string{"unmeasuredDisturbances[0].id"}},
		{"no target", func(s *SceneContract) { s.UnmeasuredDisturbances[0].Target = "" }, []string{"unmeasuredDisturbances[0].target"}},
		{"target not an observation", func(s *SceneContract) { s.UnmeasuredDisturbances[0].Target = "hold_time" }, []string{"unmeasuredDisturbances[0].target"}},
		{"two on a target", func(s *SceneContract) {
			d := s.UnmeasuredDisturbances[0]
			d.ID = "other"
			s.UnmeasuredDisturbances = append(s.UnmeasuredDisturbances, d)
		}, []string{"unmeasuredDisturbances[1].target"}},
		{"dup id", func(s *SceneContract) {
			d := s.UnmeasuredDisturbances[0]
			s.Observations = append(s.Observations, SceneVariable{ID: "w2", Role: RoleObservation, PhysicalMeaning: "x", Unit: "g"})
			d.Target = "w2"
			s.UnmeasuredDisturbances = append(s.UnmeasuredDisturbances, d)
		}, []string{"unmeasuredDisturbances[1].id"}},
		{"model", func(s *SceneContract) { s.UnmeasuredDisturbances[0].Model = "ramp" }, []string{"unmeasuredDisturbances[0].model"}},
		{"prior", func(s *SceneContract) { s.UnmeasuredDisturbances[0].PriorSD = 0 }, []string{"unmeasuredDisturbances[0].priorSd"}},
		{"walk without sd", func(s *SceneContract) { s.UnmeasuredDisturbances[0].ProcessSDPerStep = nil }, []string{"unmeasuredDisturbances[0].processSdPerStep"}},
		{"bias with sd", func(s *SceneContract) { s.UnmeasuredDisturbances[0].Model = DisturbanceOutputBias }, []string{"unmeasuredDisturbances[0].processSdPerStep"}},
		{"negative sd", func(s *SceneContract) { *s.UnmeasuredDisturbances[0].ProcessSDPerStep = -1 }, []string{"unmeasuredDisturbances[0].processSdPerStep"}},
		{"measurement sd", func(s *SceneContract) { s.UnmeasuredDisturbances[0].MeasurementSD = fp(0) }, []string{"unmeasuredDisturbances[0].measurementSd"}},
		{"max abs", func(s *SceneContract) { s.UnmeasuredDisturbances[0].MaxAbs = fp(-1) }, []string{"unmeasuredDisturbances[0].maxAbs"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := driftScene()
			tc.mutate(s)
			wantProblems(t, s.Validate(), tc.fields...)
		})
	}
	// a scene file declares them (YAML), round trip keeps the hash, and a
	// clone is deep
	s := driftScene()
	c := s.Clone()
	*c.UnmeasuredDisturbances[0].MaxAbs = 2
	if *s.UnmeasuredDisturbances[0].MaxAbs != 1.5 {
		t.Fatal("Clone shares the disturbance's pointers")
	}
	f, err := ParseSceneFile([]byte(`scene:
  schemaVersion: 2
  createdAt: 2026-03-01T12:00:00Z
  createdBy: eng
  sceneId: tank
  sceneVersion: 1.0.0
  lineId: tank-line
  phases: [running]
  controls:
    - {id: heater_sp, role: control, physicalMeaning: heater temperature setpoint, unit: degC, min: 40, max: 60, maxStep: 1}
  observations:
    - {id: level, role: target, physicalMeaning: tank level, unit: cm, min: 30, max: 70}
  constraints:
    - {id: level-range, kind: hard_range, variable: level, min: 30, max: 70}
  unmeasuredDisturbances:
    - {id: fouling, target: level, model: integrated_white_noise, priorSd: 2, processSdPerStep: 0.01, maxAbs: 10}
  writePolicy: {minNodeIntervalSec: 60, minLineActionIntervalSec: 60, maxActionsPerRun: 3, maxDeltaPerAction: {heater_sp: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if d := f.Scene.UnmeasuredDisturbanceFor("level"); d == nil || d.ProcessVar() != 0.01*0.01 || d.Limit() != 10 {
		t.Fatalf("parsed %+v", f.Scene.UnmeasuredDisturbances)
	}
}
