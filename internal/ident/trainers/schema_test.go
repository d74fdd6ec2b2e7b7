package trainers

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/aml-project/aml/internal/trainer"
)

// TestEveryTrainerHasParamSchema: every native trainer describes itself
// (summary, formats, an object schema of its params) and every parameter,
// nested ones included, has a description, a type (unless ignored) and a
// default that the schema itself accepts.
func TestEveryTrainerHasParamSchema(t *testing.T) {
	for _, tr := range All() {
		d, ok := tr.(trainer.Described)
		if !ok {
			t.Errorf("%s does not implement trainer.Described", tr.Ref())
			continue
		}
		if d.Summary() == "" || len(d.Formats()) == 0 {
			t.Errorf("%s: summary %q, formats %v", tr.Ref(), d.Summary(), d.Formats())
		}
		s := d.ParamSchema()
		if s == nil || s.Type != "object" || len(s.Properties) == 0 {
			t.Fatalf("%s: param schema %+v is not an object schema with properties", tr.Ref(), s)
		}
		checkDescribed(t, tr.Ref(), "params", s)
		if err := trainer.ValidateParams(tr.Ref(), s, nil); err != nil && tr.Ref() != "hybrid_residual@1" {
			t.Errorf("%s: no params refused: %v", tr.Ref(), err)
		}
		for name, p := range s.Properties {
			if len(p.Default) == 0 {
				continue
			}
			raw, _ := json.Marshal(map[string]json.RawMessage{name: p.Default, "physics": json.RawMessage(`"phys-000000000000000000000000"`)})
			if err := trainer.ValidateParams(tr.Ref(), s, raw); err != nil {
				t.Errorf("%s: the default of %s is refused: %v", tr.Ref(), name, err)
			}
		}
	}
}

func checkDescribed(t *testing.T, ref, path string, s *jsonschema.Schema) {
	for name, p := range s.Properties {
		if p.Description == "" {
			t.Errorf("%s: %s.%s has no description", ref, path, name)
		}
		if len(p.Properties) > 0 {
			checkDescribed(t, ref, path+"."+name, p)
		}
	}
}
