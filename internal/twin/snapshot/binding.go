package snapshot

import (
	"fmt"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// dimensionless holds the spellings of a dimensionless unit that are taken
// as the physics language's "1" (the simulator's nodes say "ratio", the
// scene says "1"). No other unit conversion happens here.
var dimensionless = map[string]bool{"1": true, "ratio": true, "fraction": true, "-": true}

// sameUnit reports whether a node unit and a variable unit agree, and the
// spelling the binding records (the variable's when they are synonyms).
func sameUnit(node, variable string) (string, bool) {
	if node == variable {
		return node, true
	}
	if dimensionless[node] && dimensionless[variable] {
		return variable, true
	}
	return node, false
}

// checkBinding checks every bound variable against its node and builds the
// binding snapshot. Always refused (AML_BINDING_MISMATCH): a control or
// target without a node; a control on a node that is not writable (dcw),
// any other role on a writable one; a node on another line; units that
// differ; a variable range outside the node's; a control on a node without
// a declared range. When a bound node has no unit or no line the snapshot
// cannot be built (nil, noted in the report; strict mode refuses).
func (t *taker) checkBinding() (*contract.NodeBindingSnapshot, error) {
	s := t.scene
	var p []core.Problem
	b := &contract.NodeBindingSnapshot{
		SchemaVersion: contract.BindingSchemaVersion,
		CreatedBy:     "aml-snapshot",
		ChannelID:     "store:" + s.LineID,
		SceneID:       s.SceneID,
		SceneVersion:  s.SceneVersion,
	}
	complete := true
	var epoch time.Time
	for _, bv := range t.vars {
		v := bv.v
		f := "variables." + v.ID
		if bv.node == nil {
			if v.Role == contract.RoleControl || v.Role == contract.RoleTarget {
				p = append(p, core.Problem{Field: f, Message: fmt.Sprintf("the %s %s is bound to no node (no node %q; bind it with --bind %s=NODE or the scene's nodeId)", v.Role, v.ID, v.ID, v.ID)})
			}
			continue
		}
		n := bv.node
		if n.LineID != "" && n.LineID != s.LineID {
			// Another line's node: its line, kind, unit and range are not
			// the caller's to learn (a reader of the scene's line may
			// check any scene file): only that it is not of this line.
			p = append(p, core.Problem{Field: f, Message: fmt.Sprintf("node %s is not a node of line %s", n.ID, s.LineID)})
			continue
		}
		want := core.NodeDAQ
		if v.Role == contract.RoleControl {
			want = core.NodeDCW
		}
		if n.Kind != want {
			p = append(p, core.Problem{Field: f, Message: fmt.Sprintf("the %s %s must be bound to a %s node; node %s is %s", v.Role, v.ID, want, n.ID, n.Kind)})
		}
		unit := n.Unit
		if n.Unit != "" {
			var ok bool
			if unit, ok = sameUnit(n.Unit, v.Unit); !ok {
				p = append(p, core.Problem{Field: f, Message: fmt.Sprintf("node %s is in %q, the variable %s in %q", n.ID, n.Unit, v.ID, v.Unit)})
			} else if n.Unit != v.Unit {
				t.rep.Notes = append(t.rep.Notes, fmt.Sprintf("node %s unit %q taken as the dimensionless %q of variable %s", n.ID, n.Unit, v.Unit, v.ID))
			}
		}
		if v.Role == contract.RoleControl && (n.Min == nil || n.Max == nil) {
			p = append(p, core.Problem{Field: f, Message: fmt.Sprintf("node %s bound to the control %s declares no range (min and max): a write to a node of unknown range is never governed", n.ID, v.ID)})
		}
		if v.Min != nil && n.Min != nil && *v.Min < *n.Min {
			p = append(p, core.Problem{Field: f, Message: fmt.Sprintf("the variable's min %v is below node %s's min %v", *v.Min, n.ID, *n.Min)})
		}
		if v.Max != nil && n.Max != nil && *v.Max > *n.Max {
			p = append(p, core.Problem{Field: f, Message: fmt.Sprintf("the variable's max %v is above node %s's max %v", *v.Max, n.ID, *n.Max)})
		}
		if n.Unit == "" || n.LineID == "" {
			complete = false
			t.rep.Notes = append(t.rep.Notes, fmt.Sprintf("node %s has no unit or line: its binding to %s cannot be checked, no binding snapshot is recorded", n.ID, v.ID))
			continue
		}
		if n.CreatedAt.After(epoch) {
			epoch = n.CreatedAt
		}
		meaning := strings.TrimSpace(n.Meaning)
		if meaning == "" {
			meaning = v.PhysicalMeaning
		}
		mode := contract.ModeAuto
		if bv.boundBy == BoundByOption {
			mode = contract.ModeManual
		}
		b.Bindings = append(b.Bindings, contract.NodeBinding{
			VariableID: v.ID, NodeID: n.ID, Kind: n.Kind, Mode: mode,
			// The store knows no channel policy: the most restrictive.
			ControlPolicy:   contract.PolicyRecommendationOnly,
			LineID:          n.LineID,
			PhysicalMeaning: meaning,
			Unit:            unit,
			Min:             n.Min,
			Max:             n.Max,
		})
	}
	if len(p) > 0 {
		return nil, bindingErr(p)
	}
	if !complete || len(b.Bindings) == 0 {
		return nil, nil
	}
	// Derived from the nodes: the same nodes give the same binding (and
	// hash); the epoch is the newest node definition.
	if epoch.IsZero() {
		epoch = s.CreatedAt
	}
	b.CreatedAt = epoch.UTC()
	b.BindingEpoch = b.CreatedAt.Format("20060102T150405.000Z")
	b.SnapshotID = "bind-" + s.SceneID + "@" + s.SceneVersion + "-" + b.BindingEpoch
	if err := b.Seal(); err != nil {
		return nil, err
	}
	if err := b.CheckAgainst(s); err != nil {
		// Our checks above mirror CheckAgainst; report what it found.
		return nil, bindingErr(contract.ProblemsOf(err))
	}
	return b, nil
}
