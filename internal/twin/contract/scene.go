package contract

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// SceneSchemaVersion is the scene contract schema this package writes and
// the newest it reads.
const SceneSchemaVersion = 1

// Role is the part a variable plays in a scene.
type Role string

// Variable roles. Each list of a scene holds one role (observations hold
// observation or target). The upstream role "feature" is a dataset role
// and not accepted in scenes.
const (
	RoleControl     Role = "control"
	RoleState       Role = "state"
	RoleDisturbance Role = "disturbance"
	RoleObservation Role = "observation"
	RoleTarget      Role = "target"
	RoleGuard       Role = "guard"
)

// SceneVariable is one variable of a scene.
type SceneVariable struct {
	// ID is the variable name (physics language name rule), unique across
	// all lists of the scene.
	ID string `json:"id"`
	// NodeID optionally names the node; the authoritative mapping is the
	// NodeBindingSnapshot.
	NodeID          string   `json:"nodeId,omitempty"`
	Role            Role     `json:"role"`
	PhysicalMeaning string   `json:"physicalMeaning"`
	Unit            string   `json:"unit"` // "1" for dimensionless
	Min             *float64 `json:"min,omitempty"`
	Max             *float64 `json:"max,omitempty"`
	// MaxStep is the largest change of a control between two consecutive
	// steps of a candidate trajectory. Required for controls, refused for
	// other roles.
	MaxStep          *float64 `json:"maxStep,omitempty"`
	SamplingPeriodMs *int64   `json:"samplingPeriodMs,omitempty"`
	// PhaseScope limits the variable to some phases of the scene.
	PhaseScope []string `json:"phaseScope,omitempty"`
}

// ConstraintKind is how a constraint limits its variable.
type ConstraintKind string

// Constraint kinds.
const (
	// KindHardRange: Min ≤ value ≤ Max at every step (at least one bound).
	KindHardRange ConstraintKind = "hard_range"
	// KindMaxDelta: |value[t] − value[t−1]| ≤ MaxDelta between steps.
	KindMaxDelta ConstraintKind = "max_delta"
	// KindRate: |value[t] − value[t−1]| / dt ≤ MaxRatePerSec.
	KindRate ConstraintKind = "rate"
	// KindCustom: Expression, a boolean expression of the physics equation
	// language over the scene's variables, holds at every step. Stored
	// here and checked by the physics language when a trial evaluates it.
	KindCustom ConstraintKind = "custom"
)

// Constraint is one constraint of a scene. Only the limit fields of its
// kind may be set.
type Constraint struct {
	ID   string         `json:"id"`
	Kind ConstraintKind `json:"kind"`
	// Variable is the constrained variable; required except for custom
	// constraints (where it is optional and names the main variable).
	Variable      string   `json:"variable,omitempty"`
	Min           *float64 `json:"min,omitempty"`
	Max           *float64 `json:"max,omitempty"`
	MaxDelta      *float64 `json:"maxDelta,omitempty"`
	MaxRatePerSec *float64 `json:"maxRatePerSec,omitempty"`
	Expression    string   `json:"expression,omitempty"`
}

// WritePolicy bounds how recommendations may be written to the line.
type WritePolicy struct {
	// MinNodeIntervalSec: least time between two writes to one node (≥ 60).
	MinNodeIntervalSec float64 `json:"minNodeIntervalSec"`
	// MinLineActionIntervalSec: least time between two actions on the
	// line (≥ 60).
	MinLineActionIntervalSec float64 `json:"minLineActionIntervalSec"`
	// MaxActionsPerRun: most actions in one batch run (≥ 1).
	MaxActionsPerRun int `json:"maxActionsPerRun"`
	// MaxDeltaPerAction: per control, the largest change one action may
	// apply; one entry for every control, 0 < value ≤
	// MaxDeltaPerActionFactor × the control's maxStep.
	MaxDeltaPerAction map[string]float64 `json:"maxDeltaPerAction"`
}

