package contract

import "time"

// ObjectiveSchemaVersion is the objective profile schema this package
// writes and the newest it reads.
const ObjectiveSchemaVersion = 1

// MaxHorizonSteps bounds an objective's horizon (as the dataset horizon).
const MaxHorizonSteps = 512

// TrustRegion bounds where a candidate may move one control: an absolute
// window [Min, Max] and a largest total deviation MaxDelta from the
// snapshot's current value.
type TrustRegion struct {
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
	MaxDelta *float64 `json:"maxDelta,omitempty"`
}

// ObjectiveProfile is what a recommendation optimises: target setpoints
// with weights, control costs and a trust region per control.
type ObjectiveProfile struct {
	SchemaVersion int       `json:"schemaVersion"`
	CreatedAt     time.Time `json:"createdAt"`
	CreatedBy     string    `json:"createdBy"`
	ObjectiveID   string    `json:"objectiveId"`
	// LineID is the line whose twin may optimise for the profile; empty
	// is a global profile (any line's; only an admin stores one). A
	// stored profile's line never changes.
	LineID      string `json:"lineId,omitempty"`
	TwinModelID string `json:"twinModelId,omitempty"`
	// Targets: setpoint per target variable.
	Targets map[string]float64 `json:"targets"`
	// Weights: weight (≥ 0) per target; a target without a weight is
	// refused, and at least one weight is > 0.
	Weights map[string]float64 `json:"weights"`
	// ControlCosts: cost (≥ 0) per unit move of a control.
	ControlCosts map[string]float64     `json:"controlCosts,omitempty"`
	HorizonSteps int                    `json:"horizonSteps"`
	TrustRegion  map[string]TrustRegion `json:"trustRegion,omitempty"`
}

// Validate checks the profile on its own: at least one target, finite
// setpoints, a weight ≥ 0 for every target and none for other names, at
// least one weight > 0, control costs ≥ 0, 1 ≤ horizonSteps ≤ 512, trust
// regions with min < max and maxDelta > 0 and at least one bound.
func (o *ObjectiveProfile) Validate() error {
	var p problems
	o.check(&p)
	return p.err()
}

func (o *ObjectiveProfile) check(p *problems) {
	checkSchemaVersion(p, o.SchemaVersion, ObjectiveSchemaVersion)
	checkTime(p, "createdAt", o.CreatedAt, true)
	checkRef(p, "createdBy", o.CreatedBy)
	checkRef(p, "objectiveId", o.ObjectiveID)
	checkOptRef(p, "lineId", o.LineID)
	checkOptRef(p, "twinModelId", o.TwinModelID)
	if len(o.Targets) == 0 {
		p.add("targets", "at least one target is required")
	}
	checkValues(p, "targets", o.Targets)
	checkValues(p, "weights", o.Weights)
	positive := false
	for _, k := range sortedKeys(o.Weights) {
		w := o.Weights[k]
		if _, ok := o.Targets[k]; !ok {
			p.add("weights."+k, "%q is not a target of the profile", k)
		}
		if finite(w) && w < 0 {
			p.add("weights."+k, "must be ≥ 0")
		}
		positive = positive || w > 0
	}
	for _, k := range sortedKeys(o.Targets) {
		if _, ok := o.Weights[k]; !ok {
			p.add("weights."+k, "every target needs a weight")
		}
	}
	if len(o.Targets) > 0 && !positive {
		p.add("weights", "at least one weight must be > 0")
	}
	checkValues(p, "controlCosts", o.ControlCosts)
	for _, k := range sortedKeys(o.ControlCosts) {
		if c := o.ControlCosts[k]; finite(c) && c < 0 {
			p.add("controlCosts."+k, "must be ≥ 0")
		}
	}
	if o.HorizonSteps < 1 || o.HorizonSteps > MaxHorizonSteps {
		p.add("horizonSteps", "must be within 1…%d", MaxHorizonSteps)
	}
	if checkCount(p, "trustRegion", len(o.TrustRegion)) {
		for _, k := range sortedKeys(o.TrustRegion) {
			f := "trustRegion." + k
			r := o.TrustRegion[k]
			checkName(p, f, k)
			checkRange(p, f, r.Min, r.Max)
			if r.MaxDelta != nil && (!finite(*r.MaxDelta) || *r.MaxDelta <= 0) {
				p.add(f+".maxDelta", "must be a finite number > 0")
			}
			if r.Min == nil && r.Max == nil && r.MaxDelta == nil {
				p.add(f, "a trust region needs min, max or maxDelta")
			}
		}
	}
}

