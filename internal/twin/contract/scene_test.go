package contract

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

func TestDefaultInjectionSceneValidates(t *testing.T) {
	s := DefaultInjectionScene()
	mustNil(t, s.Validate())
	h1, err := s.Hash()
	mustNil(t, err)
	h2, _ := DefaultInjectionScene().Hash()
	if h1 != h2 {
		t.Fatalf("default scene hash not reproducible: %s vs %s", h1, h2)
	}
	// Every constraint names a declared variable; every control has a
	// maxDeltaPerAction equal to its maxStep.
	for _, c := range s.Constraints {
		if s.Variable(c.Variable) == nil {
			t.Errorf("constraint %s: variable %q undeclared", c.ID, c.Variable)
		}
	}
	for _, c := range s.Controls {
		if s.WritePolicy.MaxDeltaPerAction[c.ID] != *c.MaxStep {
			t.Errorf("%s: maxDeltaPerAction %v, maxStep %v", c.ID, s.WritePolicy.MaxDeltaPerAction[c.ID], *c.MaxStep)
		}
	}
}

func TestSceneJSONRoundTripKeepsHash(t *testing.T) {
	s := DefaultInjectionScene()
	b, err := json.Marshal(s)
	mustNil(t, err)
	for _, k := range []string{`"sceneId":"injection-hold-control"`, `"maxStep":2`, `"minNodeIntervalSec":60`, `"status":"draft"`, `"objectiveProfileIds":["weight-quality"]`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
	if strings.Contains(string(b), "frozenAt") {
		t.Error("a draft's JSON has frozenAt")
	}
	s2, err := ParseScene(b)
	mustNil(t, err)
	h1, _ := s.Hash()
	h2, _ := s2.Hash()
	if h1 != h2 {
		t.Fatalf("hash changed by a JSON round trip")
	}
}

func TestSceneHashCoverage(t *testing.T) {
	base := DefaultInjectionScene()
	h0, _ := base.Hash()

	// Volatile fields and the time zone of createdAt do not change it.
	s := base.Clone()
	s.Status, s.FrozenBy, s.FrozenAt = SceneFrozen, "bob", t0
	if h, _ := s.Hash(); h != h0 {
		t.Error("status/frozenBy/frozenAt changed the hash")
	}
	s = base.Clone()
	s.CreatedAt = s.CreatedAt.In(time.FixedZone("CST", 8*3600))
	if h, _ := s.Hash(); h != h0 {
		t.Error("the time zone of createdAt changed the hash")
	}
	// Empty and absent optional lists hash alike.
	s = base.Clone()
	s.Guards, s.States = nil, nil
	s2 := base.Clone()
	s2.Guards, s2.States = []SceneVariable{}, []SceneVariable{}
	ha, _ := s.Hash()
	hb, _ := s2.Hash()
	if ha != hb {
		t.Error("nil and empty lists hash differently")
	}

	// Every content change does.
	changes := map[string]func(s *SceneContract){
		"createdAt":           func(s *SceneContract) { s.CreatedAt = s.CreatedAt.Add(time.Millisecond) },
		"createdBy":           func(s *SceneContract) { s.CreatedBy = "x" },
		"sceneVersion":        func(s *SceneContract) { s.SceneVersion = "1.0.1" },
		"lineId":              func(s *SceneContract) { s.LineID = "l2" },
		"recipeId":            func(s *SceneContract) { s.RecipeID = "" },
		"phases":              func(s *SceneContract) { s.Phases = s.Phases[1:] },
		"control max":         func(s *SceneContract) { *s.Controls[0].Max = 89 },
		"maxStep":             func(s *SceneContract) { *s.Controls[1].MaxStep = 0.4 },
		"constraint":          func(s *SceneContract) { *s.Constraints[0].Max = 33.9 },
		"physicsProfileId":    func(s *SceneContract) { s.PhysicsProfileID = "p2" },
		"objectiveProfileIds": func(s *SceneContract) { s.ObjectiveProfileIDs = append(s.ObjectiveProfileIDs, "o2") },
		"writePolicy":         func(s *SceneContract) { s.WritePolicy.MaxActionsPerRun = 4 },
		"maxDeltaPerAction":   func(s *SceneContract) { s.WritePolicy.MaxDeltaPerAction["hold_time"] = 0.25 },
		"guard unit":          func(s *SceneContract) { s.Guards[0].Unit = "1" },
		"disturbance": func(s *SceneContract) {
			s.SchemaVersion = 2
			s.UnmeasuredDisturbances = []UnmeasuredDisturbance{{ID: "wear", Target: "weight", Model: DisturbanceOutputBias, PriorSD: 1}}
		},
	}
	for name, f := range changes {
		s := base.Clone()
		f(s)
		if h, _ := s.Hash(); h == h0 {
			t.Errorf("%s: change did not change the hash", name)
		}
	}
	// Clone is deep: the base is untouched by all of the above.
	if h, _ := base.Hash(); h != h0 {
		t.Fatal("Clone is not deep: base changed")
	}
}

func TestSceneValidationRules(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *SceneContract)
		fields []string
	}{
		{"schema too new", func(s *SceneContract) { s.SchemaVersion = SceneSchemaVersionMax + 1 }, []string{"schemaVersion"}},
		{"no createdAt", func(s *SceneContract) { s.CreatedAt = time.Time{} }, []string{"createdAt"}},
		{"bad version", func(s *SceneContract) { s.SceneVersion = "1.0" }, []string{"sceneVersion"}},
		{"leading zero version", func(s *SceneContract) { s.SceneVersion = "1.01.0" }, []string{"sceneVersion"}},
		{"no line", func(s *SceneContract) { s.LineID = "" }, []string{"lineId"}},
		{"no phases", func(s *SceneContract) { s.Phases = nil }, []string{"phases"}},
		{"dup phase", func(s *SceneContract) { s.Phases = append(s.Phases, "holding") }, []string{"phases[5]"}},
		{"no controls", func(s *SceneContract) { s.Controls = nil; s.WritePolicy.MaxDeltaPerAction = nil }, []string{"controls"}},
		{"control without range", func(s *SceneContract) { s.Controls[0].Min, s.Controls[0].Max = nil, nil }, []string{"controls[0].min", "controls[0].max"}},
		{"control without maxStep", func(s *SceneContract) { s.Controls[1].MaxStep = nil }, []string{"controls[1].maxStep"}},
		{"maxStep zero", func(s *SceneContract) { *s.Controls[1].MaxStep = 0 }, []string{"controls[1].maxStep"}},
		{"maxStep wider than range", func(s *SceneContract) { *s.Controls[1].MaxStep = 11 }, []string{"controls[1].maxStep"}},
		{"min ≥ max", func(s *SceneContract) { *s.Controls[0].Min = 90 }, []string{"controls[0].max"}},
		{"maxStep on a state", func(s *SceneContract) { s.States[0].MaxStep = fp(1) }, []string{"states[0].maxStep"}},
		{"role mismatch", func(s *SceneContract) { s.Guards[0].Role = RoleObservation }, []string{"guards[0].role"}},
		{"feature role", func(s *SceneContract) { s.States[0].Role = "feature" }, []string{"states[0].role"}},
		{"bad name", func(s *SceneContract) { s.States[0].ID = "melt temperature" }, []string{"states[0].id"}},
		{"dup variable", func(s *SceneContract) { s.Guards[0].ID = "weight" }, []string{"guards[0].id"}},
		{"no unit", func(s *SceneContract) { s.States[0].Unit = "" }, []string{"states[0].unit"}},
		{"no meaning", func(s *SceneContract) { s.States[0].PhysicalMeaning = " " }, []string{"states[0].physicalMeaning"}},
		{"phase scope", func(s *SceneContract) { s.States[0].PhaseScope = []string{"holding", "drying"} }, []string{"states[0].phaseScope[1]"}},
		{"sampling period", func(s *SceneContract) { var z int64; s.States[0].SamplingPeriodMs = &z }, []string{"states[0].samplingPeriodMs"}},
		{"constraint unknown variable", func(s *SceneContract) { s.Constraints[0].Variable = "nope" }, []string{"constraints[0].variable"}},
		{"constraint no variable", func(s *SceneContract) { s.Constraints[0].Variable = "" }, []string{"constraints[0].variable"}},
		{"constraint dup id", func(s *SceneContract) { s.Constraints[1].ID = "weight" }, []string{"constraints[1].id"}},
		{"constraint kind", func(s *SceneContract) { s.Constraints[0].Kind = "soft" }, []string{"constraints[0].kind"}},
		{"hard_range without bounds", func(s *SceneContract) { s.Constraints[0].Min, s.Constraints[0].Max = nil, nil }, []string{"constraints[0]"}},
		{"hard_range with maxDelta", func(s *SceneContract) { s.Constraints[0].MaxDelta = fp(1) }, []string{"constraints[0].maxDelta"}},
		{"max_delta without maxDelta", func(s *SceneContract) {
			s.Constraints = append(s.Constraints, Constraint{ID: "dp", Kind: KindMaxDelta, Variable: "pressure"})
		}, []string{"constraints[5].maxDelta"}},
		{"max_delta with min", func(s *SceneContract) {
			s.Constraints = append(s.Constraints, Constraint{ID: "dp", Kind: KindMaxDelta, Variable: "pressure", MaxDelta: fp(3), Min: fp(0)})
		}, []string{"constraints[5].min"}},
		{"rate not positive", func(s *SceneContract) {
			s.Constraints = append(s.Constraints, Constraint{ID: "rt", Kind: KindRate, Variable: "temperature", MaxRatePerSec: fp(-1)})
		}, []string{"constraints[5].maxRatePerSec"}},
		{"custom empty", func(s *SceneContract) {
			s.Constraints = append(s.Constraints, Constraint{ID: "c", Kind: KindCustom, Expression: "  "})
		}, []string{"constraints[5].expression"}},
		{"custom with max", func(s *SceneContract) {
			s.Constraints = append(s.Constraints, Constraint{ID: "c", Kind: KindCustom, Expression: "weight < 34", Max: fp(1)})
		}, []string{"constraints[5].max"}},
		{"node interval", func(s *SceneContract) { s.WritePolicy.MinNodeIntervalSec = 59.9 }, []string{"writePolicy.minNodeIntervalSec"}},
		{"line interval", func(s *SceneContract) { s.WritePolicy.MinLineActionIntervalSec = 0 }, []string{"writePolicy.minLineActionIntervalSec"}},
		{"max actions", func(s *SceneContract) { s.WritePolicy.MaxActionsPerRun = 0 }, []string{"writePolicy.maxActionsPerRun"}},
		{"delta above maxStep", func(s *SceneContract) { s.WritePolicy.MaxDeltaPerAction["hold_time"] = 0.6 }, []string{"writePolicy.maxDeltaPerAction.hold_time"}},
		{"delta zero", func(s *SceneContract) { s.WritePolicy.MaxDeltaPerAction["hold_time"] = 0 }, []string{"writePolicy.maxDeltaPerAction.hold_time"}},
		{"delta missing", func(s *SceneContract) { delete(s.WritePolicy.MaxDeltaPerAction, "hold_time") }, []string{"writePolicy.maxDeltaPerAction.hold_time"}},
		{"delta not a control", func(s *SceneContract) { s.WritePolicy.MaxDeltaPerAction["weight"] = 1 }, []string{"writePolicy.maxDeltaPerAction.weight"}},
		{"physics with space", func(s *SceneContract) { s.PhysicsProfileID = " p" }, []string{"physicsProfileId"}},
		{"dup objective", func(s *SceneContract) { s.ObjectiveProfileIDs = []string{"a", "a"} }, []string{"objectiveProfileIds[1]"}},
		{"status case", func(s *SceneContract) { s.Status = "DRAFT" }, []string{"status"}},
		{"draft with freezer", func(s *SceneContract) { s.FrozenBy = "bob" }, []string{"frozenBy"}},
		{"frozen without freezer", func(s *SceneContract) { s.Status = SceneFrozen }, []string{"frozenBy", "frozenAt"}},
		{"frozen before created", func(s *SceneContract) {
			s.Status, s.FrozenBy, s.FrozenAt = SceneFrozen, "bob", s.CreatedAt.Add(-time.Second)
		}, []string{"frozenAt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultInjectionScene()
			tc.mutate(s)
			wantProblems(t, s.Validate(), tc.fields...)
		})
	}
}

