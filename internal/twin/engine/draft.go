package engine

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/physics"
	"github.com/aml-project/aml/internal/twin/contract"
)

// DraftInput is what a scene draft is made from besides the model: the
// nodes of the model's dataset (by id, as the store describes them) and
// who drafts it when.
type DraftInput struct {
	SceneID string // default: <line>-<model id>
	Nodes   map[string]core.Node
	By      string
	Now     time.Time
}

// Draft rules (docs/scene-file.md): what a scene drafted from a model
// contains before a person edits it.
const (
	// DraftMaxStepFraction is a control's default largest step between
	// two candidate steps, and its maxDeltaPerAction, as a fraction of its
	// node's range.
	DraftMaxStepFraction = 0.05
	// DraftHorizonFactor: the objective's horizon is this many times the
	// model's calibrated horizon F (a move needs time to show; past F the
	// tube widens like a random walk). A static model's horizon spans two
	// of the write policy's intervals between moves of a control instead
	// (its prediction follows a move at once).
	DraftHorizonFactor = 3
)

// DraftScene drafts a scene contract and its objective profile from the
// twin's model: its controls on writable nodes become the scene's controls
// (range from the node, max step 5 % of it), inputs on measured nodes its
// disturbances (held at their last value), its targets the observations
// with a hard-range constraint from the node's range and the objective's
// setpoint at the middle of it, a hybrid model's states and guards what
// its physics names. Units and meanings come from the nodes. The write
// policy is the conservative default (one move per node and per line a
// minute, three per run). The notes say what a person must decide or fix
// before freezing it: a control without a writable node or a range, a
// target without a range, the setpoints.
func (t *Twin) DraftScene(in DraftInput) (*contract.SceneContract, *contract.ObjectiveProfile, []string) {
	f := func(x float64) *float64 { return &x }
	man := t.man
	id := in.SceneID
	if id == "" {
		id = man.LineID + "-" + t.modelID
	}
	sc := &contract.SceneContract{SchemaVersion: contract.SceneSchemaVersion, CreatedAt: in.Now.UTC().Truncate(time.Millisecond), CreatedBy: in.By,
		SceneID: id, SceneVersion: "1.0.0", LineID: man.LineID, ProductID: man.ProductID, RecipeID: man.RecipeID,
		Phases: []string{"running"}, ObjectiveProfileIDs: []string{id + "-objective"}, Status: contract.SceneDraft,
		WritePolicy: contract.WritePolicy{MinNodeIntervalSec: 60, MinLineActionIntervalSec: 60, MaxActionsPerRun: 3, MaxDeltaPerAction: map[string]float64{}}}
	obj := &contract.ObjectiveProfile{SchemaVersion: contract.ObjectiveSchemaVersion, CreatedAt: sc.CreatedAt, CreatedBy: in.By,
		ObjectiveID: id + "-objective", LineID: man.LineID, Targets: map[string]float64{}, Weights: map[string]float64{},
		ControlCosts: map[string]float64{}, HorizonSteps: min(512, DraftHorizonFactor*t.F), TrustRegion: map[string]contract.TrustRegion{}}
	if t.static {
		// a static model's move shows at once: the horizon covers the
		// write policy's minute between two moves of a control (one more
		// move after the first), at least DraftHorizonFactor steps
		obj.HorizonSteps = min(512, max(DraftHorizonFactor, 1+int(math.Ceil(2*sc.WritePolicy.MinNodeIntervalSec*1000/float64(t.beatMs)))))
	}
	if t.hybridPhysics() {
		sc.PhysicsProfileID = t.modelID
	}
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	variable := func(name string, col int, role contract.Role) (contract.SceneVariable, *core.Node) {
		v := contract.SceneVariable{ID: name, Role: role, PhysicalMeaning: name, Unit: "1"}
		if col < 0 || col >= len(t.nodes) {
			return v, nil
		}
		nodeID := t.nodes[col]
		if nodeID != name {
			v.NodeID = nodeID
		}
		n, ok := in.Nodes[nodeID]
		if !ok {
			return v, nil
		}
		if n.Meaning != "" {
			v.PhysicalMeaning = n.Meaning
		}
		if n.Unit != "" {
			v.Unit = n.Unit
		} else {
			note("node %s has no unit: the draft says \"1\"; set it (aml nodes set %s --unit U) and here", nodeID, nodeID)
		}
		return v, &n
	}
	for _, c := range t.ctrl {
		v, n := variable(c.name, c.col, contract.RoleControl)
		switch {
		case n == nil:
			note("input %s has no node on the line: it is held at its last value", c.name)
			continue
		case n.Kind != core.NodeDCW:
			v.Role = contract.RoleDisturbance
			sc.Disturbances = append(sc.Disturbances, v)
			note("input %s (node %s) is not writable: it is a disturbance, held at its last value (to move it, mark the node a setpoint: aml nodes set %s --writable --min A --max B)", c.name, n.ID, n.ID)
			continue
		case n.Min == nil || n.Max == nil || !(*n.Max > *n.Min):
			note("control %s (node %s) has no range: the draft leaves it out of the controls (a write to a node of unknown range is never governed; aml nodes set %s --min A --max B)", c.name, n.ID, n.ID)
			v.Role = contract.RoleDisturbance
			sc.Disturbances = append(sc.Disturbances, v)
			continue
		}
		lo, hi := *n.Min, *n.Max
		step := roundNice(DraftMaxStepFraction * (hi - lo))
		v.Min, v.Max, v.MaxStep = f(lo), f(hi), f(step)
		sc.Controls = append(sc.Controls, v)
		sc.WritePolicy.MaxDeltaPerAction[c.name] = step
		obj.ControlCosts[c.name] = roundNice(0.01 / (hi - lo))
		obj.TrustRegion[c.name] = contract.TrustRegion{Min: f(lo), Max: f(hi), MaxDelta: f(step)}
	}
	for _, c := range t.dist {
		if v, n := variable(c.name, c.col, contract.RoleDisturbance); n != nil {
			sc.Disturbances = append(sc.Disturbances, v)
		}
	}
	targets := map[string]bool{}
	for _, o := range t.outs {
		targets[o.name] = true
		v, n := variable(o.name, o.col, contract.RoleTarget)
		if n != nil && n.Min != nil && n.Max != nil && *n.Max > *n.Min {
			v.Min, v.Max = f(*n.Min), f(*n.Max)
			sc.Constraints = append(sc.Constraints, contract.Constraint{ID: o.name + "-range", Kind: contract.KindHardRange, Variable: o.name, Min: f(*n.Min), Max: f(*n.Max)})
			obj.Targets[o.name] = roundNice((*n.Min + *n.Max) / 2)
			note("target %s: setpoint %v (the middle of node %s's range %v … %v): set the value the line should hold", o.name, obj.Targets[o.name], n.ID, *n.Min, *n.Max)
		} else {
			obj.Targets[o.name] = 0
			note("target %s has no range: no hard-range constraint is drafted and its setpoint is 0; give its node a range (aml nodes set NODE --min A --max B) or write both here", o.name)
		}
		obj.Weights[o.name] = 1
		sc.Observations = append(sc.Observations, v)
	}
	if !t.hideStates {
		for j, s := range t.states {
			if targets[s] {
				continue
			}
			v, _ := variable(s, t.stateCol[j], contract.RoleState)
			sc.States = append(sc.States, v)
		}
		for _, o := range t.modelOuts {
			if targets[o] || sc.Variable(o) != nil {
				continue
			}
			col := -1
			if c, ok := t.colOf[o]; ok {
				col = c
			}
			v, _ := variable(o, col, contract.RoleGuard)
			sc.Guards = append(sc.Guards, v)
			note("guard %s has no constraint: add one (kind hard_range) if it must stay within limits", o)
		}
	}
	if len(sc.Controls) == 0 {
		note("no control: the twin has nothing to move; mark at least one input's node writable with a range")
	}
	if len(sc.Constraints) == 0 {
		note("no constraint: a trial must evaluate at least one; give a target a range")
	}
	sort.Strings(notes)
	return sc, obj, notes
}

