package app

import (
	"bytes"
	"context"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// Line metadata: what each node of a line is — a measurement (daq) or a
// setpoint the twin may write (dcw), its unit, its normal range and
// meaning. CSV ingest creates nodes as daq without a range; a person
// states the rest here, for one node (node.set) or a whole line file
// (line.apply), each change audited with the node before and after.

var (
	opNodeSet   = Op{Name: "node.set", Act: auth.ActIngest, Summary: "Set one node's metadata: writable (a setpoint, kind dcw) or not, unit, normal range, meaning (audited)"}
	opLineApply = Op{Name: "line.apply", Act: auth.ActIngest, Summary: "Apply a line file: the metadata of many nodes of one line at once, in one transaction (audited)"}
)

func lineOps() []*Op {
	return []*Op{
		bind(&opNodeSet, (*App).NodeSet),
		bind(&opLineApply, (*App).LineApply),
	}
}

// NodeSpec is what a line file or node.set says of one node; a field left
// out keeps the node's current value (a new node: daq, no unit, no range).
type NodeSpec struct {
	ID       string   `json:"id" yaml:"id" jsonschema:"node id"`
	Writable *bool    `json:"writable,omitempty" yaml:"writable,omitempty" jsonschema:"true: a setpoint the twin may write (kind dcw); false: a measurement (daq)"`
	Unit     *string  `json:"unit,omitempty" yaml:"unit,omitempty" jsonschema:"unit (e.g. degC, bar, mm/s)"`
	Min      *float64 `json:"min,omitempty" yaml:"min,omitempty" jsonschema:"lower end of the normal range"`
	Max      *float64 `json:"max,omitempty" yaml:"max,omitempty" jsonschema:"upper end of the normal range"`
	Meaning  *string  `json:"physicalMeaning,omitempty" yaml:"physicalMeaning,omitempty" jsonschema:"what the signal is"`
}

func (s NodeSpec) check(field string) error {
	if err := core.CheckNodeID(field+".id", s.ID); err != nil {
		return err
	}
	for _, v := range [...]struct {
		name string
		p    *float64
	}{{"min", s.Min}, {"max", s.Max}} {
		if v.p != nil && (math.IsNaN(*v.p) || math.IsInf(*v.p, 0)) {
			return core.FieldErrorf(core.CodeInvalidArgument, field+"."+v.name, "node %q: %s must be finite", s.ID, v.name)
		}
	}
	if s.Min != nil && s.Max != nil && *s.Min > *s.Max {
		return core.FieldErrorf(core.CodeInvalidArgument, field+".min", "node %q: min %g > max %g", s.ID, *s.Min, *s.Max)
	}
	return nil
}

// apply returns n with s's fields.
func (s NodeSpec) apply(n core.Node) core.Node {
	if s.Writable != nil {
		n.Kind = core.NodeDAQ
		if *s.Writable {
			n.Kind = core.NodeDCW
		}
	}
	if s.Unit != nil {
		n.Unit = *s.Unit
	}
	if s.Min != nil {
		n.Min = s.Min
	}
	if s.Max != nil {
		n.Max = s.Max
	}
	if s.Meaning != nil {
		n.Meaning = *s.Meaning
	}
	return n
}

// NodeSetRequest sets one node's metadata.
type NodeSetRequest struct {
	Line string `json:"line" jsonschema:"the node's line"`
	NodeSpec
}

// Validate checks the line and the node's fields.
func (r *NodeSetRequest) Validate() error {
	if err := firstErr(required("line", r.Line), required("id", r.ID)); err != nil {
		return err
	}
	if err := core.CheckID("line", r.Line); err != nil {
		return err
	}
	return r.check("node")
}

// LineApplyRequest is a line file: the nodes of one line.
type LineApplyRequest struct {
	Line  string     `json:"line" yaml:"line" jsonschema:"the line"`
	Nodes []NodeSpec `json:"nodes" yaml:"nodes" jsonschema:"the nodes (at most 10 000)"`
}

// ParseLineFile reads a line file (YAML or JSON, one document, no unknown
// fields), as aml line apply reads one; line, when not empty, is the line
// the file must name (a form posted for one line).
func ParseLineFile(b []byte, line string) (LineApplyRequest, error) {
	var req LineApplyRequest
	if len(bytes.TrimSpace(b)) == 0 {
		return req, core.FieldErrorf(core.CodeInvalidArgument, "file", "the line file is empty")
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&req); err != nil {
		return LineApplyRequest{}, core.FieldErrorf(core.CodeInvalidArgument, "file", "not a line file: %v", err)
	}
	if line != "" && req.Line != line {
		if req.Line == "" {
			req.Line = line
		} else {
			return LineApplyRequest{}, core.FieldErrorf(core.CodeInvalidArgument, "line", "the file is for line %q, not %q", req.Line, line)
		}
	}
	return req, nil
}

// MaxLineNodes bounds a line file.
const MaxLineNodes = 10_000

// Validate checks every node (each id once).
func (r *LineApplyRequest) Validate() error {
	if err := required("line", r.Line); err != nil {
		return err
	}
	if err := core.CheckID("line", r.Line); err != nil {
		return err
	}
	if len(r.Nodes) == 0 || len(r.Nodes) > MaxLineNodes {
		return core.FieldErrorf(core.CodeInvalidArgument, "nodes", "a line file has 1 to %d nodes, not %d", MaxLineNodes, len(r.Nodes))
	}
	seen := make(map[string]int, len(r.Nodes))
	for i, s := range r.Nodes {
		f := "nodes[" + strconv.Itoa(i) + "]"
		if err := s.check(f); err != nil {
			return err
		}
		if j, dup := seen[s.ID]; dup {
			return core.FieldErrorf(core.CodeInvalidArgument, f+".id", "node %q is listed twice (also nodes[%d])", s.ID, j)
		}
		seen[s.ID] = i
	}
	return nil
}

// NodeSet sets one node's metadata.
func (a *App) NodeSet(ctx context.Context, p Principal, req NodeSetRequest) (List[core.Node], error) {
	return run(ctx, a, p, &opNodeSet, req, func(ctx context.Context, p Principal, req NodeSetRequest) (List[core.Node], error) {
		return a.applyNodes(ctx, p, req.Line, []NodeSpec{req.NodeSpec})
	})
}

// LineApply applies a line file.
func (a *App) LineApply(ctx context.Context, p Principal, req LineApplyRequest) (List[core.Node], error) {
	return run(ctx, a, p, &opLineApply, req, func(ctx context.Context, p Principal, req LineApplyRequest) (List[core.Node], error) {
		return a.applyNodes(ctx, p, req.Line, req.Nodes)
	})
}

// applyNodes merges specs into the line's nodes and stores them in one
// audited transaction; a node of another line is refused (forbidden
// outside p's scope, else a conflict).
func (a *App) applyNodes(ctx context.Context, p Principal, line string, specs []NodeSpec) (List[core.Node], error) {
	if err := p.Allow(auth.ActIngest, line); err != nil {
		return List[core.Node]{}, err
	}
	nodes := make([]core.Node, 0, len(specs))
	for i, s := range specs {
		n, err := a.d.Store.GetNode(ctx, s.ID)
		switch {
		case core.CodeOf(err) == core.CodeNotFound:
			n = core.Node{ID: s.ID, LineID: line, Kind: core.NodeDAQ}
		case err != nil:
			return List[core.Node]{}, err
		case n.LineID != line:
			if err := p.Allow(auth.ActIngest, n.LineID); err != nil {
				return List[core.Node]{}, err
			}
			return List[core.Node]{}, core.FieldErrorf(core.CodeConflict, "nodes["+strconv.Itoa(i)+"].id", "node %q belongs to line %q, not %q", s.ID, n.LineID, line)
		}
		n = s.apply(n)
		if n.Min != nil && n.Max != nil && *n.Min > *n.Max {
			return List[core.Node]{}, core.FieldErrorf(core.CodeInvalidArgument, "nodes["+strconv.Itoa(i)+"]", "node %q: min %g > max %g", n.ID, *n.Min, *n.Max)
		}
		nodes = append(nodes, n)
	}
	if err := a.d.Store.ApplyNodes(ctx, p.Name, line, nodes); err != nil {
		return List[core.Node]{}, err
	}
	out := make([]core.Node, 0, len(nodes))
	for _, n := range nodes {
		stored, err := a.d.Store.GetNode(ctx, n.ID)
		if err != nil {
			return List[core.Node]{}, err
		}
		out = append(out, stored)
	}
	return List[core.Node]{Items: out, Count: len(out)}, nil
}
