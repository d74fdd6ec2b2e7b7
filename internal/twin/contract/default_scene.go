package contract

import "time"

// DefaultInjectionScene is the scene of the injection-moulding grey-box
// (examples/physics/injection.aml), ported from upstream
// defaultInjectionScene (twin/physics-runtime.ts) as a new draft (a fresh
// copy on every call). It is created by "aml-twin-runtime" at the fixed
// time DefaultSceneCreatedAt (upstream: the current time), so the built-in
// scene has one reproducible hash; set CreatedAt/CreatedBy to adopt it.
//
// Differences from upstream, so that it validates and agrees with the
// physics model:
//   - flash_rate and sink_rate (role guard) move from observations to
//     guards, and the guards pressure and temperature, which upstream
//     constraints referred to without declaring them, are declared with the
//     ranges of the corresponding controls;
//   - every constraint names its variable;
//   - the physics model's state fill_fraction and disturbance
//     ambient_temperature are declared;
//   - dimensionless units are "1" (upstream "ratio"), as in the physics
//     language.
func DefaultInjectionScene() *SceneContract {
	f := func(x float64) *float64 { return &x }
	return &SceneContract{
		SchemaVersion: SceneSchemaVersion,
		CreatedAt:     DefaultSceneCreatedAt,
		CreatedBy:     "aml-twin-runtime",
		SceneID:       "injection-hold-control",
		SceneVersion:  "1.0.0",
		LineID:        "line-injection-01",
		ProductID:     "product-injection-a",
		RecipeID:      "recipe-injection-a",
		Phases:        []string{"startup", "filling", "holding", "cooling", "completed"},
		Controls: []SceneVariable{
			{ID: "hold_pressure", Role: RoleControl, PhysicalMeaning: "hold pressure setpoint", Unit: "bar", Min: f(50), Max: f(90), MaxStep: f(2)},
			{ID: "hold_time", Role: RoleControl, PhysicalMeaning: "hold time setpoint", Unit: "s", Min: f(4), Max: f(14), MaxStep: f(0.5)},
			{ID: "melt_temperature_setpoint", Role: RoleControl, PhysicalMeaning: "melt temperature setpoint", Unit: "degC", Min: f(235), Max: f(260), MaxStep: f(2)},
		},
		States: []SceneVariable{
			{ID: "melt_temperature", Role: RoleState, PhysicalMeaning: "melt temperature", Unit: "degC"},
			{ID: "cavity_pressure", Role: RoleState, PhysicalMeaning: "cavity pressure", Unit: "bar"},
			{ID: "fill_fraction", Role: RoleState, PhysicalMeaning: "cavity fill fraction", Unit: "1", Min: f(0), Max: f(1)},
		},
		Disturbances: []SceneVariable{
			{ID: "ambient_temperature", Role: RoleDisturbance, PhysicalMeaning: "ambient temperature", Unit: "degC"},
			{ID: "material_batch_factor", Role: RoleDisturbance, PhysicalMeaning: "material batch factor", Unit: "1"},
		},
		Observations: []SceneVariable{
			{ID: "weight", Role: RoleTarget, PhysicalMeaning: "part weight", Unit: "g", Min: f(31), Max: f(34)},
		},
		Guards: []SceneVariable{
			{ID: "flash_rate", Role: RoleGuard, PhysicalMeaning: "flash defect rate", Unit: "%"},
			{ID: "sink_rate", Role: RoleGuard, PhysicalMeaning: "sink mark defect rate", Unit: "%"},
			{ID: "pressure", Role: RoleGuard, PhysicalMeaning: "post-step cavity pressure", Unit: "bar"},
			{ID: "temperature", Role: RoleGuard, PhysicalMeaning: "post-step melt temperature", Unit: "degC"},
		},
		Constraints: []Constraint{
			{ID: "weight", Kind: KindHardRange, Variable: "weight", Min: f(31), Max: f(34)},
			{ID: "flash_rate", Kind: KindHardRange, Variable: "flash_rate", Min: f(0), Max: f(1.0)},
			{ID: "sink_rate", Kind: KindHardRange, Variable: "sink_rate", Min: f(0), Max: f(1.0)},
			{ID: "pressure", Kind: KindHardRange, Variable: "pressure", Min: f(50), Max: f(90)},
			{ID: "temperature", Kind: KindHardRange, Variable: "temperature", Min: f(235), Max: f(260)},
		},
		PhysicsProfileID:    "injection-greybox-v1",
		ObjectiveProfileIDs: []string{"weight-quality"},
		WritePolicy: WritePolicy{
			MinNodeIntervalSec:       60,
			MinLineActionIntervalSec: 60,
			MaxActionsPerRun:         3,
			MaxDeltaPerAction:        map[string]float64{"hold_pressure": 2, "hold_time": 0.5, "melt_temperature_setpoint": 2},
		},
		Status: SceneDraft,
	}
}

// DefaultSceneCreatedAt is the createdAt of DefaultInjectionScene.
var DefaultSceneCreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
