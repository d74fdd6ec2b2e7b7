package contract

import (
	"encoding/json"
	"testing"
)

func exampleBinding() *NodeBindingSnapshot {
	b := func(v, node, kind, unit string, lo, hi *float64) NodeBinding {
		return NodeBinding{VariableID: v, NodeID: node, Kind: kind, Mode: ModeAuto, ControlPolicy: PolicyHITLGoverned,
			LineID: "line-injection-01", PhysicalMeaning: v, Unit: unit, Min: lo, Max: hi}
	}
	return &NodeBindingSnapshot{
		SchemaVersion: BindingSchemaVersion, CreatedAt: t0, CreatedBy: "alice",
		SnapshotID: "bind-1", ChannelID: "ch-1", BindingEpoch: "e1",
		SceneID: "injection-hold-control", SceneVersion: "1.0.0",
		Bindings: []NodeBinding{
			b("hold_pressure", "n-hp", NodeKindDCW, "bar", fp(0), fp(200)),
			b("hold_time", "n-ht", NodeKindDCW, "s", fp(0), fp(30)),
			b("melt_temperature_setpoint", "n-mt", NodeKindDCW, "degC", fp(200), fp(300)),
			b("weight", "n-w", NodeKindDAQ, "g", fp(0), fp(100)),
			b("cavity_pressure", "n-cp", NodeKindDAQ, "bar", nil, nil),
		},
	}
}

func TestBindingAgainstScene(t *testing.T) {
	s := DefaultInjectionScene()
	b := exampleBinding()
	mustNil(t, b.Validate())
	mustNil(t, b.CheckAgainst(s))

	cases := []struct {
		name   string
		mutate func(b *NodeBindingSnapshot)
		fields []string
	}{
		{"control on daq", func(b *NodeBindingSnapshot) { b.Bindings[0].Kind = NodeKindDAQ }, []string{"bindings[0].kind"}},
		{"target on dcw", func(b *NodeBindingSnapshot) { b.Bindings[3].Kind = NodeKindDCW }, []string{"bindings[3].kind"}},
		{"unit", func(b *NodeBindingSnapshot) { b.Bindings[0].Unit = "MPa" }, []string{"bindings[0].unit"}},
		{"node range narrower", func(b *NodeBindingSnapshot) { b.Bindings[0].Max = fp(80) }, []string{"bindings[0].max"}},
		{"node min above", func(b *NodeBindingSnapshot) { b.Bindings[3].Min = fp(31.5) }, []string{"bindings[3].min"}},
		{"control node without range", func(b *NodeBindingSnapshot) { b.Bindings[1].Min = nil }, []string{"bindings[1].min"}},
		{"unknown variable", func(b *NodeBindingSnapshot) { b.Bindings[4].VariableID = "nope" }, []string{"bindings[4].variableId"}},
		{"missing control", func(b *NodeBindingSnapshot) { b.Bindings = b.Bindings[1:] }, []string{"bindings"}},
		{"missing target", func(b *NodeBindingSnapshot) { b.Bindings = append(b.Bindings[:3], b.Bindings[4]) }, []string{"bindings"}},
		{"line", func(b *NodeBindingSnapshot) { b.Bindings[2].LineID = "other" }, []string{"bindings[2].lineId"}},
		{"scene version", func(b *NodeBindingSnapshot) { b.SceneVersion = "1.1.0" }, []string{"sceneVersion"}},
		{"dup variable", func(b *NodeBindingSnapshot) { b.Bindings[4].VariableID = "weight" }, []string{"bindings[4].variableId"}},
		{"dup node", func(b *NodeBindingSnapshot) { b.Bindings[4].NodeID = "n-w" }, []string{"bindings[4].nodeId"}},
		{"policy", func(b *NodeBindingSnapshot) { b.Bindings[0].ControlPolicy = "auto" }, []string{"bindings[0].controlPolicy"}},
		{"mode", func(b *NodeBindingSnapshot) { b.Bindings[0].Mode = "" }, []string{"bindings[0].mode"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := exampleBinding()
			tc.mutate(b)
			wantProblems(t, b.CheckAgainst(s), tc.fields...)
		})
	}
}

func TestBindingSealAndTamper(t *testing.T) {
	b := exampleBinding()
	mustNil(t, b.Seal())
	mustNil(t, b.Validate())
	raw, _ := json.Marshal(b)
	b2, err := ParseBinding(raw)
	mustNil(t, err)
	if b2.SnapshotHash != b.SnapshotHash {
		t.Fatal("round trip changed the hash")
	}
	b2.Bindings[0].Unit = "psi"
	wantProblems(t, b2.Validate(), "snapshotHash")
}

func TestTwinSnapshot(t *testing.T) {
	s := DefaultInjectionScene()
	ts := &TwinSnapshot{
		SchemaVersion: TwinSnapshotSchemaVersion, CreatedAt: t0, CreatedBy: "est", SnapshotID: "snap-1",
		SceneID: s.SceneID, SceneVersion: s.SceneVersion, LineID: s.LineID, Phase: "holding",
		CapturedAt: t0, DAQWatermark: t0.UnixMilli(),
		ControlValues:    map[string]float64{"hold_pressure": 65, "hold_time": 8, "melt_temperature_setpoint": 247},
		StateEstimate:    map[string]float64{"melt_temperature": 246.5},
		DataQuality:      DataQuality{Fresh: true, Completeness: 1},
		EstimatorVersion: "ekf-1",
	}
	mustNil(t, ts.Seal())
	mustNil(t, ts.CheckAgainst(s))
	ts.StateEstimate["weight"] = 32
	wantProblems(t, ts.CheckAgainst(s), "snapshotHash", "stateEstimate.weight")
	delete(ts.StateEstimate, "weight")
	ts.Phase = "drying"
	ts.DataQuality.Completeness = 1.5
	delete(ts.ControlValues, "hold_time")
	ts.SnapshotHash = ""
	wantProblems(t, ts.CheckAgainst(s), "phase", "dataQuality.completeness", "controlValues.hold_time")
}

func TestPhysicsManifest(t *testing.T) {
	m := &PhysicsModelManifest{
		SchemaVersion: 1, CreatedAt: t0, CreatedBy: "aml", PhysicsModelID: "injection-greybox-v1", Version: "1.0.0",
		SceneID: "injection-hold-control", Backend: BackendPhysicsLanguage,
		StateVariables:   []string{"melt_temperature", "cavity_pressure", "fill_fraction"},
		ControlVariables: []string{"hold_pressure", "hold_time", "melt_temperature_setpoint"},
		Parameters:       map[string]PhysicsParameter{"pressureGain": {Value: 0.1, Min: fp(0.02), Max: fp(0.3), Unit: "g/bar"}},
		ParameterPriors:  map[string]ParameterPrior{"pressureGain": {Min: 0.02, Max: 0.3}},
	}
	mustNil(t, m.Validate())
	h, err := m.Hash()
	mustNil(t, err)
	if len(h) != 64 {
		t.Fatal(h)
	}
	m.Backend = "matlab"
	m.ControlVariables = append(m.ControlVariables, "fill_fraction")
	m.Parameters["pressureGain"] = PhysicsParameter{Value: 0.5, Max: fp(0.3)}
	m.ParameterPriors["nope"] = ParameterPrior{Min: 1, Max: 0}
	m.SourceHash = "ABC"
	wantProblems(t, m.Validate(), "backend", "controlVariables[3]", "parameters.pressureGain.value",
		"parameterPriors.pressureGain", "parameterPriors.nope", "parameterPriors.nope.max", "sourceHash")
}
