package trainer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// Described is a native trainer that publishes what it takes and writes:
// a one-line summary, the model formats of its artifacts and the JSON
// schema of its params (an object schema, one property per parameter).
// job.submit validates a job's params against the schema before queueing
// it; trainer.show and docs/trainers.md present it.
type Described interface {
	Trainer
	Summary() string
	Formats() []string
	ParamSchema() *jsonschema.Schema
}

// DatasetParamsChecker is a native trainer whose params must also agree
// with the dataset (e.g. a list with one entry per control). job.submit
// calls it after the schema check when the dataset's manifest is at hand;
// an error names the field (params.<name>).
type DatasetParamsChecker interface {
	CheckDatasetParams(params json.RawMessage, m *dataset.Manifest) error
}

// ParamSchema infers the schema of a params struct T. Each field's
// description is its jsonschema tag (required: a parameter without one is
// a programming error); its default, range and allowed values come from a
// param tag of ";"-separated settings:
//
//	default=JSON   the value used when the parameter is absent
//	min=N, max=N   inclusive bounds of a number
//	exclusiveMin=N the number must be above N (a factor > 0)
//	itemMin=N, itemMax=N  bounds of every element of an array of numbers
//	maxItems=N     the most elements an array may have
//	enum=a|b|c     the allowed strings
//	required       the parameter must be given
//
// Every parameter is optional unless tagged required.
func ParamSchema[T any]() (*jsonschema.Schema, error) {
	t := reflect.TypeFor[T]()
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[IntOrList](): {Types: []string{"integer", "array"}, Items: &jsonschema.Schema{Type: "integer"}},
	}})
	if err != nil {
		return nil, err
	}
	optional(s)
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		p := s.Properties[name]
		if p == nil {
			continue
		}
		if p.Description == "" {
			return nil, fmt.Errorf("param %s of %s has no description (jsonschema tag)", name, t)
		}
		if tag := f.Tag.Get("param"); tag != "" {
			if err := applyParamTag(s, name, p, tag); err != nil {
				return nil, fmt.Errorf("param %s of %s: %w", name, t, err)
			}
		}
	}
	return s, nil
}

// optional drops the inferred "required" (every field without omitempty)
// of s and its nested objects: a parameter is optional unless tagged so.
func optional(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Required = nil
	for _, p := range s.Properties {
		optional(p)
	}
	optional(s.Items)
	optional(s.AdditionalProperties)
}

// IntOrList is a parameter given either as one integer, which applies to
// every item (e.g. every model input), or as a list of integers, one per
// item. Its schema type is integer or array of integers (min and itemMin
// bound both forms).
type IntOrList struct {
	N      int   // the integer form
	List   []int // the list form (IsList)
	IsList bool
}

// UnmarshalJSON reads an integer or an array of integers.
func (v *IntOrList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var l []int
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("want an integer or a list of integers: %w", err)
		}
		*v = IntOrList{List: l, IsList: true}
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want an integer or a list of integers: %w", err)
	}
	*v = IntOrList{N: n}
	return nil
}

// MarshalJSON writes the form that was given.
func (v IntOrList) MarshalJSON() ([]byte, error) {
	if v.IsList {
		if v.List == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(v.List)
	}
	return json.Marshal(v.N)
}

// For returns the value of every one of n items: the list (nil when its
// length is not n) or n copies of the integer.
func (v IntOrList) For(n int) []int {
	if v.IsList {
		if len(v.List) != n {
			return nil
		}
		return v.List
	}
	out := make([]int, n)
	for i := range out {
		out[i] = v.N
	}
	return out
}

// MustParamSchema is ParamSchema for the native trainers' own structs (a
// failure is a programming error the trainers' tests catch).
func MustParamSchema[T any]() *jsonschema.Schema {
	s, err := ParamSchema[T]()
	if err != nil {
		panic("trainer: " + err.Error())
	}
	return s
}

