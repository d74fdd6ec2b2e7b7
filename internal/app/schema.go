package app

import (
	"encoding/json"
	"reflect"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is the JSON schema of a request or response type: the MCP tools'
// input and output schemas and the OpenAPI document's components come from
// it. Two things differ from plain inference so that a schema describes
// what encoding/json actually reads and writes: a type with its own
// MarshalJSON/UnmarshalJSON (Duration and Instant are strings, json.RawMessage
// any value, …) gets the schema it declares through JSONSchema() or none
// (any value), and a map may be null (a nil map encodes as null).
func Schema(t reflect.Type) (*jsonschema.Schema, error) {
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if s, ok := schemas[t]; ok {
		return s, nil
	}
	over := map[reflect.Type]*jsonschema.Schema{}
	collectOverrides(t, over, map[reflect.Type]bool{})
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: over})
	if err != nil {
		return nil, err
	}
	schemas[t] = s
	return s, nil
}

// MustSchema is Schema for the application's own types (a failure is a
// programming error caught by the tests that list the ops).
func MustSchema(t reflect.Type) *jsonschema.Schema {
	s, err := Schema(t)
	if err != nil {
		panic("app: schema of " + t.String() + ": " + err.Error())
	}
	return s
}

var (
	schemaMu sync.Mutex
	schemas  = map[reflect.Type]*jsonschema.Schema{}
)

var (
	marshalerType   = reflect.TypeFor[json.Marshaler]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
	durationType    = reflect.TypeFor[Duration]()
	instantType     = reflect.TypeFor[Instant]()
	schemaType      = reflect.TypeFor[jsonschema.Schema]()
)

func collectOverrides(t reflect.Type, over map[reflect.Type]*jsonschema.Schema, seen map[reflect.Type]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	switch t {
	case durationType:
		over[t] = &jsonschema.Schema{Type: "string", Description: "a duration such as 500ms, 90s, 15m or 1h30m", Pattern: `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^0$`}
		return
	case instantType:
		over[t] = &jsonschema.Schema{Types: []string{"integer", "string"}, Description: "epoch milliseconds or an RFC 3339 time"}
		return
	case schemaType: // a JSON schema in an answer (trainer.show)
		over[t] = &jsonschema.Schema{Type: "object", Description: "a JSON schema"}
		return
	}
	if t != timeType && t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface &&
		(t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
			(t.Kind() != reflect.Struct && reflect.PointerTo(t).Implements(unmarshalerType))) {
		over[t] = &jsonschema.Schema{}
		return
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		collectOverrides(t.Elem(), over, seen)
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			over[t] = &jsonschema.Schema{Types: []string{"null", "object"}}
		} else {
			over[t] = &jsonschema.Schema{}
		}
	case reflect.Struct:
		if t == timeType {
			return
		}
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				collectOverrides(f.Type, over, seen)
			}
		}
	}
}
