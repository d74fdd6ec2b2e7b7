package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
)

var pathParam = regexp.MustCompile(`\{([^}/]+)\}`)

// OpenAPI returns the OpenAPI 3 document of the API, built from the route
// table (the same rows the router is built from).
func (s *Server) OpenAPI() map[string]any {
	s.docOnce.Do(func() { s.doc = s.buildOpenAPI() })
	return s.doc
}

func (s *Server) openAPIHandler(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.OpenAPI())
}

func (s *Server) buildOpenAPI() map[string]any {
	sg := &schemaGen{defs: map[string]any{}, seen: map[reflect.Type]string{}}
	errRef := map[string]any{"$ref": "#/components/schemas/Error"}
	sg.defs["Error"] = map[string]any{"type": "object", "required": []string{"code", "message"}, "properties": map[string]any{
		"code":    map[string]any{"type": "string", "description": "stable error code, e.g. AML_NOT_FOUND"},
		"message": map[string]any{"type": "string"},
		"field":   map[string]any{"type": "string", "description": "the request field at fault, when there is one"},
	}}
	errResp := func(desc string) map[string]any {
		return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": errRef}}}
	}
	paths := map[string]any{}
	for _, rt := range s.routes {
		full := Prefix + rt.Path
		item, _ := paths[full].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[full] = item
		}
		op, _ := app.Lookup(rt.Op)
		inPath := map[string]bool{}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.Path, -1) {
			inPath[m[1]] = true
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		body := rt.Method == http.MethodPost || rt.Method == http.MethodPut
		summary, act := "Server-Sent Events: dataset built, job state and progress, model stage, trial done, certificate status, connector state and gaps (the caller's lines); query kinds (comma-separated) and id filter them", eventsAct
		var outSchema any = map[string]any{"type": "string"}
		if op != nil {
			summary, act = op.Summary, op.Act
			outSchema = sg.schema(op.Resp)
			if rt.raw != nil {
				body = false // a stream: the fields are query parameters
			}
			for _, f := range app.Fields(op.Req) {
				if inPath[f.Name] || (body && rt.raw == nil) {
					continue
				}
				params = append(params, map[string]any{"name": f.Name, "in": "query", "required": false, "description": f.Doc, "schema": sg.schema(f.Type)})
			}
		}
		outType := rt.OutType
		if outType == "" {
			outType = "application/json"
		}
		if outType != "application/json" {
			outSchema = map[string]any{"type": "string"}
		}
		o := map[string]any{
			"operationId":  operationID(rt.Method, rt.Path),
			"summary":      summary,
			"tags":         []string{rt.Tag},
			"x-aml-op":     rt.Op,
			"x-aml-action": string(act),
			"x-aml-roles":  rolesFor(act),
			"responses": map[string]any{
				itoa(rt.status()): map[string]any{"description": "success", "content": map[string]any{outType: map[string]any{"schema": outSchema}}},
				"400":             errResp("invalid request (AML_INVALID_ARGUMENT)"),
				"401":             errResp("missing or invalid token (AML_UNAUTHENTICATED)"),
				"403":             errResp("role or line scope refuses the action (AML_FORBIDDEN)"),
				"404":             errResp("not found (AML_NOT_FOUND)"),
				"409":             errResp("conflict with the stored state"),
				"413":             errResp("request body over the size limit"),
				"422":             errResp("the request is well formed but its content is refused"),
				"429":             errResp("rate limit (AML_RATE_LIMITED) or queue full"),
			},
		}
		if op != nil && op.Heavy {
			o["x-aml-heavy"] = true
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		switch {
		case rt.InType != "":
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{rt.InType: map[string]any{"schema": map[string]any{"type": "string"}}}}
		case body && op != nil:
			o["requestBody"] = map[string]any{"required": false, "content": map[string]any{"application/json": map[string]any{"schema": sg.bodySchema(op.Req, inPath)}}}
		}
		item[strings.ToLower(rt.Method)] = o
	}
	// The two public routes (no token).
	for path, sum := range map[string]string{"/openapi.json": "This document", "/health": "Liveness probe"} {
		paths[Prefix+path] = map[string]any{"get": map[string]any{"operationId": operationID("GET", path), "summary": sum, "tags": []string{"meta"},
			"security": []any{}, "responses": map[string]any{"200": map[string]any{"description": "success", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}}}}
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "AML API", "version": "v1",
			"description": "Every capability of the aml CLI over HTTP. Authenticate with Authorization: Bearer <token> (aml token create). Errors are {code, message, field}."},
		"servers":    []any{map[string]any{"url": "/"}},
		"security":   []any{map[string]any{"bearer": []string{}}},
		"paths":      paths,
		"components": map[string]any{"schemas": sg.defs, "securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}}},
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func rolesFor(a auth.Action) []string {
	var out []string
	for _, r := range auth.Roles {
		if auth.RoleAllows(r, a) {
			out = append(out, string(r))
		}
	}
	return out
}

// operationID is e.g. "post_certificates_id_approve".
func operationID(method, path string) string {
	p := pathParam.ReplaceAllString(path, "$1")
	p = strings.NewReplacer("/", "_", "-", "_").Replace(strings.Trim(p, "/"))
	return strings.ToLower(method) + "_" + p
}

// schemaGen derives JSON schemas from Go types by their JSON encoding:
// named structs become components, recursion is cut by reference.
type schemaGen struct {
	defs map[string]any
	seen map[reflect.Type]string
}

var (
	timeType     = reflect.TypeOf(time.Time{})
	rawType      = reflect.TypeOf(json.RawMessage{})
	durationType = reflect.TypeOf(app.Duration(0))
	instantType  = reflect.TypeOf(app.Instant(0))
)

// bodySchema is the schema of a request type's body: every field that is
// not in the path.
func (g *schemaGen) bodySchema(t reflect.Type, inPath map[string]bool) any {
	s := g.structSchema(t)
	if p, ok := s["properties"].(map[string]any); ok {
		for name := range inPath {
			delete(p, name)
		}
	}
	if req, ok := s["required"].([]string); ok {
		var keep []string
		for _, r := range req {
			if !inPath[r] {
				keep = append(keep, r)
			}
		}
		if len(keep) == 0 {
			delete(s, "required")
		} else {
			s["required"] = keep
		}
	}
	return s
}

func (g *schemaGen) schema(t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == durationType:
		return map[string]any{"type": "string", "description": "a duration such as 500ms, 90s, 15m or 1h30m"}
	case t == instantType:
		return map[string]any{"oneOf": []any{map[string]any{"type": "integer", "description": "epoch milliseconds"}, map[string]any{"type": "string", "format": "date-time"}}}
	case t == rawType:
		return map[string]any{}
	}
	if _, ok := reflect.New(t).Interface().(json.Marshaler); ok && t.Kind() != reflect.Struct {
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		name := t.Name()
		if name == "" {
			return g.structSchema(t)
		}
		if pkg := t.PkgPath(); pkg != "" {
			name = pkg[strings.LastIndex(pkg, "/")+1:] + "." + name
		}
		name = componentName(name)
		if n, ok := g.seen[t]; ok {
			return map[string]any{"$ref": "#/components/schemas/" + n}
		}
		g.seen[t] = name
		g.defs[name] = map[string]any{} // placeholder while recursing
		g.defs[name] = g.structSchema(t)
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{}
}

func (g *schemaGen) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	// Fields promoted from an embedded pointer are there only when it is
	// set (a page or a bucket list): never required.
	var walk func(t reflect.Type, optional bool)
	walk = func(t reflect.Type, optional bool) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft, optional || f.Type.Kind() == reflect.Pointer)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			ps := g.schema(f.Type)
			if d := f.Tag.Get("jsonschema"); d != "" {
				if m, ok := ps.(map[string]any); ok && m["$ref"] == nil {
					m["description"] = d
				}
			}
			props[name] = ps
			if !optional && !strings.Contains(opts, "omitempty") && f.Type.Kind() != reflect.Pointer {
				required = append(required, name)
			}
		}
	}
	walk(t, false)
	sort.Strings(required)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// componentName makes a Go type name a valid OpenAPI component name
// (letters, digits, '.', '-', '_'): the package paths inside a generic
// type's arguments are cut to their last element and the brackets become
// '_' ("app.List[…/core.Run]" is "app.List_core.Run").
func componentName(n string) string {
	var b strings.Builder
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c == '[' || c == ',' || c == ' ':
			b.WriteByte('_')
			// Skip a package path up to its last '/'.
			j := i + 1
			for k := j; k < len(n) && n[k] != ']' && n[k] != ',' && n[k] != '['; k++ {
				if n[k] == '/' {
					j = k + 1
				}
			}
			i = j - 1
		case c == ']' || c == '*':
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