func applyParamTag(obj *jsonschema.Schema, name string, p *jsonschema.Schema, tag string) error {
	for kv := range strings.SplitSeq(tag, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		num := func() (*float64, error) {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: %w", k, v, err)
			}
			return &f, nil
		}
		var err error
		switch k {
		case "default":
			if !json.Valid([]byte(v)) {
				return fmt.Errorf("default %q is not JSON", v)
			}
			p.Default = json.RawMessage(v)
		case "min":
			p.Minimum, err = num()
		case "max":
			p.Maximum, err = num()
		case "exclusiveMin":
			p.ExclusiveMinimum, err = num()
		case "itemMin", "itemMax":
			if p.Items == nil {
				return fmt.Errorf("%s on a parameter that is not an array", k)
			}
			if k == "itemMin" {
				p.Items.Minimum, err = num()
			} else {
				p.Items.Maximum, err = num()
			}
		case "maxItems":
			if p.Items == nil {
				return fmt.Errorf("%s on a parameter that is not an array", k)
			}
			var n int
			if n, err = strconv.Atoi(v); err == nil && n < 0 {
				err = fmt.Errorf("maxItems=%d is negative", n)
			}
			p.MaxItems = &n
		case "enum":
			for e := range strings.SplitSeq(v, "|") {
				p.Enum = append(p.Enum, e)
			}
		case "required":
			obj.Required = append(obj.Required, name)
		default:
			return fmt.Errorf("unknown param tag setting %q", k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ValidateParams checks a job's params (a JSON object, or nothing) against
// the schema of trainer ref: an unknown parameter (the known ones are
// listed), a value of the wrong type, outside its range or not among the
// allowed ones, or a missing required one is AML_INVALID_ARGUMENT with
// the field's JSON path (params.<name>).
func ValidateParams(ref string, s *jsonschema.Schema, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	var v any
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return core.FieldErrorf(core.CodeInvalidArgument, "params", "params of %s: not valid JSON: %v", ref, err)
		}
	}
	if v == nil {
		v = map[string]any{}
	}
	if _, ok := v.(map[string]any); !ok {
		return core.FieldErrorf(core.CodeInvalidArgument, "params", "params of %s must be a JSON object", ref)
	}
	return validate(ref, s, v, "params")
}

func validate(ref string, s *jsonschema.Schema, v any, path string) error {
	badAt := func(field, format string, args ...any) error {
		return core.FieldErrorf(core.CodeInvalidArgument, field, "%s (trainer %s; aml trainer show %s)", fmt.Sprintf(format, args...), ref, ref)
	}
	bad := func(format string, args ...any) error { return badAt(path, format, args...) }
	if s == nil {
		return nil
	}
	got := jsonType(v)
	if types := schemaTypes(s); len(types) > 0 && !typeAllowed(types, got) {
		return bad("%s is %s, want %s", shortJSON(v), article(got), strings.Join(types, " or "))
	}
	if len(s.Enum) > 0 && v != nil {
		ok := false
		for _, e := range s.Enum {
			if fmt.Sprint(e) == fmt.Sprint(v) && got == jsonType(e) {
				ok = true
			}
		}
		if !ok {
			return bad("%s is not one of %s", shortJSON(v), enumList(s.Enum))
		}
	}
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return bad("%s is not a finite number", x)
		}
		if s.Minimum != nil && f < *s.Minimum {
			return bad("%s is below the minimum %s", x, num(*s.Minimum))
		}
		if s.ExclusiveMinimum != nil && f <= *s.ExclusiveMinimum {
			return bad("%s is not above %s", x, num(*s.ExclusiveMinimum))
		}
		if s.Maximum != nil && f > *s.Maximum {
			return bad("%s is above the maximum %s", x, num(*s.Maximum))
		}
	case []any:
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			return bad("%d items; at most %d", len(x), *s.MaxItems)
		}
		for i, e := range x {
			if err := validate(ref, s.Items, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, known := s.Properties[k]
			if !known {
				if ap := s.AdditionalProperties; ap != nil {
					if ap.Not != nil { // false: no other key
						return badAt(path+"."+k, "unknown field %q; the known fields are %s", k, strings.Join(PropertyNames(s), ", "))
					}
					sub = ap
				}
			}
			if err := validate(ref, sub, x[k], path+"."+k); err != nil {
				return err
			}
		}
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				return badAt(path+"."+r, "required, not given")
			}
		}
	}
	return nil
}