func TestSceneValidateReportsEveryProblem(t *testing.T) {
	s := DefaultInjectionScene()
	s.LineID = ""
	s.WritePolicy.MinNodeIntervalSec = 10
	*s.Controls[2].MaxStep = -1
	s.Constraints[4].Variable = "nope"
	err := s.Validate()
	wantProblems(t, err, "lineId", "writePolicy.minNodeIntervalSec", "controls[2].maxStep", "constraints[4].variable")
	if n := len(ProblemsOf(err)); n < 4 {
		t.Fatalf("want ≥ 4 problems, got %d", n)
	}
}

func TestParseScene(t *testing.T) {
	b, _ := json.Marshal(DefaultInjectionScene())
	var m map[string]any
	mustNil(t, json.Unmarshal(b, &m))

	delete(m, "status")
	nb, _ := json.Marshal(m)
	s, err := ParseScene(nb)
	mustNil(t, err)
	if s.Status != SceneDraft {
		t.Fatalf("missing status parsed as %q", s.Status)
	}

	m["colour"] = "red"
	nb, _ = json.Marshal(m)
	_, err = ParseScene(nb)
	wantProblems(t, err, "colour")
	delete(m, "colour")

	nb, _ = json.Marshal(m)
	_, err = ParseScene(append(nb, []byte(` {}`)...))
	wantProblems(t, err, "$")

	m["writePolicy"].(map[string]any)["maxActionsPerRun"] = "three"
	nb, _ = json.Marshal(m)
	_, err = ParseScene(nb)
	wantProblems(t, err, "writePolicy.maxActionsPerRun")

	_, err = ParseScene([]byte(`{"schemaVersion":`))
	wantProblems(t, err, "$")
}

