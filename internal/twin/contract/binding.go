package contract

import (
	"sort"
	"time"
)

// BindingSchemaVersion is the binding snapshot schema this package writes
// and the newest it reads.
const BindingSchemaVersion = 1

// Node kinds of a binding (core.NodeDAQ, core.NodeDCW).
const (
	NodeKindDAQ = "daq" // a measured signal
	NodeKindDCW = "dcw" // a writable setpoint
)

// Control policies of a channel (upstream channel-profile.ts).
const (
	PolicyRecommendationOnly = "recommendation_only"
	PolicyHITLGoverned       = "hitl_governed"
	PolicyBoundedAuto        = "bounded_auto"
)

// Binding modes.
const (
	ModeAuto   = "auto"
	ModeManual = "manual"
)

// NodeBinding says which node plays one scene variable.
type NodeBinding struct {
	// VariableID is the scene variable the node plays (AML addition:
	// upstream bound agents to nodes without naming the variable).
	VariableID      string   `json:"variableId"`
	NodeID          string   `json:"nodeId"`
	AgentID         string   `json:"agentId,omitempty"`
	AgentRole       string   `json:"agentRole,omitempty"`
	Kind            string   `json:"kind"`          // daq | dcw
	Mode            string   `json:"mode"`          // auto | manual
	ControlPolicy   string   `json:"controlPolicy"` // recommendation_only | hitl_governed | bounded_auto
	LineID          string   `json:"lineId"`
	PhysicalMeaning string   `json:"physicalMeaning"`
	Unit            string   `json:"unit"`
	Min             *float64 `json:"min,omitempty"` // the node's range
	Max             *float64 `json:"max,omitempty"`
	SamplePeriodMs  *int64   `json:"samplePeriodMs,omitempty"`
}

// NodeBindingSnapshot is the mapping of a scene's variables to a channel's
// nodes at one binding epoch.
type NodeBindingSnapshot struct {
	SchemaVersion int           `json:"schemaVersion"`
	CreatedAt     time.Time     `json:"createdAt"`
	CreatedBy     string        `json:"createdBy"`
	SnapshotID    string        `json:"snapshotId"`
	ChannelID     string        `json:"channelId"`
	BindingEpoch  string        `json:"bindingEpoch"`
	SceneID       string        `json:"sceneId"`
	SceneVersion  string        `json:"sceneVersion"`
	Bindings      []NodeBinding `json:"bindings"`
	// SnapshotHash is Hash(); empty until Seal.
	SnapshotHash string `json:"snapshotHash,omitempty"`
}

// BindingHashExcluded lists the fields NodeBindingSnapshot.Hash leaves out.
var BindingHashExcluded = []string{"snapshotHash"}