// PropertyNames lists an object schema's properties in their declared
// order (the params struct's field order).
func PropertyNames(s *jsonschema.Schema) []string {
	if len(s.PropertyOrder) == len(s.Properties) {
		return append([]string(nil), s.PropertyOrder...)
	}
	out := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func schemaTypes(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// typeAllowed: an integer is a number too; "integer" is what encoding/json
// reads into an int (no fraction, no exponent).
func typeAllowed(types []string, got string) bool {
	for _, t := range types {
		if t == got || (t == "number" && got == "integer") {
			return true
		}
	}
	return false
}

func article(t string) string {
	switch t {
	case "integer", "array", "object":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

func shortJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

func enumList(e []any) string {
	parts := make([]string, len(e))
	for i, x := range e {
		parts[i] = shortJSON(x)
	}
	return strings.Join(parts, ", ")
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// ParamRow is one parameter as a table shows it (aml trainer show,
// docs/trainers.md).
type ParamRow struct {
	Name, Type, Default, Range, Description string
	Required                                bool
}

// ParamRows lists the parameters of an object schema in declared order.
func ParamRows(s *jsonschema.Schema) []ParamRow {
	if s == nil {
		return nil
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	var out []ParamRow
	for _, name := range PropertyNames(s) {
		p := s.Properties[name]
		r := ParamRow{Name: name, Type: typeText(p), Description: p.Description, Required: req[name], Range: rangeText(p)}
		if len(p.Default) > 0 {
			r.Default = string(p.Default)
		}
		out = append(out, r)
		// an object parameter's own fields follow it (mapping.controls)
		for _, sub := range ParamRows(objectOf(p)) {
			sub.Name = name + "." + sub.Name
			out = append(out, sub)
		}
	}
	return out
}

// objectOf is p when it is an object schema with named properties.
func objectOf(p *jsonschema.Schema) *jsonschema.Schema {
	if len(p.Properties) > 0 {
		return p
	}
	return nil
}

func typeText(p *jsonschema.Schema) string {
	var ts []string
	for _, t := range schemaTypes(p) {
		if t == "null" {
			continue
		}
		if t == "array" && p.Items != nil && len(schemaTypes(p.Items)) > 0 {
			t = "array of " + strings.Join(schemaTypes(p.Items), "|")
		}
		if t == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Not == nil && len(p.Properties) == 0 {
			t = "object of " + strings.Join(schemaTypes(p.AdditionalProperties), "|")
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return "any"
	}
	return strings.Join(ts, "|")
}

func rangeText(p *jsonschema.Schema) string {
	if len(p.Enum) > 0 {
		return enumList(p.Enum)
	}
	bounds := func(s *jsonschema.Schema) string {
		switch {
		case s.ExclusiveMinimum != nil && s.Maximum != nil:
			return "> " + num(*s.ExclusiveMinimum) + ", ≤ " + num(*s.Maximum)
		case s.ExclusiveMinimum != nil:
			return "> " + num(*s.ExclusiveMinimum)
		case s.Minimum != nil && s.Maximum != nil:
			return num(*s.Minimum) + ".." + num(*s.Maximum)
		case s.Minimum != nil:
			return "≥ " + num(*s.Minimum)
		case s.Maximum != nil:
			return "≤ " + num(*s.Maximum)
		}
		return ""
	}
	if r := bounds(p); r != "" {
		return r
	}
	if p.Items != nil {
		r := bounds(p.Items)
		if r != "" {
			r = "each " + r
		}
		if p.MaxItems != nil {
			if r != "" {
				r += ", "
			}
			r += "at most " + strconv.Itoa(*p.MaxItems) + " items"
		}
		if r != "" {
			return r
		}
	}
	if len(p.Properties) > 0 {
		return "keys " + strings.Join(PropertyNames(p), ", ")
	}
	return ""
}
