package contract

import "math"

// SceneSchemaVersionMax is the newest scene schema this package reads.
// Version 2 adds unmeasuredDisturbances; a scene without them is written
// as version 1 ([SceneSchemaVersion]), so every scene that does not
// declare one hashes as before.
const SceneSchemaVersionMax = 2

// DisturbanceModel is how an unmeasured disturbance evolves between two
// steps of the model's grid.
type DisturbanceModel string

// Disturbance models.
const (
	// DisturbanceOutputBias: a constant additive bias on the target over
	// the window and the horizon (b[k+1] = b[k]); its estimate is the
	// weighted mean of the window's prediction errors.
	DisturbanceOutputBias DisturbanceModel = "output_bias"
	// DisturbanceIntegratedWhiteNoise: an additive bias that walks,
	// b[k+1] = b[k] + w[k], w ~ N(0, processSdPerStep²): the Kalman filter
	// weights recent errors more, and the bias's uncertainty grows over the
	// horizon.
	DisturbanceIntegratedWhiteNoise DisturbanceModel = "integrated_white_noise"
)

// UnmeasuredDisturbance declares an unmeasured disturbance acting on one
// target of the scene (mould wear on part weight, fouling on a level): an
// additive output disturbance the twin estimates from the snapshot window
// and carries over the horizon. Scene schema version 2.
type UnmeasuredDisturbance struct {
	// ID names the disturbance (physics language name rule), unique among
	// the scene's variables and disturbances.
	ID string `json:"id"`
	// Target is the observation (role observation or target) it acts on;
	// at most one disturbance per target.
	Target          string           `json:"target"`
	Model           DisturbanceModel `json:"model"`
	PhysicalMeaning string           `json:"physicalMeaning,omitempty"`
	// PriorSD is the prior standard deviation of the disturbance before
	// the window (target unit, > 0).
	PriorSD float64 `json:"priorSd"`
	// ProcessSDPerStep is the standard deviation of the walk per model
	// step (target unit, > 0): required for integrated_white_noise,
	// refused for output_bias.
	ProcessSDPerStep *float64 `json:"processSdPerStep,omitempty"`
	// MeasurementSD is the standard deviation of the target's prediction
	// error without the disturbance (target unit, > 0). Omitted: the
	// model's one-step conformal half-width over its z-score.
	MeasurementSD *float64 `json:"measurementSd,omitempty"`
	// MaxAbs is the largest disturbance the line can plausibly have
	// (target unit, > 0): an estimate beyond it is out of distribution.
	// Omitted: no limit.
	MaxAbs *float64 `json:"maxAbs,omitempty"`
}

// UnmeasuredDisturbanceFor returns the declared disturbance on target, or
// nil.
func (s *SceneContract) UnmeasuredDisturbanceFor(target string) *UnmeasuredDisturbance {
	for i := range s.UnmeasuredDisturbances {
		if s.UnmeasuredDisturbances[i].Target == target {
			return &s.UnmeasuredDisturbances[i]
		}
	}
	return nil
}

// checkDisturbances validates unmeasuredDisturbances against the scene's
// variables (seen: variable id → its path).
func (s *SceneContract) checkDisturbances(p *problems, seen map[string]string) {
	if len(s.UnmeasuredDisturbances) == 0 {
		return
	}
	const f0 = "unmeasuredDisturbances"
	if s.SchemaVersion < 2 {
		p.add(f0, "needs schemaVersion 2 (the scene says %d)", s.SchemaVersion)
	}
	if !checkCount(p, f0, len(s.UnmeasuredDisturbances)) {
		return
	}
	ids, targets := map[string]bool{}, map[string]bool{}
	obs := map[string]bool{}
	for _, v := range s.Observations {
		obs[v.ID] = true
	}
	pos := func(field string, v float64) {
		if checkFinite(p, field, v) && !(v > 0) {
			p.add(field, "must be positive")
		}
	}
	for i := range s.UnmeasuredDisturbances {
		f := idx(f0, i)
		d := &s.UnmeasuredDisturbances[i]
		if checkName(p, f+".id", d.ID) {
			if first, dup := seen[d.ID]; dup {
				p.add(f+".id", "%q is already declared at %s", d.ID, first)
			} else if ids[d.ID] {
				p.add(f+".id", "duplicate disturbance %q", d.ID)
			}
			ids[d.ID] = true
		}
		switch {
		case d.Target == "":
			p.add(f+".target", "required")
		case !obs[d.Target]:
			p.add(f+".target", "%q is no observation of the scene", d.Target)
		case targets[d.Target]:
			p.add(f+".target", "%q already has a disturbance", d.Target)
		}
		targets[d.Target] = true
		pos(f+".priorSd", d.PriorSD)
		switch d.Model {
		case DisturbanceOutputBias:
			if d.ProcessSDPerStep != nil {
				p.add(f+".processSdPerStep", "an output_bias does not walk; leave it out")
			}
		case DisturbanceIntegratedWhiteNoise:
			if d.ProcessSDPerStep == nil {
				p.add(f+".processSdPerStep", "required for integrated_white_noise")
			} else {
				pos(f+".processSdPerStep", *d.ProcessSDPerStep)
			}
		default:
			p.add(f+".model", "must be %q or %q, not %q", DisturbanceOutputBias, DisturbanceIntegratedWhiteNoise, d.Model)
		}
		if d.MeasurementSD != nil {
			pos(f+".measurementSd", *d.MeasurementSD)
		}
		if d.MaxAbs != nil {
			pos(f+".maxAbs", *d.MaxAbs)
		}
	}
}

// ProcessVar is the disturbance's walk variance per step (0 for a bias).
func (d *UnmeasuredDisturbance) ProcessVar() float64 {
	if d.Model != DisturbanceIntegratedWhiteNoise || d.ProcessSDPerStep == nil {
		return 0
	}
	return *d.ProcessSDPerStep * *d.ProcessSDPerStep
}

// Limit is MaxAbs, +Inf when omitted.
func (d *UnmeasuredDisturbance) Limit() float64 {
	if d.MaxAbs == nil {
		return math.Inf(1)
	}
	return *d.MaxAbs
}