func TestFreezeCompareAndSet(t *testing.T) {
	s := DefaultInjectionScene()
	h, err := s.Hash()
	mustNil(t, err)
	mustNil(t, s.CheckMutable())

	// A stale hash (the scene changed after review) is refused, nothing changes.
	reviewed := h
	s.WritePolicy.MaxActionsPerRun = 2
	err = s.Freeze("bob", reviewed, t0)
	if core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("stale hash: want AML_CONFLICT, got %v", err)
	}
	if s.Status != SceneDraft || s.FrozenBy != "" {
		t.Fatal("a refused freeze changed the scene")
	}
	h2, _ := s.Hash()

	if err := s.Freeze("", h2, t0); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("empty approver: %v", err)
	}
	if err := s.Freeze("bob", h2, s.CreatedAt.Add(-time.Hour)); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("freeze before createdAt: %v", err)
	}
	bad := s.Clone()
	bad.LineID = ""
	hb, _ := bad.Hash()
	if err := bad.Freeze("bob", hb, t0); core.CodeOf(err) != CodeContractInvalid {
		t.Fatalf("invalid scene frozen: %v", err)
	}

	mustNil(t, s.Freeze("bob", h2, t0.In(time.FixedZone("X", 3600))))
	if s.Status != SceneFrozen || s.FrozenBy != "bob" || !s.FrozenAt.Equal(t0) || s.FrozenAt.Location() != time.UTC {
		t.Fatalf("frozen scene: %+v %v %v", s.Status, s.FrozenBy, s.FrozenAt)
	}
	mustNil(t, s.Validate())
	if h3, _ := s.Hash(); h3 != h2 {
		t.Fatal("freezing changed the hash")
	}
	err = s.CheckMutable()
	if core.CodeOf(err) != CodeSceneFrozen {
		t.Fatalf("CheckMutable on frozen: %v", err)
	}
	var ae *core.Error
	if !asErr(err, &ae) || ae.Kind() != core.KindConflict {
		t.Fatalf("AML_SCENE_FROZEN status: %+v", ae)
	}
	if err := s.Freeze("carol", h2, t0); core.CodeOf(err) != CodeSceneFrozen {
		t.Fatalf("second freeze: %v", err)
	}

	// A frozen scene survives a JSON round trip as frozen and valid.
	b, _ := json.Marshal(s)
	s2, err := ParseScene(b)
	mustNil(t, err)
	if s2.Status != SceneFrozen || core.CodeOf(s2.CheckMutable()) != CodeSceneFrozen {
		t.Fatal("round trip lost frozen status")
	}
}

