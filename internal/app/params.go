package app

import (
	"encoding"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/core"
)

// Request fields travel in three places: in the URL path (a route pattern
// segment "{name}" whose name is the field's json name), in the query
// string (GET and DELETE: every other field) and in the JSON body (POST and
// PUT: every other field). MCP sends them all as one JSON object. This file
// is the one codec of path and query values, used by the API server and
// the CLI's client alike.

// Field is one request field with its json name.
type Field struct {
	Name  string // json name
	Index []int
	Type  reflect.Type
	Doc   string // jsonschema tag
}

// Fields lists the json fields of a request struct type (embedded structs
// flattened, "-" and unexported skipped).
func Fields(t reflect.Type) []Field {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []Field
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, Field{Name: name, Index: f.Index, Type: f.Type, Doc: f.Tag.Get("jsonschema")})
	}
	return out
}

// SetParam sets the field named name of the request *struct v from the text
// raw (a path segment or a query value; repeated values for slices).
func SetParam(v any, name string, raw ...string) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return core.Errorf(core.CodeInternal, "SetParam on %T", v)
	}
	for _, f := range Fields(rv.Type()) {
		if f.Name != name {
			continue
		}
		fv := rv.Elem().FieldByIndex(f.Index)
		if err := setValue(fv, raw); err != nil {
			return core.FieldErrorf(core.CodeInvalidArgument, name, "%s: %v", name, errMessage(err))
		}
		return nil
	}
	return core.FieldErrorf(core.CodeInvalidArgument, name, "unknown parameter %q", name)
}

func errMessage(err error) string {
	if ae, ok := err.(*core.Error); ok {
		return ae.Message
	}
	return err.Error()
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

type setter interface{ Set(string) error }

func setValue(fv reflect.Value, raw []string) error {
	if len(raw) == 0 {
		return nil
	}
	if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String {
		// One value per repetition of the parameter (a value may hold
		// a comma: a column "temp, C", a unit "m3/h,std").
		vals := []string{}
		for _, r := range raw {
			if r != "" {
				vals = append(vals, r)
			}
		}
		sv := reflect.MakeSlice(fv.Type(), len(vals), len(vals))
		for i, s := range vals {
			sv.Index(i).SetString(s)
		}
		fv.Set(sv)
		return nil
	}
	s := raw[len(raw)-1]
	if s == "" && fv.Kind() != reflect.String {
		return nil // an empty value is a parameter not given
	}
	if fv.Kind() == reflect.Pointer {
		nv := reflect.New(fv.Type().Elem())
		if err := setValue(nv.Elem(), raw); err != nil {
			return err
		}
		fv.Set(nv)
		return nil
	}
	if p, ok := fv.Addr().Interface().(setter); ok {
		return p.Set(s)
	}
	if fv.Addr().Type().Implements(textUnmarshaler) {
		return fv.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return core.Errorf(core.CodeInvalidArgument, "must be true or false, got %q", s)
		}
		fv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || fv.OverflowInt(n) {
			return core.Errorf(core.CodeInvalidArgument, "must be an integer, got %q", s)
		}
		fv.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || fv.OverflowUint(n) {
			return core.Errorf(core.CodeInvalidArgument, "must be a non-negative integer, got %q", s)
		}
		fv.SetUint(n)
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return core.Errorf(core.CodeInvalidArgument, "must be a number, got %q", s)
		}
		fv.SetFloat(x)
	default:
		return core.Errorf(core.CodeInternal, "a %s cannot be a URL parameter", fv.Type())
	}
	return nil
}

// ParamValues returns the non-zero fields of the request struct v whose
// names are in want (nil: all) as URL values, the inverse of SetParam.
func ParamValues(v any, want func(name string) bool) url.Values {
	out := url.Values{}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	for _, f := range Fields(rv.Type()) {
		if want != nil && !want(f.Name) {
			continue
		}
		fv := rv.FieldByIndex(f.Index)
		if fv.IsZero() {
			continue
		}
		if fv.Kind() == reflect.Pointer {
			fv = fv.Elem()
		}
		if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String {
			for i := range fv.Len() {
				out.Add(f.Name, fv.Index(i).String())
			}
			continue
		}
		if s, ok := fv.Interface().(interface{ String() string }); ok && fv.Kind() != reflect.String {
			out.Set(f.Name, s.String())
			continue
		}
		switch fv.Kind() {
		case reflect.String:
			out.Set(f.Name, fv.String())
		case reflect.Bool:
			out.Set(f.Name, strconv.FormatBool(fv.Bool()))
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out.Set(f.Name, strconv.FormatInt(fv.Int(), 10))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out.Set(f.Name, strconv.FormatUint(fv.Uint(), 10))
		case reflect.Float32, reflect.Float64:
			out.Set(f.Name, strconv.FormatFloat(fv.Float(), 'g', -1, 64))
		}
	}
	return out
}