// Write policy limits.
const (
	// MinWriteIntervalSec is the least allowed value of both minimum
	// intervals of a write policy.
	MinWriteIntervalSec = 60
	// MaxDeltaPerActionFactor bounds a control's maxDeltaPerAction by
	// factor × its maxStep. It is 1: a virtual trial only validates moves
	// of at most maxStep between steps, so one write must not jump further
	// than any move a trial has checked.
	MaxDeltaPerActionFactor = 1.0
)

// SceneStatus is the lifecycle state of a scene contract.
type SceneStatus string

// Scene statuses (lower case, one spelling everywhere).
const (
	SceneDraft  SceneStatus = "draft"
	SceneFrozen SceneStatus = "frozen"
)

// SceneContract declares what a twin of a line controls, observes and must
// respect. A draft may change; Freeze makes it immutable.
type SceneContract struct {
	SchemaVersion       int             `json:"schemaVersion"`
	CreatedAt           time.Time       `json:"createdAt"`
	CreatedBy           string          `json:"createdBy"`
	SceneID             string          `json:"sceneId"`
	SceneVersion        string          `json:"sceneVersion"` // MAJOR.MINOR.PATCH
	LineID              string          `json:"lineId"`
	ProductID           string          `json:"productId,omitempty"`
	RecipeID            string          `json:"recipeId,omitempty"`
	Phases              []string        `json:"phases"`
	Controls            []SceneVariable `json:"controls,omitempty"`
	States              []SceneVariable `json:"states,omitempty"`
	Disturbances        []SceneVariable `json:"disturbances,omitempty"`
	Observations        []SceneVariable `json:"observations,omitempty"`
	Guards              []SceneVariable `json:"guards,omitempty"`
	Constraints         []Constraint    `json:"constraints,omitempty"`
	PhysicsProfileID    string          `json:"physicsProfileId,omitempty"` // none for a model without physics (linear, ARX)
	ObjectiveProfileIDs []string        `json:"objectiveProfileIds,omitempty"`
	WritePolicy         WritePolicy     `json:"writePolicy"`
	// UnmeasuredDisturbances declares the unmeasured disturbances the twin
	// estimates (schema version 2; disturbance.go).
	UnmeasuredDisturbances []UnmeasuredDisturbance `json:"unmeasuredDisturbances,omitempty"`
	Status                 SceneStatus             `json:"status"`
	FrozenBy               string                  `json:"frozenBy,omitempty"`
	FrozenAt               time.Time               `json:"frozenAt,omitzero"`
}

// SceneHashExcluded lists the top-level JSON fields SceneContract.Hash
// leaves out: the lifecycle fields, which change when a scene is frozen
// while its content does not.
var SceneHashExcluded = []string{"status", "frozenBy", "frozenAt"}

