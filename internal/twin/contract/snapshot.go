package contract

import (
	"fmt"
	"math"
	"time"
)

// TwinSnapshotSchemaVersion is the twin snapshot schema this package
// writes and the newest it reads.
const TwinSnapshotSchemaVersion = 1

// DataQuality describes the data a twin snapshot was estimated from.
type DataQuality struct {
	Fresh          bool     `json:"fresh"`
	Completeness   float64  `json:"completeness"` // 0…1
	StaleNodeIDs   []string `json:"staleNodeIds,omitempty"`
	DuplicateCount int      `json:"duplicateCount,omitempty"`
}

// TwinSnapshot is the estimated state of a line at one instant: the
// starting point of virtual trials.
type TwinSnapshot struct {
	SchemaVersion        int                `json:"schemaVersion"`
	CreatedAt            time.Time          `json:"createdAt"`
	CreatedBy            string             `json:"createdBy"`
	SnapshotID           string             `json:"snapshotId"`
	SceneID              string             `json:"sceneId"`
	SceneVersion         string             `json:"sceneVersion"`
	LineID               string             `json:"lineId"`
	ProductID            string             `json:"productId,omitempty"`
	RecipeID             string             `json:"recipeId,omitempty"`
	Phase                string             `json:"phase"`
	CapturedAt           time.Time          `json:"capturedAt"`
	DAQWatermark         int64              `json:"daqWatermark"` // epoch ms of the newest sample used
	SourceSequence       string             `json:"sourceSequence,omitempty"`
	ControlValues        map[string]float64 `json:"controlValues,omitempty"`
	StateEstimate        map[string]float64 `json:"stateEstimate,omitempty"`
	Disturbances         map[string]float64 `json:"disturbances,omitempty"`
	DataQuality          DataQuality        `json:"dataQuality"`
	EstimatorVersion     string             `json:"estimatorVersion"`
	BindingSnapshotHash  string             `json:"bindingSnapshotHash,omitempty"`
	PhysicsModelVersion  string             `json:"physicsModelVersion,omitempty"`
	ResidualModelVersion string             `json:"residualModelVersion,omitempty"`
	// Window is the recent history the snapshot was taken from, on the
	// model's grid: what trials start from (hashed with the snapshot, so a
	// certificate's snapshotHash covers the data its trial began at).
	Window *SnapshotWindow `json:"window,omitempty"`
	// SnapshotHash is Hash(); empty until Seal.
	SnapshotHash string `json:"snapshotHash,omitempty"`
}

// SnapshotWindow is a stretch of recent cleaned samples on a regular grid:
// Steps rows ending at EndMs (epoch ms, the last row), BeatMs apart.
// Values maps a node id to its Steps values, oldest first; null (nil) marks
// a grid step without a usable sample (missing, bad quality, cleaned out).
// Window rows never hold invented values: gaps stay null.
type SnapshotWindow struct {
	BeatMs int64                 `json:"beatMs"`
	EndMs  int64                 `json:"endMs"`
	Steps  int                   `json:"steps"`
	Values map[string][]*float64 `json:"values"`
	// RunID is the run the window's rows belong to ("" when none).
	RunID string `json:"runId,omitempty"`
}

// Validate checks the window's shape.
func (w *SnapshotWindow) Validate() error {
	var p problems
	w.check(&p, "window")
	return p.err()
}

func (w *SnapshotWindow) check(p *problems, f string) {
	if w.BeatMs <= 0 {
		p.add(f+".beatMs", "must be positive")
	}
	if w.Steps < 1 {
		p.add(f+".steps", "must be at least 1")
	}
	for id, vs := range w.Values {
		if len(vs) != w.Steps {
			p.add(f+".values."+id, "has %d values, the window %d steps", len(vs), w.Steps)
		}
		for i, v := range vs {
			if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
				p.add(fmt.Sprintf("%s.values.%s[%d]", f, id, i), "must be finite or null")
				break
			}
		}
	}
}

// TwinSnapshotHashExcluded lists the fields TwinSnapshot.Hash leaves out.
var TwinSnapshotHashExcluded = []string{"snapshotHash"}

// Validate checks the snapshot on its own; CheckAgainst checks it against
// its scene.
func (t *TwinSnapshot) Validate() error {
	var p problems
	t.check(&p)
	return p.err()
}