// CheckAgainst validates the profile and checks it against the scene: the
// objective is one of the scene's objectiveProfileIds; targets name
// observations (role target or observation); controlCosts and trustRegion
// name controls; a trust region window lies within the control's
// [min, max].
func (o *ObjectiveProfile) CheckAgainst(s *SceneContract) error {
	var p problems
	o.check(&p)
	listed := false
	for _, id := range s.ObjectiveProfileIDs {
		listed = listed || id == o.ObjectiveID
	}
	if !listed {
		p.add("objectiveId", "%q is not one of the scene's objectiveProfileIds", o.ObjectiveID)
	}
	obs := map[string]bool{}
	for _, v := range s.Observations {
		obs[v.ID] = true
	}
	for _, k := range sortedKeys(o.Targets) {
		if !obs[k] {
			p.add("targets."+k, "%q is not an observation or target of the scene", k)
		}
	}
	for _, k := range sortedKeys(o.ControlCosts) {
		if s.Control(k) == nil {
			p.add("controlCosts."+k, "%q is not a control of the scene", k)
		}
	}
	for _, k := range sortedKeys(o.TrustRegion) {
		f := "trustRegion." + k
		r := o.TrustRegion[k]
		c := s.Control(k)
		if c == nil {
			p.add(f, "%q is not a control of the scene", k)
			continue
		}
		if r.Min != nil && c.Min != nil && *r.Min < *c.Min {
			p.add(f+".min", "%v is below the control's min %v", *r.Min, *c.Min)
		}
		if r.Max != nil && c.Max != nil && *r.Max > *c.Max {
			p.add(f+".max", "%v is above the control's max %v", *r.Max, *c.Max)
		}
	}
	return p.err()
}

// Hash is core.CanonicalHash of the whole profile (createdAt in UTC): the
// objectiveHash a certificate names.
func (o *ObjectiveProfile) Hash() (string, error) {
	c := *o
	c.CreatedAt = utc(c.CreatedAt)
	return hashWithout(&c)
}

// DefaultInjectionObjective is the objective "weight-quality" of
// DefaultInjectionScene (a fresh copy on every call): hold the part weight
// at 32.0 g over a 60-step horizon. The simulated line
// (internal/sim) makes parts of about 32.2–32.6 g at its recipe's nominal
// setpoints (hold pressure 65 bar, 8 s, 245 degC), so a smaller hold
// pressure moves the weight toward the target. Control costs are small
// (0.01 per unit moved), so a move has to pay for itself; the trust
// region is each control's scene range with the write policy's
// maxDeltaPerAction as the largest total deviation from the snapshot's
// value. Created by "aml-twin-runtime" at DefaultSceneCreatedAt, so its
// hash is reproducible.
func DefaultInjectionObjective() *ObjectiveProfile {
	f := func(x float64) *float64 { return &x }
	return &ObjectiveProfile{
		SchemaVersion: ObjectiveSchemaVersion,
		CreatedAt:     DefaultSceneCreatedAt,
		CreatedBy:     "aml-twin-runtime",
		ObjectiveID:   "weight-quality",
		LineID:        DefaultInjectionScene().LineID,
		Targets:       map[string]float64{"weight": 32.0},
		Weights:       map[string]float64{"weight": 1},
		ControlCosts:  map[string]float64{"hold_pressure": 0.01, "hold_time": 0.01, "melt_temperature_setpoint": 0.01},
		HorizonSteps:  60,
		TrustRegion: map[string]TrustRegion{
			"hold_pressure":             {Min: f(50), Max: f(90), MaxDelta: f(2)},
			"hold_time":                 {Min: f(4), Max: f(14), MaxDelta: f(0.5)},
			"melt_temperature_setpoint": {Min: f(235), Max: f(260), MaxDelta: f(2)},
		},
	}
}