// ParseScene decodes a scene contract from JSON (unknown fields and
// trailing data refused; a missing status means draft) and validates it.
func ParseScene(data []byte) (*SceneContract, error) {
	var s SceneContract
	if err := decodeStrict(data, &s); err != nil {
		return nil, err
	}
	if s.Status == "" {
		s.Status = SceneDraft
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// sceneList is one role list of a scene.
type sceneList struct {
	field string
	vars  []SceneVariable
	roles []Role
}

func (s *SceneContract) lists() []sceneList {
	return []sceneList{
		{"controls", s.Controls, []Role{RoleControl}},
		{"states", s.States, []Role{RoleState}},
		{"disturbances", s.Disturbances, []Role{RoleDisturbance}},
		{"observations", s.Observations, []Role{RoleObservation, RoleTarget}},
		{"guards", s.Guards, []Role{RoleGuard}},
	}
}

// Variable returns the variable with id, or nil.
func (s *SceneContract) Variable(id string) *SceneVariable {
	for _, l := range [][]SceneVariable{s.Controls, s.States, s.Disturbances, s.Observations, s.Guards} {
		for i := range l {
			if l[i].ID == id {
				return &l[i]
			}
		}
	}
	return nil
}

// Control returns the control with id, or nil.
func (s *SceneContract) Control(id string) *SceneVariable {
	for i := range s.Controls {
		if s.Controls[i].ID == id {
			return &s.Controls[i]
		}
	}
	return nil
}

// Validate checks the scene and reports every problem with its JSON path
// as one AML_CONTRACT_INVALID error (nil when valid). Rules: see
// docs/twin-contracts.md.
func (s *SceneContract) Validate() error {
	var p problems
	checkSchemaVersion(&p, s.SchemaVersion, SceneSchemaVersionMax)
	checkTime(&p, "createdAt", s.CreatedAt, true)
	checkRef(&p, "createdBy", s.CreatedBy)
	checkRef(&p, "sceneId", s.SceneID)
	if _, err := parseSemver(s.SceneVersion); err != nil {
		p.add("sceneVersion", "%v", err)
	}
	checkRef(&p, "lineId", s.LineID)
	checkOptRef(&p, "productId", s.ProductID)
	checkOptRef(&p, "recipeId", s.RecipeID)

	phases := map[string]bool{}
	if len(s.Phases) == 0 {
		p.add("phases", "at least one phase is required")
	} else if checkCount(&p, "phases", len(s.Phases)) {
		for i, ph := range s.Phases {
			f := idx("phases", i)
			if checkRef(&p, f, ph) {
				if phases[ph] {
					p.add(f, "duplicate phase %q", ph)
				}
				phases[ph] = true
			}
		}
	}

	seen := map[string]string{} // variable id → path of its first declaration
	total := 0
	for _, l := range s.lists() {
		total += len(l.vars)
		if !checkCount(&p, l.field, len(l.vars)) {
			continue
		}
		for i := range l.vars {
			f := idx(l.field, i)
			v := &l.vars[i]
			s.checkVariable(&p, f, v, l.roles, phases)
			if isName(v.ID) {
				if first, dup := seen[v.ID]; dup {
					p.add(f+".id", "duplicate variable %q (first declared at %s)", v.ID, first)
				} else {
					seen[v.ID] = f
				}
			}
		}
	}
	if total > MaxItems {
		p.add("$", "%d variables, at most %d allowed", total, MaxItems)
	}
	if len(s.Controls) == 0 {
		p.add("controls", "at least one control is required")
	}

	if checkCount(&p, "constraints", len(s.Constraints)) {
		ids := map[string]bool{}
		for i := range s.Constraints {
			f := idx("constraints", i)
			c := &s.Constraints[i]
			if checkRef(&p, f+".id", c.ID) {
				if ids[c.ID] {
					p.add(f+".id", "duplicate constraint id %q", c.ID)
				}
				ids[c.ID] = true
			}
			checkConstraint(&p, f, c, seen)
		}
	}

	if s.PhysicsProfileID != "" {
		checkRef(&p, "physicsProfileId", s.PhysicsProfileID)
	}
	if checkCount(&p, "objectiveProfileIds", len(s.ObjectiveProfileIDs)) {
		ids := map[string]bool{}
		for i, id := range s.ObjectiveProfileIDs {
			f := idx("objectiveProfileIds", i)
			if checkRef(&p, f, id) {
				if ids[id] {
					p.add(f, "duplicate objective profile id %q", id)
				}
				ids[id] = true
			}
		}
	}
	s.checkWritePolicy(&p)
	s.checkDisturbances(&p, seen)

	switch s.Status {
	case SceneDraft:
		if s.FrozenBy != "" {
			p.add("frozenBy", "must be empty while the scene is a draft")
		}
		if !s.FrozenAt.IsZero() {
			p.add("frozenAt", "must be empty while the scene is a draft")
		}
	case SceneFrozen:
		checkRef(&p, "frozenBy", s.FrozenBy)
		checkTime(&p, "frozenAt", s.FrozenAt, true)
		if !s.FrozenAt.IsZero() && !s.CreatedAt.IsZero() && s.FrozenAt.Before(s.CreatedAt) {
			p.add("frozenAt", "is before createdAt")
		}
	default:
		p.add("status", "must be %q or %q, not %q", SceneDraft, SceneFrozen, s.Status)
	}
	return p.err()
}

func (s *SceneContract) checkVariable(p *problems, f string, v *SceneVariable, roles []Role, phases map[string]bool) {
	checkName(p, f+".id", v.ID)
	checkOptRef(p, f+".nodeId", v.NodeID)
	okRole := false
	for _, r := range roles {
		okRole = okRole || v.Role == r
	}
	if !okRole {
		if len(roles) == 1 {
			p.add(f+".role", "must be %q in this list, not %q", roles[0], v.Role)
		} else {
			p.add(f+".role", "must be %q or %q in this list, not %q", roles[0], roles[1], v.Role)
		}
	}
	checkText(p, f+".physicalMeaning", v.PhysicalMeaning, true)
	checkRef(p, f+".unit", v.Unit)
	checkRange(p, f, v.Min, v.Max)
	if v.Role == RoleControl {
		if v.Min == nil {
			p.add(f+".min", "required for a control")
		}
		if v.Max == nil {
			p.add(f+".max", "required for a control")
		}
		switch {
		case v.MaxStep == nil:
			p.add(f+".maxStep", "required for a control")
		case !finite(*v.MaxStep) || *v.MaxStep <= 0:
			p.add(f+".maxStep", "must be a finite number > 0")
		case v.Min != nil && v.Max != nil && finite(*v.Min) && finite(*v.Max) && *v.MaxStep > *v.Max-*v.Min:
			p.add(f+".maxStep", "maxStep %v exceeds the range width %v", *v.MaxStep, *v.Max-*v.Min)
		}
	} else if v.MaxStep != nil {
		p.add(f+".maxStep", "only controls have a maxStep")
	}
	if v.SamplingPeriodMs != nil && *v.SamplingPeriodMs <= 0 {
		p.add(f+".samplingPeriodMs", "must be > 0")
	}
	if checkCount(p, f+".phaseScope", len(v.PhaseScope)) {
		in := map[string]bool{}
		for j, ph := range v.PhaseScope {
			g := idx(f+".phaseScope", j)
			switch {
			case !phases[ph]:
				p.add(g, "phase %q is not one of the scene's phases", ph)
			case in[ph]:
				p.add(g, "duplicate phase %q", ph)
			}
			in[ph] = true
		}
	}
}

func checkConstraint(p *problems, f string, c *Constraint, vars map[string]string) {
	if c.Variable == "" {
		if c.Kind != KindCustom {
			p.add(f+".variable", "required for a %s constraint", c.Kind)
		}
	} else if _, ok := vars[c.Variable]; !ok {
		p.add(f+".variable", "%q is not a variable of the scene", c.Variable)
	}
	refuse := func(name string, set bool) {
		if set {
			p.add(f+"."+name, "not used by a %s constraint", c.Kind)
		}
	}
	positive := func(name string, x *float64) {
		switch {
		case x == nil:
			p.add(f+"."+name, "required for a %s constraint", c.Kind)
		case !finite(*x) || *x <= 0:
			p.add(f+"."+name, "must be a finite number > 0")
		}
	}
	switch c.Kind {
	case KindHardRange:
		if c.Min == nil && c.Max == nil {
			p.add(f, "a hard_range constraint needs min, max or both")
		}
		checkRange(p, f, c.Min, c.Max)
		refuse("maxDelta", c.MaxDelta != nil)
		refuse("maxRatePerSec", c.MaxRatePerSec != nil)
		refuse("expression", c.Expression != "")
	case KindMaxDelta:
		positive("maxDelta", c.MaxDelta)
		refuse("min", c.Min != nil)
		refuse("max", c.Max != nil)
		refuse("maxRatePerSec", c.MaxRatePerSec != nil)
		refuse("expression", c.Expression != "")
	case KindRate:
		positive("maxRatePerSec", c.MaxRatePerSec)
		refuse("min", c.Min != nil)
		refuse("max", c.Max != nil)
		refuse("maxDelta", c.MaxDelta != nil)
		refuse("expression", c.Expression != "")
	case KindCustom:
		checkText(p, f+".expression", c.Expression, true)
		refuse("min", c.Min != nil)
		refuse("max", c.Max != nil)
		refuse("maxDelta", c.MaxDelta != nil)
		refuse("maxRatePerSec", c.MaxRatePerSec != nil)
	default:
		p.add(f+".kind", "must be hard_range, max_delta, rate or custom, not %q", c.Kind)
	}
}

func (s *SceneContract) checkWritePolicy(p *problems) {
	w := &s.WritePolicy
	const f = "writePolicy"
	if !finite(w.MinNodeIntervalSec) || w.MinNodeIntervalSec < MinWriteIntervalSec {
		p.add(f+".minNodeIntervalSec", "must be a finite number ≥ %d seconds", MinWriteIntervalSec)
	}
	if !finite(w.MinLineActionIntervalSec) || w.MinLineActionIntervalSec < MinWriteIntervalSec {
		p.add(f+".minLineActionIntervalSec", "must be a finite number ≥ %d seconds", MinWriteIntervalSec)
	}
	if w.MaxActionsPerRun < 1 {
		p.add(f+".maxActionsPerRun", "must be ≥ 1")
	}
	if !checkCount(p, f+".maxDeltaPerAction", len(w.MaxDeltaPerAction)) {
		return
	}
	for _, k := range sortedKeys(w.MaxDeltaPerAction) {
		g := f + ".maxDeltaPerAction." + k
		d := w.MaxDeltaPerAction[k]
		c := s.Control(k)
		switch {
		case c == nil:
			p.add(g, "%q is not a control of the scene", k)
		case !finite(d) || d <= 0:
			p.add(g, "must be a finite number > 0")
		case c.MaxStep != nil && finite(*c.MaxStep) && d > MaxDeltaPerActionFactor**c.MaxStep:
			p.add(g, "%v exceeds the control's maxStep %v", d, *c.MaxStep)
		}
	}
	for _, c := range s.Controls {
		if _, ok := w.MaxDeltaPerAction[c.ID]; !ok && isName(c.ID) {
			p.add(f+".maxDeltaPerAction."+c.ID, "required for every control")
		}
	}
}

// Hash is the content hash of the scene: core.CanonicalHash of its JSON
// form without the lifecycle fields in SceneHashExcluded (status,
// frozenBy, frozenAt), with createdAt in UTC. It covers schemaVersion,
// createdAt, createdBy, sceneId, sceneVersion, lineId, productId,
// recipeId, phases, the five variable lists, constraints,
// physicsProfileId, objectiveProfileIds and writePolicy, so freezing does
// not change it and any other change does. Empty optional fields and
// empty lists are omitted from the JSON, so absent and empty hash alike.
func (s *SceneContract) Hash() (string, error) {
	c := *s
	c.CreatedAt = utc(c.CreatedAt)
	return hashWithout(&c, SceneHashExcluded...)
}

// CheckMutable returns AML_SCENE_FROZEN (HTTP 409) if the scene is
// frozen. Every code path that changes a stored scene calls it first.
func (s *SceneContract) CheckMutable() error {
	if s.Status == SceneFrozen {
		return core.FieldErrorf(CodeSceneFrozen, "status", "scene %s version %s was frozen by %s at %s and cannot change; create a new version",
			s.SceneID, s.SceneVersion, s.FrozenBy, s.FrozenAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// Freeze makes a draft immutable: a compare-and-set on the content hash.
// expectHash is the Hash the approver reviewed; if the scene changed since
// (hash differs) Freeze fails with AML_CONFLICT and changes nothing. It
// also fails on a frozen scene (AML_SCENE_FROZEN), an invalid one
// (AML_CONTRACT_INVALID), an empty approver or a time before createdAt
// (AML_INVALID_ARGUMENT). On success status is frozen, frozenBy = by and
// frozenAt = now (UTC); the hash is unchanged. A store persists this with
// an UPDATE … WHERE status = 'draft' AND hash = expectHash.
func (s *SceneContract) Freeze(by string, expectHash string, now time.Time) error {
	if err := s.CheckMutable(); err != nil {
		return err
	}
	if strings.TrimSpace(by) == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, "frozenBy", "the approver freezing the scene is required")
	}
	if now.IsZero() || now.Before(s.CreatedAt) {
		return core.FieldErrorf(core.CodeInvalidArgument, "frozenAt", "freeze time %s is zero or before createdAt", now.Format(time.RFC3339Nano))
	}
	if err := s.Validate(); err != nil {
		return err
	}
	h, err := s.Hash()
	if err != nil {
		return err
	}
	if h != expectHash {
		return core.FieldErrorf(core.CodeConflict, "sceneHash", "scene hash is %s, the approver reviewed %q: the scene changed, review it again", h, expectHash)
	}
	s.Status, s.FrozenBy, s.FrozenAt = SceneFrozen, by, now.UTC()
	return nil
}

// NextVersion returns a deep copy as a new draft with the minor version
// incremented and the patch reset ("1.4.2" → "1.5.0"), the lifecycle
// fields cleared. createdAt and createdBy are copied; the caller sets them
// to the new version's author and time. Works on drafts and frozen scenes.
func (s *SceneContract) NextVersion() (*SceneContract, error) {
	v, err := parseSemver(s.SceneVersion)
	if err != nil {
		return nil, Invalidf("sceneVersion", "%v", err)
	}
	if v[1] == maxSemverPart {
		return nil, Invalidf("sceneVersion", "minor version %d cannot be incremented", v[1])
	}
	n := s.Clone()
	n.SceneVersion = fmt.Sprintf("%d.%d.0", v[0], v[1]+1)
	n.Status, n.FrozenBy, n.FrozenAt = SceneDraft, "", time.Time{}
	return n, nil
}

const maxSemverPart = 999999999

// parseSemver parses "MAJOR.MINOR.PATCH": decimal numbers without
// leading zeros, each at most 999999999.
func parseSemver(v string) ([3]int, error) {
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, fmt.Errorf("%q is not MAJOR.MINOR.PATCH", v)
	}
	for i, s := range parts {
		if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') || strings.Trim(s, "0123456789") != "" {
			return out, fmt.Errorf("%q is not MAJOR.MINOR.PATCH (decimal numbers without leading zeros)", v)
		}
		out[i], _ = strconv.Atoi(s)
	}
	return out, nil
}

// Clone returns a deep copy.
func (s *SceneContract) Clone() *SceneContract {
	n := *s
	n.Phases = cloneSlice(s.Phases)
	n.Controls = cloneVars(s.Controls)
	n.States = cloneVars(s.States)
	n.Disturbances = cloneVars(s.Disturbances)
	n.Observations = cloneVars(s.Observations)
	n.Guards = cloneVars(s.Guards)
	if s.Constraints != nil {
		n.Constraints = make([]Constraint, len(s.Constraints))
		for i, c := range s.Constraints {
			c.Min, c.Max, c.MaxDelta, c.MaxRatePerSec = clonePtr(c.Min), clonePtr(c.Max), clonePtr(c.MaxDelta), clonePtr(c.MaxRatePerSec)
			n.Constraints[i] = c
		}
	}
	n.ObjectiveProfileIDs = cloneSlice(s.ObjectiveProfileIDs)
	n.WritePolicy.MaxDeltaPerAction = cloneMap(s.WritePolicy.MaxDeltaPerAction)
	if s.UnmeasuredDisturbances != nil {
		n.UnmeasuredDisturbances = make([]UnmeasuredDisturbance, len(s.UnmeasuredDisturbances))
		for i, d := range s.UnmeasuredDisturbances {
			d.ProcessSDPerStep, d.MeasurementSD, d.MaxAbs = clonePtr(d.ProcessSDPerStep), clonePtr(d.MeasurementSD), clonePtr(d.MaxAbs)
			n.UnmeasuredDisturbances[i] = d
		}
	}
	return &n
}

func cloneVars(vs []SceneVariable) []SceneVariable {
	if vs == nil {
		return nil
	}
	out := make([]SceneVariable, len(vs))
	for i, v := range vs {
		v.Min, v.Max, v.MaxStep, v.SamplingPeriodMs = clonePtr(v.Min), clonePtr(v.Max), clonePtr(v.MaxStep), clonePtr(v.SamplingPeriodMs)
		v.PhaseScope = cloneSlice(v.PhaseScope)
		out[i] = v
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append([]T(nil), s...)
}

func cloneMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