func (t *TwinSnapshot) check(p *problems) {
	checkSchemaVersion(p, t.SchemaVersion, TwinSnapshotSchemaVersion)
	checkTime(p, "createdAt", t.CreatedAt, true)
	checkRef(p, "createdBy", t.CreatedBy)
	checkRef(p, "snapshotId", t.SnapshotID)
	checkRef(p, "sceneId", t.SceneID)
	if _, err := parseSemver(t.SceneVersion); err != nil {
		p.add("sceneVersion", "%v", err)
	}
	checkRef(p, "lineId", t.LineID)
	checkOptRef(p, "productId", t.ProductID)
	checkOptRef(p, "recipeId", t.RecipeID)
	checkRef(p, "phase", t.Phase)
	checkTime(p, "capturedAt", t.CapturedAt, true)
	if t.DAQWatermark < 0 {
		p.add("daqWatermark", "must be ≥ 0")
	}
	checkOptRef(p, "sourceSequence", t.SourceSequence)
	checkValues(p, "controlValues", t.ControlValues)
	checkValues(p, "stateEstimate", t.StateEstimate)
	checkValues(p, "disturbances", t.Disturbances)
	q := t.DataQuality
	if !finite(q.Completeness) || q.Completeness < 0 || q.Completeness > 1 {
		p.add("dataQuality.completeness", "must be within [0, 1]")
	}
	if checkCount(p, "dataQuality.staleNodeIds", len(q.StaleNodeIDs)) {
		for i, id := range q.StaleNodeIDs {
			checkRef(p, idx("dataQuality.staleNodeIds", i), id)
		}
	}
	if q.DuplicateCount < 0 {
		p.add("dataQuality.duplicateCount", "must be ≥ 0")
	}
	checkRef(p, "estimatorVersion", t.EstimatorVersion)
	checkHash(p, "bindingSnapshotHash", t.BindingSnapshotHash, false)
	checkOptRef(p, "physicsModelVersion", t.PhysicsModelVersion)
	checkOptRef(p, "residualModelVersion", t.ResidualModelVersion)
	if t.Window != nil {
		t.Window.check(p, "window")
	}
	if t.SnapshotHash != "" {
		checkHash(p, "snapshotHash", t.SnapshotHash, true)
		if len(*p) == 0 {
			if h, err := t.Hash(); err != nil {
				p.add("snapshotHash", "cannot hash: %v", err)
			} else if h != t.SnapshotHash {
				p.add("snapshotHash", "is %s but the content hashes to %s", t.SnapshotHash, h)
			}
		}
	}
}

// CheckAgainst validates the snapshot and checks it against the scene:
// same scene id, version and line, phase one of the scene's phases,
// controlValues keyed by controls, stateEstimate by states, disturbances
// by disturbances, and a value for every control.
func (t *TwinSnapshot) CheckAgainst(s *SceneContract) error {
	var p problems
	t.check(&p)
	if t.SceneID != s.SceneID {
		p.add("sceneId", "is %q, the scene is %q", t.SceneID, s.SceneID)
	}
	if t.SceneVersion != s.SceneVersion {
		p.add("sceneVersion", "is %q, the scene is %q", t.SceneVersion, s.SceneVersion)
	}
	if t.LineID != s.LineID {
		p.add("lineId", "is %q, the scene's line is %q", t.LineID, s.LineID)
	}
	inPhases := false
	for _, ph := range s.Phases {
		inPhases = inPhases || ph == t.Phase
	}
	if !inPhases {
		p.add("phase", "%q is not a phase of the scene", t.Phase)
	}
	keyed := func(field string, m map[string]float64, vs []SceneVariable) {
		ids := map[string]bool{}
		for _, v := range vs {
			ids[v.ID] = true
		}
		for _, k := range sortedKeys(m) {
			if !ids[k] {
				p.add(field+"."+k, "%q is not a variable of this role in the scene", k)
			}
		}
	}
	keyed("controlValues", t.ControlValues, s.Controls)
	keyed("stateEstimate", t.StateEstimate, s.States)
	keyed("disturbances", t.Disturbances, s.Disturbances)
	for _, c := range s.Controls {
		if _, ok := t.ControlValues[c.ID]; !ok {
			p.add("controlValues."+c.ID, "missing: every control needs its current value")
		}
	}
	return p.err()
}

// Hash is core.CanonicalHash of the snapshot without snapshotHash, times
// in UTC: it covers every other field.
func (t *TwinSnapshot) Hash() (string, error) {
	c := *t
	c.CreatedAt, c.CapturedAt = utc(c.CreatedAt), utc(c.CapturedAt)
	return hashWithout(&c, TwinSnapshotHashExcluded...)
}

// Seal sets SnapshotHash to Hash.
func (t *TwinSnapshot) Seal() error {
	h, err := t.Hash()
	if err != nil {
		return err
	}
	t.SnapshotHash = h
	return nil
}