// hybridPhysics reports whether the model has a physics model (a hybrid).
func (t *Twin) hybridPhysics() bool { _, ok := t.dyn.(hybridDyn); return ok }

// roundNice rounds x to 3 significant digits (a draft's numbers are read
// and edited by people).
func roundNice(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	return v
}

// CheckScene reports every way scene (and obj, when given) does not fit
// this model, all at once: a scene control that is not a model control, a
// constraint on a quantity the model does not have or an expression over
// unknown names, an objective target the model does not predict, a trust
// region or control cost of a name that is no scene control, an objective
// for another model, and a scene without any constraint.
func (t *Twin) CheckScene(sc *contract.SceneContract, obj *contract.ObjectiveProfile) []core.Problem {
	var p []core.Problem
	add := func(field, format string, args ...any) {
		p = append(p, core.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	quantity := map[string]string{}
	var names []string
	put := func(n, kind string) {
		if _, dup := quantity[n]; !dup {
			quantity[n] = kind
			names = append(names, n)
		}
	}
	var ctrlNames []string
	for _, c := range t.ctrl {
		put(c.name, "control")
		ctrlNames = append(ctrlNames, c.name)
	}
	for _, c := range t.dist {
		put(c.name, "disturbance")
	}
	for _, o := range t.modelOuts {
		put(o, "output")
	}
	if !t.hideStates {
		for _, s := range t.states {
			put(s, "state")
		}
	}
	predicted := map[string]bool{}
	for _, o := range t.outs {
		predicted[o.name] = true
	}
	for i, c := range sc.Controls {
		if quantity[c.ID] != "control" {
			add(fmt.Sprintf("scene.controls[%d].id", i), "%s is not a control of model %s (its controls: %v)", c.ID, t.modelID, ctrlNames)
		}
	}
	if len(sc.Constraints) == 0 {
		add("scene.constraints", "no constraint: a trial must evaluate at least one")
	}
	for i, c := range sc.Constraints {
		f := fmt.Sprintf("scene.constraints[%d]", i)
		if c.Variable != "" {
			if _, ok := quantity[c.Variable]; !ok {
				add(f+".variable", "%s is not a quantity of model %s (%v): the constraint cannot be checked", c.Variable, t.modelID, names)
			}
		}
		if c.Kind == contract.KindCustom {
			if _, err := physics.ParseCondition(c.Expression, names, t.dt); err != nil {
				add(f+".expression", "cannot be evaluated on the model's quantities: %v", err)
			}
		}
	}
	if obj == nil {
		return p
	}
	if obj.TwinModelID != "" && obj.TwinModelID != t.modelID {
		add("objective.twinModelId", "the objective is for model %s, not %s", obj.TwinModelID, t.modelID)
	}
	for _, k := range sortedKeys(obj.Targets) {
		if kind := quantity[k]; !predicted[k] && kind != "state" && kind != "output" {
			add("objective.targets."+k, "%s is not predicted by model %s", k, t.modelID)
		}
	}
	for _, k := range sortedKeys(obj.TrustRegion) {
		if sc.Control(k) == nil {
			add("objective.trustRegion."+k, "%s is not a control of the scene", k)
		}
	}
	for _, k := range sortedKeys(obj.ControlCosts) {
		if sc.Control(k) == nil {
			add("objective.controlCosts."+k, "%s is not a control of the scene", k)
		}
	}
	return p
}
