package contract

import "time"

// PhysicsManifestSchemaVersion is the manifest schema this package writes
// and the newest it reads.
const PhysicsManifestSchemaVersion = 1

// Physics backends.
const (
	// BackendPhysicsLanguage: a model of AML's physics equation language
	// (internal/physics).
	BackendPhysicsLanguage = "aml-physics"
	// BackendPyTorch: an external PyTorch model.
	BackendPyTorch = "pytorch"
	// BackendTypeScript: upstream's built-in TypeScript grey-box (import).
	BackendTypeScript = "typescript"
)

// PhysicsParameter is one calibratable parameter: value within [min, max].
type PhysicsParameter struct {
	Value float64  `json:"value"`
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
	Unit  string   `json:"unit,omitempty"`
}

// ParameterPrior bounds a parameter for calibration.
type ParameterPrior struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// PhysicsModelManifest describes a physics model of a scene.
type PhysicsModelManifest struct {
	SchemaVersion        int                         `json:"schemaVersion"`
	CreatedAt            time.Time                   `json:"createdAt"`
	CreatedBy            string                      `json:"createdBy"`
	PhysicsModelID       string                      `json:"physicsModelId"`
	Version              string                      `json:"version"`
	SceneID              string                      `json:"sceneId"`
	Backend              string                      `json:"backend"`
	StateVariables       []string                    `json:"stateVariables,omitempty"`
	ControlVariables     []string                    `json:"controlVariables,omitempty"`
	DisturbanceVariables []string                    `json:"disturbanceVariables,omitempty"`
	Parameters           map[string]PhysicsParameter `json:"parameters,omitempty"`
	ParameterPriors      map[string]ParameterPrior   `json:"parameterPriors,omitempty"`
	SourceHash           string                      `json:"sourceHash,omitempty"`
	ArtifactHash         string                      `json:"artifactHash,omitempty"`
}

// Validate checks the manifest: required fields, backend, variable names
// unique across the three lists, parameters finite with min ≤ value ≤ max,
// priors only for declared parameters with min < max and containing the
// value, hashes lower-case hex sha256.
func (m *PhysicsModelManifest) Validate() error {
	var p problems
	checkSchemaVersion(&p, m.SchemaVersion, PhysicsManifestSchemaVersion)
	checkTime(&p, "createdAt", m.CreatedAt, true)
	checkRef(&p, "createdBy", m.CreatedBy)
	checkRef(&p, "physicsModelId", m.PhysicsModelID)
	checkRef(&p, "version", m.Version)
	checkRef(&p, "sceneId", m.SceneID)
	switch m.Backend {
	case BackendPhysicsLanguage, BackendPyTorch, BackendTypeScript:
	default:
		p.add("backend", "must be %s, %s or %s, not %q", BackendPhysicsLanguage, BackendPyTorch, BackendTypeScript, m.Backend)
	}
	seen := map[string]bool{}
	for _, l := range []struct {
		f  string
		vs []string
	}{{"stateVariables", m.StateVariables}, {"controlVariables", m.ControlVariables}, {"disturbanceVariables", m.DisturbanceVariables}} {
		if !checkCount(&p, l.f, len(l.vs)) {
			continue
		}
		for i, v := range l.vs {
			f := idx(l.f, i)
			if checkName(&p, f, v) {
				if seen[v] {
					p.add(f, "duplicate variable %q", v)
				}
				seen[v] = true
			}
		}
	}
	if checkCount(&p, "parameters", len(m.Parameters)) {
		for _, k := range sortedKeys(m.Parameters) {
			f := "parameters." + k
			x := m.Parameters[k]
			checkName(&p, f, k)
			okV := checkFinite(&p, f+".value", x.Value)
			checkRange(&p, f, x.Min, x.Max)
			if okV && x.Min != nil && finite(*x.Min) && x.Value < *x.Min {
				p.add(f+".value", "%v is below min %v", x.Value, *x.Min)
			}
			if okV && x.Max != nil && finite(*x.Max) && x.Value > *x.Max {
				p.add(f+".value", "%v is above max %v", x.Value, *x.Max)
			}
		}
	}
	if checkCount(&p, "parameterPriors", len(m.ParameterPriors)) {
		for _, k := range sortedKeys(m.ParameterPriors) {
			f := "parameterPriors." + k
			pr := m.ParameterPriors[k]
			x, ok := m.Parameters[k]
			if !ok {
				p.add(f, "%q is not a parameter", k)
			}
			lo, hi := pr.Min, pr.Max
			checkRange(&p, f, &lo, &hi)
			if ok && finite(x.Value) && finite(lo) && finite(hi) && (x.Value < lo || x.Value > hi) {
				p.add(f, "parameter value %v is outside the prior [%v, %v]", x.Value, lo, hi)
			}
		}
	}
	checkHash(&p, "sourceHash", m.SourceHash, false)
	checkHash(&p, "artifactHash", m.ArtifactHash, false)
	return p.err()
}

// Hash is core.CanonicalHash of the whole manifest (createdAt in UTC): the
// modelHash a certificate names when the model is a pure physics model.
func (m *PhysicsModelManifest) Hash() (string, error) {
	c := *m
	c.CreatedAt = utc(c.CreatedAt)
	return hashWithout(&c)
}