// ParseBinding decodes and validates a binding snapshot.
func ParseBinding(data []byte) (*NodeBindingSnapshot, error) {
	var b NodeBindingSnapshot
	if err := decodeStrict(data, &b); err != nil {
		return nil, err
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return &b, nil
}

// Validate checks the snapshot on its own: required fields, enumerations,
// ranges, one binding per variable and per node, and snapshotHash (when
// set) equal to Hash. CheckAgainst checks it against its scene.
func (b *NodeBindingSnapshot) Validate() error {
	var p problems
	b.check(&p)
	return p.err()
}

func (b *NodeBindingSnapshot) check(p *problems) {
	checkSchemaVersion(p, b.SchemaVersion, BindingSchemaVersion)
	checkTime(p, "createdAt", b.CreatedAt, true)
	checkRef(p, "createdBy", b.CreatedBy)
	checkRef(p, "snapshotId", b.SnapshotID)
	checkRef(p, "channelId", b.ChannelID)
	checkRef(p, "bindingEpoch", b.BindingEpoch)
	checkRef(p, "sceneId", b.SceneID)
	if _, err := parseSemver(b.SceneVersion); err != nil {
		p.add("sceneVersion", "%v", err)
	}
	if len(b.Bindings) == 0 {
		p.add("bindings", "at least one binding is required")
	}
	if !checkCount(p, "bindings", len(b.Bindings)) {
		return
	}
	vars, nodes := map[string]bool{}, map[string]bool{}
	for i := range b.Bindings {
		f := idx("bindings", i)
		x := &b.Bindings[i]
		if checkName(p, f+".variableId", x.VariableID) {
			if vars[x.VariableID] {
				p.add(f+".variableId", "variable %q is bound twice", x.VariableID)
			}
			vars[x.VariableID] = true
		}
		if checkRef(p, f+".nodeId", x.NodeID) {
			if nodes[x.NodeID] {
				p.add(f+".nodeId", "node %q is bound twice", x.NodeID)
			}
			nodes[x.NodeID] = true
		}
		checkOptRef(p, f+".agentId", x.AgentID)
		checkOptRef(p, f+".agentRole", x.AgentRole)
		if x.Kind != NodeKindDAQ && x.Kind != NodeKindDCW {
			p.add(f+".kind", "must be daq or dcw, not %q", x.Kind)
		}
		if x.Mode != ModeAuto && x.Mode != ModeManual {
			p.add(f+".mode", "must be auto or manual, not %q", x.Mode)
		}
		if !validPolicy(x.ControlPolicy) {
			p.add(f+".controlPolicy", "must be recommendation_only, hitl_governed or bounded_auto, not %q", x.ControlPolicy)
		}
		checkRef(p, f+".lineId", x.LineID)
		checkText(p, f+".physicalMeaning", x.PhysicalMeaning, true)
		checkRef(p, f+".unit", x.Unit)
		checkRange(p, f, x.Min, x.Max)
		if x.SamplePeriodMs != nil && *x.SamplePeriodMs <= 0 {
			p.add(f+".samplePeriodMs", "must be > 0")
		}
	}
	if b.SnapshotHash != "" {
		checkHash(p, "snapshotHash", b.SnapshotHash, true)
		if len(*p) == 0 {
			if h, err := b.Hash(); err != nil {
				p.add("snapshotHash", "cannot hash: %v", err)
			} else if h != b.SnapshotHash {
				p.add("snapshotHash", "is %s but the content hashes to %s", b.SnapshotHash, h)
			}
		}
	}
}

func validPolicy(s string) bool {
	return s == PolicyRecommendationOnly || s == PolicyHITLGoverned || s == PolicyBoundedAuto
}

// CheckAgainst validates the snapshot and checks it against the scene:
//   - sceneId and sceneVersion are the scene's, every binding's lineId is
//     the scene's lineId;
//   - every binding names a variable of the scene; controls bind to dcw
//     (writable) nodes, every other role to daq nodes;
//   - the binding's unit equals the variable's unit (no conversion here);
//   - the variable's declared range lies within the node's range; a node
//     bound to a control must declare both min and max (a write to a node
//     of unknown range is never governed);
//   - every control and every target is bound.
func (b *NodeBindingSnapshot) CheckAgainst(s *SceneContract) error {
	var p problems
	b.check(&p)
	if s.SceneID != b.SceneID {
		p.add("sceneId", "is %q, the scene is %q", b.SceneID, s.SceneID)
	}
	if s.SceneVersion != b.SceneVersion {
		p.add("sceneVersion", "is %q, the scene is %q", b.SceneVersion, s.SceneVersion)
	}
	bound := map[string]bool{}
	for i := range b.Bindings {
		f := idx("bindings", i)
		x := &b.Bindings[i]
		if x.LineID != s.LineID {
			p.add(f+".lineId", "is %q, the scene's line is %q", x.LineID, s.LineID)
		}
		v := s.Variable(x.VariableID)
		if v == nil {
			p.add(f+".variableId", "%q is not a variable of the scene", x.VariableID)
			continue
		}
		bound[v.ID] = true
		want := NodeKindDAQ
		if v.Role == RoleControl {
			want = NodeKindDCW
		}
		if x.Kind != want {
			p.add(f+".kind", "variable %q is a %s and must bind to a %s node, not %s", v.ID, v.Role, want, x.Kind)
		}
		if x.Unit != v.Unit {
			p.add(f+".unit", "node unit %q differs from the variable's unit %q", x.Unit, v.Unit)
		}
		if v.Role == RoleControl {
			if x.Min == nil {
				p.add(f+".min", "a node bound to a control must declare its range")
			}
			if x.Max == nil {
				p.add(f+".max", "a node bound to a control must declare its range")
			}
		}
		if v.Min != nil && x.Min != nil && *v.Min < *x.Min {
			p.add(f+".min", "the variable's min %v is below the node's min %v", *v.Min, *x.Min)
		}
		if v.Max != nil && x.Max != nil && *v.Max > *x.Max {
			p.add(f+".max", "the variable's max %v is above the node's max %v", *v.Max, *x.Max)
		}
	}
	var missing []string
	for _, v := range s.Controls {
		if !bound[v.ID] {
			missing = append(missing, v.ID)
		}
	}
	for _, v := range s.Observations {
		if v.Role == RoleTarget && !bound[v.ID] {
			missing = append(missing, v.ID)
		}
	}
	sort.Strings(missing)
	for _, id := range missing {
		p.add("bindings", "variable %q (control or target) is not bound", id)
	}
	return p.err()
}

// Hash is core.CanonicalHash of the snapshot without snapshotHash, with
// createdAt in UTC: it covers every other field, bindings in their order.
func (b *NodeBindingSnapshot) Hash() (string, error) {
	c := *b
	c.CreatedAt = utc(c.CreatedAt)
	return hashWithout(&c, BindingHashExcluded...)
}

// Seal sets SnapshotHash to Hash.
func (b *NodeBindingSnapshot) Seal() error {
	h, err := b.Hash()
	if err != nil {
		return err
	}
	b.SnapshotHash = h
	return nil
}
