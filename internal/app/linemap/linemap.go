// Package linemap turns a connector map file (OPC UA or MQTT) into a line
// file: the map already says which AML nodes a line has, which of them are
// setpoints (kind dcw) and, often, their units and ranges, so a line's
// node metadata need not be typed a second time.
//
// The conversion keeps what the map states and nothing more: a node
// without a kind has no writable field, one without a unit or range has
// none (applying the line file keeps the node's current value for every
// field left out). The map's product, recipe, run and cycle tags, topics
// and payload paths are not node metadata and are dropped. Conversion
// happens where the file is read (the CLI): no request names a file.
package linemap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/connect/mqtt"
	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/safefile"
)

// The map kinds.
const (
	KindOPCUA = "opcua"
	KindMQTT  = "mqtt"
)

// MaxMapBytes bounds a map file read by ReadFile.
const MaxMapBytes = 16 << 20

// Draft is a line file converted from a map file, with where each node
// came from (Sources[i] is Req.Nodes[i]'s OPC UA node id or MQTT topic).
type Draft struct {
	Kind    string
	Req     app.LineApplyRequest
	Sources []string
}

// Detect returns the kind of a map file from its top-level fields: an
// OPC UA map lists "nodes", an MQTT map "topics".
func Detect(data []byte) (string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return "", core.FieldErrorf(core.CodeInvalidArgument, "map", "map file: not a JSON object: %v", err)
	}
	_, nodes := top["nodes"]
	_, topics := top["topics"]
	switch {
	case nodes && !topics:
		return KindOPCUA, nil
	case topics && !nodes:
		return KindMQTT, nil
	case nodes && topics:
		return "", core.FieldErrorf(core.CodeInvalidArgument, "map", "map file has both \"nodes\" (OPC UA) and \"topics\" (MQTT): say which it is (--map-kind opcua|mqtt)")
	}
	return "", core.FieldErrorf(core.CodeInvalidArgument, "map", "map file has neither \"nodes\" (OPC UA map) nor \"topics\" (MQTT map)")
}

// FromMap parses data as a map file of kind (opcua, mqtt, or "" to
// detect it) and converts it. A map the connector would refuse is refused
// here with the same problems.
func FromMap(data []byte, kind string) (Draft, error) {
	if kind == "" {
		k, err := Detect(data)
		if err != nil {
			return Draft{}, err
		}
		kind = k
	}
	var d Draft
	switch kind {
	case KindOPCUA:
		m, err := opcua.ParseMap(data)
		if err != nil {
			return Draft{}, err
		}
		d = FromOPCUA(m)
	case KindMQTT:
		m, err := mqtt.ParseMap(data)
		if err != nil {
			return Draft{}, err
		}
		d = FromMQTT(m)
	default:
		return Draft{}, core.FieldErrorf(core.CodeInvalidArgument, "mapKind", "map kind must be opcua or mqtt, got %q", kind)
	}
	if err := d.Req.Validate(); err != nil {
		return Draft{}, err
	}
	return d, nil
}

// ReadFile reads the map file at path (a regular file of at most
// MaxMapBytes) and converts it. A kind other than opcua, mqtt or "" is a
// usage error; a map's errors are of field "map", name the file and keep
// their problems (each with its field in the map).
func ReadFile(path, kind string) (Draft, error) {
	if kind != "" && kind != KindOPCUA && kind != KindMQTT {
		return Draft{}, core.FieldErrorf(core.CodeUsage, "map-kind", "must be opcua or mqtt, got %q", kind)
	}
	b, err := safefile.ReadFile(path, MaxMapBytes)
	if err != nil {
		return Draft{}, safefile.Refusal(core.CodeInvalidArgument, err, "map file")
	}
	d, err := FromMap(b, kind)
	var ae *core.Error
	if errors.As(err, &ae) {
		e := *ae
		e.Field, e.Message = "map", path+": "+e.Message
		return Draft{}, &e
	}
	return d, err
}

// FromOPCUA converts a parsed OPC UA map.
func FromOPCUA(m *opcua.Map) Draft {
	d := Draft{Kind: KindOPCUA, Req: app.LineApplyRequest{Line: m.Line}}
	for _, e := range m.Nodes {
		d.Req.Nodes = append(d.Req.Nodes, spec(e.Node, e.Kind, e.Unit, e.Min, e.Max))
		d.Sources = append(d.Sources, e.OPCUA)
	}
	return d
}

// FromMQTT converts a parsed MQTT map.
func FromMQTT(m *mqtt.Map) Draft {
	d := Draft{Kind: KindMQTT, Req: app.LineApplyRequest{Line: m.Line}}
	for _, t := range m.Topics {
		d.Req.Nodes = append(d.Req.Nodes, spec(t.Node, t.Kind, t.Unit, t.Min, t.Max))
		d.Sources = append(d.Sources, t.Topic)
	}
	return d
}

func spec(id, kind, unit string, lo, hi *float64) app.NodeSpec {
	s := app.NodeSpec{ID: id, Min: clone(lo), Max: clone(hi)}
	if kind != "" {
		w := kind == core.NodeDCW
		s.Writable = &w
	}
	if unit != "" {
		s.Unit = &unit
	}
	return s
}

func clone(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// YAML is the draft as a line file for a person to edit, each node
// commented with its source and with what the map left unsaid.
func (d Draft) YAML() []byte {
	var doc yaml.Node
	if err := doc.Encode(d.Req); err != nil {
		panic(err) // a LineApplyRequest always encodes
	}
	name := map[string]string{KindOPCUA: "OPC UA", KindMQTT: "MQTT"}[d.Kind]
	doc.HeadComment = fmt.Sprintf("Line file drafted from an %s map file: edit it, then aml line apply FILE.\n"+
		"A field left out keeps the node's current value.", name)
	if d.Kind == KindOPCUA {
		doc.HeadComment += "\naml connect opcua takes what the map lacks from the server (EngineeringUnits, EURange, access level)."
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value != "nodes" {
			continue
		}
		for j, item := range doc.Content[i+1].Content {
			s := d.Req.Nodes[j]
			c := map[string]string{KindOPCUA: "from OPC UA node ", KindMQTT: "from topic "}[d.Kind] + d.Sources[j]
			var missing []string
			if s.Writable == nil {
				missing = append(missing, "writable")
			}
			if s.Unit == nil {
				missing = append(missing, "unit")
			}
			if s.Min == nil || s.Max == nil {
				missing = append(missing, "range")
			}
			if len(missing) > 0 {
				c += fmt.Sprintf("; the map has no %v", joinAnd(missing))
			}
			item.Content[1].LineComment = c
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := errors.Join(enc.Encode(&doc), enc.Close()); err != nil {
		panic(err) // a node tree built by Encode always encodes, into memory
	}
	return b.Bytes()
}

func joinAnd(s []string) string {
	switch len(s) {
	case 1:
		return s[0]
	case 2:
		return s[0] + " or " + s[1]
	}
	return s[0] + ", " + joinAnd(s[1:])
}