func TestNextVersion(t *testing.T) {
	s := DefaultInjectionScene()
	h, _ := s.Hash()
	mustNil(t, s.Freeze("bob", h, t0))
	n, err := s.NextVersion()
	mustNil(t, err)
	if n.SceneVersion != "1.1.0" || n.Status != SceneDraft || n.FrozenBy != "" || !n.FrozenAt.IsZero() {
		t.Fatalf("next version: %s %s %q %v", n.SceneVersion, n.Status, n.FrozenBy, n.FrozenAt)
	}
	mustNil(t, n.Validate())
	mustNil(t, n.CheckMutable())
	n.WritePolicy.MaxDeltaPerAction["hold_time"] = 0.1
	n.Controls[0].Min = fp(55)
	if s.WritePolicy.MaxDeltaPerAction["hold_time"] != 0.5 || *s.Controls[0].Min != 50 {
		t.Fatal("NextVersion shares state with the frozen scene")
	}
	if hn, _ := n.Hash(); hn == h {
		t.Fatal("new version has the old hash")
	}
	s.SceneVersion = "2.17.3"
	n, _ = s.NextVersion()
	if n.SceneVersion != "2.18.0" {
		t.Fatalf("2.17.3 → %s", n.SceneVersion)
	}
	s.SceneVersion = "v1"
	if _, err := s.NextVersion(); core.CodeOf(err) != CodeContractInvalid {
		t.Fatalf("bad version: %v", err)
	}
}

func TestSceneHashRejectsNonFinite(t *testing.T) {
	s := DefaultInjectionScene()
	s.WritePolicy.MinNodeIntervalSec = posInf()
	wantProblems(t, s.Validate(), "writePolicy.minNodeIntervalSec")
	if _, err := s.Hash(); core.CodeOf(err) != core.CodeNonFinite {
		t.Fatalf("hash of non-finite: %v", err)
	}
}
