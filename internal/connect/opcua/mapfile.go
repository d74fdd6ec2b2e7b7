package opcua

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/gopcua/opcua/ua"

	"github.com/aml-project/aml/internal/core"
)

// Map says which OPC UA nodes feed which AML nodes, and in which context.
//
//	{
//	  "line": "line-injection-01", "product": "product-injection-a", "recipe": "recipe-injection-a",
//	  "runTag": "ns=1;s=run_id", "cycleTag": "ns=1;s=cycle",
//	  "samplingIntervalMs": 100, "publishingIntervalMs": 20,
//	  "nodes": [{"opcua": "ns=1;s=part_weight", "node": "part_weight", "unit": "g"}, ...]
//	}
//
// runTag (optional) is a String node holding the active run's id ("" for
// none): its changes start and end runs. cycleTag (optional) is a numeric
// cycle counter: a jump of more than one is a loss, recorded as a gap.
// A node's unit and range default to the server's EngineeringUnits and
// EURange properties; kind defaults to dcw for a writable node, else daq.
type Map struct {
	Line                 string     `json:"line"`
	Product              string     `json:"product"`
	Recipe               string     `json:"recipe"`
	RunTag               string     `json:"runTag,omitempty"`
	CycleTag             string     `json:"cycleTag,omitempty"`
	SamplingIntervalMs   float64    `json:"samplingIntervalMs,omitempty"`
	PublishingIntervalMs float64    `json:"publishingIntervalMs,omitempty"`
	Nodes                []MapEntry `json:"nodes"`
}

// MapEntry maps one OPC UA node to one AML node.
type MapEntry struct {
	OPCUA string   `json:"opcua"`
	Node  string   `json:"node"`
	Unit  string   `json:"unit,omitempty"`
	Kind  string   `json:"kind,omitempty"`
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
}

var amlID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// MaxMapNodes bounds a map file.
const MaxMapNodes = 10000

// ParseMap parses and validates a map file. Every problem is reported
// (AML_INVALID_ARGUMENT with Problems); unknown fields are errors.
func ParseMap(data []byte) (*Map, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Map
	if err := dec.Decode(&m); err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "map", "map file: %v", err)
	}
	if dec.More() {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "map", "map file: trailing data after the JSON object")
	}
	var probs []core.Problem
	add := func(field, format string, args ...any) {
		probs = append(probs, core.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	for _, f := range [...][2]string{{"line", m.Line}, {"product", m.Product}, {"recipe", m.Recipe}} {
		if !amlID.MatchString(f[1]) {
			add(f[0], "must be 1..100 characters of [A-Za-z0-9._-] starting with a letter or digit, got %q", f[1])
		}
	}
	for _, t := range [...][2]string{{"runTag", m.RunTag}, {"cycleTag", m.CycleTag}} {
		if t[1] != "" {
			if _, err := ua.ParseNodeID(t[1]); err != nil {
				add(t[0], "not an OPC UA node id: %v", err)
			}
		}
	}
	for _, iv := range [...]struct {
		f string
		v float64
	}{{"samplingIntervalMs", m.SamplingIntervalMs}, {"publishingIntervalMs", m.PublishingIntervalMs}} {
		if !(iv.v >= 0 && iv.v <= 3_600_000) {
			add(iv.f, "must be 0..3600000 ms, got %v", iv.v)
		}
	}
	if len(m.Nodes) == 0 {
		add("nodes", "at least one node is required")
	}
	if len(m.Nodes) > MaxMapNodes {
		add("nodes", "at most %d nodes, got %d", MaxMapNodes, len(m.Nodes))
		m.Nodes = m.Nodes[:MaxMapNodes]
	}
	seenUA, seenAML := map[string]bool{}, map[string]bool{}
	for i, e := range m.Nodes {
		f := fmt.Sprintf("nodes[%d]", i)
		nid, err := ua.ParseNodeID(e.OPCUA)
		if err != nil {
			add(f+".opcua", "not an OPC UA node id: %v", err)
		} else {
			k := nid.String()
			if seenUA[k] {
				add(f+".opcua", "node %s is mapped twice", k)
			}
			seenUA[k] = true
			if k == m.RunTag || k == m.CycleTag {
				add(f+".opcua", "node %s is the run or cycle tag", k)
			}
		}
		if !amlID.MatchString(e.Node) {
			add(f+".node", "AML node id must be 1..100 characters of [A-Za-z0-9._-] starting with a letter or digit, got %q", e.Node)
		} else if seenAML[e.Node] {
			add(f+".node", "AML node %q is fed twice", e.Node)
		}
		seenAML[e.Node] = true
		if e.Kind != "" && e.Kind != core.NodeDAQ && e.Kind != core.NodeDCW {
			add(f+".kind", "must be daq or dcw, got %q", e.Kind)
		}
		if len(e.Unit) > 32 {
			add(f+".unit", "at most 32 characters")
		}
		if e.Min != nil && e.Max != nil && !(*e.Min < *e.Max) {
			add(f+".min", "min %v must be below max %v", *e.Min, *e.Max)
		}
	}
	if err := core.Invalid(core.CodeInvalidArgument, probs); err != nil {
		return nil, err
	}
	return &m, nil
}
