package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/service"
)

// TestRoutesAreOps walks the route table: every route but the event
// stream names an app op; the op's request type has a field for every
// path parameter; every op is reachable over HTTP; no op is served twice
// on JSON routes (one spelling per use case).
func TestRoutesAreOps(t *testing.T) {
	seen := map[string]string{}
	reach := map[string]bool{}
	for _, rt := range table() {
		reach[rt.Op] = true
		if rt.Op == "" {
			if rt.Path != "/events" {
				t.Errorf("%s %s names no op", rt.Method, rt.Path)
			}
			continue
		}
		op, ok := app.Lookup(rt.Op)
		if !ok {
			t.Errorf("%s %s: no app op %q", rt.Method, rt.Path, rt.Op)
			continue
		}
		fields := map[string]bool{}
		for _, f := range app.Fields(op.Req) {
			fields[f.Name] = true
		}
		for _, m := range pathParam.FindAllStringSubmatch(rt.Path, -1) {
			if !fields[m[1]] {
				t.Errorf("%s %s: path parameter {%s} is not a field of %s", rt.Method, rt.Path, m[1], op.Req)
			}
		}
		if prev, dup := seen[rt.Op]; dup && rt.raw == nil {
			t.Errorf("op %s is served by %s and %s %s", rt.Op, prev, rt.Method, rt.Path)
		}
		if rt.raw == nil {
			seen[rt.Op] = rt.Method + " " + rt.Path
		}
		// GET and DELETE carry every field in the path or query string:
		// each must be a type a URL parameter can hold.
		if rt.Method == http.MethodGet || rt.Method == http.MethodDelete {
			req := op.NewRequest()
			for _, f := range app.Fields(op.Req) {
				if strings.Contains(f.Type.String(), "map[") || f.Type.Kind() == reflect.Struct {
					t.Errorf("%s %s: field %s (%s) cannot travel in a URL", rt.Method, rt.Path, f.Name, f.Type)
				}
				_ = req
			}
		}
	}
	var missing []string
	for _, op := range app.Ops() {
		if !reach[op.Name] {
			missing = append(missing, op.Name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("ops without an API route: %v", missing)
	}
}

// TestOpenAPIFromTypes checks that the OpenAPI document describes each
// route with its op's types: the JSON body of POST and PUT is the op's
// request type without the path fields, GET parameters are its fields,
// and no request body or JSON answer is a generic object.
func TestOpenAPIFromTypes(t *testing.T) {
	s := NewServer(&service.Deps{}, Options{RatePerSec: -1})
	doc := s.OpenAPI()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)
	for name := range d.Components.Schemas {
		if !valid.MatchString(name) {
			t.Errorf("component name %q is not a valid OpenAPI name", name)
		}
	}
	resolve := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			return d.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
		}
		return s
	}
	generic := func(s map[string]any) bool {
		s = resolve(s)
		if s == nil {
			return true
		}
		if s["type"] == "object" {
			p, _ := s["properties"].(map[string]any)
			_, ap := s["additionalProperties"]
			return len(p) == 0 && !ap
		}
		return false
	}
	for _, rt := range table() {
		op, ok := app.Lookup(rt.Op)
		if !ok {
			continue
		}
		o := d.Paths[Prefix+rt.Path][strings.ToLower(rt.Method)]
		if o == nil {
			t.Fatalf("%s %s missing from the document", rt.Method, rt.Path)
		}
		if o["x-aml-op"] != rt.Op || o["summary"] != op.Summary || o["x-aml-action"] != string(op.Act) {
			t.Errorf("%s %s: op %v summary %v action %v", rt.Method, rt.Path, o["x-aml-op"], o["summary"], o["x-aml-action"])
		}
		if rt.OutType == "" {
			resp := o["responses"].(map[string]any)[itoa(rt.status())].(map[string]any)
			sc := resp["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
			if generic(sc) && op.Resp.Kind() != reflect.Interface {
				t.Errorf("%s %s: the answer's schema is a generic object (%v)", rt.Method, rt.Path, op.Resp)
			}
		}
		inPath := map[string]bool{}
		for _, m := range pathParam.FindAllStringSubmatch(rt.Path, -1) {
			inPath[m[1]] = true
		}
		body := (rt.Method == http.MethodPost || rt.Method == http.MethodPut) && rt.raw == nil
		want := map[string]bool{}
		for _, f := range app.Fields(op.Req) {
			if !inPath[f.Name] {
				want[f.Name] = true
			}
		}
		if body {
			rb, _ := o["requestBody"].(map[string]any)
			if rb == nil {
				t.Errorf("%s %s: no request body", rt.Method, rt.Path)
				continue
			}
			sc := rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
			props, _ := sc["properties"].(map[string]any)
			if len(want) > 0 && generic(sc) {
				t.Errorf("%s %s: generic request body", rt.Method, rt.Path)
			}
			for n := range want {
				if _, ok := props[n]; !ok {
					t.Errorf("%s %s: body lacks field %s of %s", rt.Method, rt.Path, n, op.Req)
				}
			}
			for n := range props {
				if !want[n] {
					t.Errorf("%s %s: body has %s, not a field of %s", rt.Method, rt.Path, n, op.Req)
				}
			}
			continue
		}
		got := map[string]bool{}
		ps, _ := o["parameters"].([]any)
		for _, p := range ps {
			pm := p.(map[string]any)
			if pm["in"] == "query" {
				got[pm["name"].(string)] = true
			}
		}
		if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s %s: query parameters %v, want the fields %v of %s", rt.Method, rt.Path, got, want, op.Req)
		}
	}
}
