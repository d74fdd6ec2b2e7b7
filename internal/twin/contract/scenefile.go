package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"go.yaml.in/yaml/v3"
)

// A scene file is what an engineer edits (docs/scene-file.md): YAML or
// JSON holding a scene contract under "scene" and, optionally, the
// objective profile its optimiser uses under "objective" — or a bare scene
// contract. `aml twin scene init` drafts one from a model; `scene check`
// and `scene put` read it.

// SceneFile is a scene and the objective stored with it.
type SceneFile struct {
	Scene     *SceneContract    `json:"scene"`
	Objective *ObjectiveProfile `json:"objective,omitempty"`
}

// ParseSceneFile reads a scene file (YAML or JSON; JSON is YAML) and
// validates both documents strictly, as ParseScene does; every problem of
// both parts is in one AML_CONTRACT_INVALID error.
func ParseSceneFile(data []byte) (*SceneFile, error) {
	f, p := readSceneFile(data)
	if len(p) > 0 {
		return nil, invalidErr(p)
	}
	return f, nil
}

// CheckSceneFile is ParseSceneFile that returns the file as far as it
// could be read (a scene that fails validation is still returned when it
// decodes, so its bindings can be checked too) with every problem found
// (none: the file is valid), for `scene check`.
func CheckSceneFile(data []byte) (*SceneFile, []core.Problem) { return readSceneFile(data) }

func readSceneFile(data []byte) (*SceneFile, []core.Problem) {
	if len(data) > MaxContractBytes {
		return nil, []core.Problem{{Field: "$", Message: fmt.Sprintf("document of %d bytes exceeds %d bytes", len(data), MaxContractBytes)}}
	}
	js, err := yamlToJSON(data)
	if err != nil {
		return nil, []core.Problem{{Field: "$", Message: err.Error()}}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil || top == nil {
		return nil, []core.Problem{{Field: "$", Message: "a scene file is an object: a scene contract, or {scene, objective}"}}
	}
	f := &SceneFile{}
	var p []core.Problem
	sceneDoc, objDoc, prefix := js, json.RawMessage(nil), ""
	if raw, ok := top["scene"]; ok {
		prefix = "scene."
		sceneDoc = raw
		for k := range top {
			if k != "scene" && k != "objective" {
				p = append(p, core.Problem{Field: k, Message: "unknown field of a scene file (scene, objective)"})
			}
		}
		objDoc = top["objective"]
	}
	if s, err := ParseScene(sceneDoc); err != nil {
		p = append(p, prefixed(prefix, err)...)
		var loose SceneContract
		if json.Unmarshal(sceneDoc, &loose) == nil {
			f.Scene = &loose
		}
	} else {
		f.Scene = s
	}
	if len(objDoc) > 0 && string(objDoc) != "null" {
		var o ObjectiveProfile
		if err := decodeStrict(objDoc, &o); err != nil {
			p = append(p, prefixed("objective.", err)...)
		} else {
			f.Objective = &o
			if err := o.Validate(); err != nil {
				p = append(p, prefixed("objective.", err)...)
			}
			if f.Scene != nil {
				if err := o.CheckAgainst(f.Scene); err != nil {
					p = append(p, prefixed("objective.", err)...)
				}
			}
		}
	}
	return f, dedupe(p)
}

func prefixed(prefix string, err error) []core.Problem {
	ps := ProblemsOf(err)
	if ps == nil {
		ps = []core.Problem{{Field: "$", Message: err.Error()}}
	}
	out := make([]core.Problem, len(ps))
	for i, q := range ps {
		f := q.Field
		switch {
		case f == "$" || f == "":
			f = strings.TrimSuffix(prefix, ".")
			if f == "" {
				f = "$"
			}
		default:
			f = prefix + f
		}
		out[i] = core.Problem{Field: f, Message: q.Message}
	}
	return out
}

func dedupe(p []core.Problem) []core.Problem {
	seen := map[core.Problem]bool{}
	var out []core.Problem
	for _, q := range p {
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	return out
}

// yamlToJSON converts a YAML (or JSON) document to JSON, refusing more
// than one document, anchors and aliases (no billion laughs) and non-string
// keys.
func yamlToJSON(data []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("more than one YAML document")
	}
	v, err := nodeValue(&n, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

const maxYAMLDepth = 64

func nodeValue(n *yaml.Node, depth int) (any, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("nested more than %d levels", maxYAMLDepth)
	}
	if n.Anchor != "" {
		return nil, fmt.Errorf("line %d: anchors and aliases are not accepted", n.Line)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("an empty document")
		}
		return nodeValue(n.Content[0], depth+1)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!int" && k.Tag != "!!float" && k.Tag != "!!bool") {
				return nil, fmt.Errorf("line %d: keys are plain strings", k.Line)
			}
			if _, dup := m[k.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			v, err := nodeValue(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := nodeValue(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %v", n.Line, err)
			}
			if n.Tag != "!!bool" {
				return json.Number(n.Value), validNumber(n)
			}
			return v, nil
		case "!!str", "!!timestamp":
			return n.Value, nil
		}
		return nil, fmt.Errorf("line %d: tag %s is not accepted", n.Line, n.Tag)
	case yaml.AliasNode:
		return nil, fmt.Errorf("line %d: anchors and aliases are not accepted", n.Line)
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// validNumber refuses YAML number spellings JSON has no form for (.inf,
// .nan, 0x1F, 0o17, 1_000).
func validNumber(n *yaml.Node) error {
	if !json.Valid([]byte(n.Value)) {
		return fmt.Errorf("line %d: %q is not a plain decimal number", n.Line, n.Value)
	}
	return nil
}

// MarshalSceneFile writes f as YAML in the documents' field order, with
// header lines (each written as a "# " comment) before it.
func MarshalSceneFile(f *SceneFile, header []string) ([]byte, error) {
	js, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(js, &n); err != nil { // JSON is YAML: the order is kept
		return nil, err
	}
	var plain func(*yaml.Node)
	plain = func(x *yaml.Node) {
		x.Style = 0
		for _, c := range x.Content {
			plain(c)
		}
	}
	plain(&n)
	var buf bytes.Buffer
	for _, h := range header {
		for _, l := range strings.Split(h, "\n") {
			buf.WriteString(strings.TrimRight("# "+l, " ") + "\n")
		}
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
