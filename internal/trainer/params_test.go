package trainer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

type testParams struct {
	Order   int       `json:"order" jsonschema:"state dimension" param:"default=0;min=0;max=20"`
	Mode    string    `json:"mode" jsonschema:"mode" param:"default=\"a\";enum=a|b"`
	Lambdas []float64 `json:"lambdas" jsonschema:"grid" param:"itemMin=0;maxItems=3"`
	Flag    *bool     `json:"flag" jsonschema:"a flag"`
	Model   string    `json:"model" jsonschema:"required one" param:"required"`
	Sub     *struct {
		A map[string]string `json:"a" jsonschema:"a map"`
	} `json:"sub" jsonschema:"nested"`
	Factor *float64 `json:"factor" jsonschema:"a step factor" param:"default=1;exclusiveMin=0"`
}

// TestValidateParams: unknown fields, wrong types, out-of-range values
// (an exclusive minimum refuses the bound itself),
// values outside the enum and missing required ones are refused with the
// field's JSON path; valid params pass.
func TestValidateParams(t *testing.T) {
	s := MustParamSchema[testParams]()
	for _, c := range []struct{ params, field, msg string }{
		{`{"model":"m"}`, "", ""},
		{`{"model":"m","order":3,"mode":"b","lambdas":[0,1.5],"flag":null,"sub":{"a":{"x":"y"}}}`, "", ""},
		{`{"model":"m","ordr":3}`, "params.ordr", `unknown field "ordr"; the known fields are order, mode, lambdas, flag, model, sub, factor`},
		{`{"model":"m","order":"3"}`, "params.order", `"3" is a string, want integer`},
		{`{"model":"m","order":2.5}`, "params.order", "2.5 is a number, want integer"},
		{`{"model":"m","order":-1}`, "params.order", "-1 is below the minimum 0"},
		{`{"model":"m","order":21}`, "params.order", "21 is above the maximum 20"},
		{`{"model":"m","factor":1e-9}`, "", ""},
		{`{"model":"m","factor":0}`, "params.factor", "0 is not above 0"},
		{`{"model":"m","factor":-0.5}`, "params.factor", "-0.5 is not above 0"},
		{`{"model":"m","mode":"c"}`, "params.mode", `"c" is not one of "a", "b"`},
		{`{"model":"m","lambdas":[1,-2]}`, "params.lambdas[1]", "below the minimum 0"},
		{`{"model":"m","lambdas":[0,1,2,3]}`, "params.lambdas", "4 items; at most 3"},
		{`{"model":"m","flag":1}`, "params.flag", "want null or boolean"},
		{`{"model":"m","sub":{"b":1}}`, "params.sub.b", `unknown field "b"; the known fields are a`},
		{`{"model":"m","sub":{"a":{"x":1}}}`, "params.sub.a.x", "want string"},
		{`{}`, "params.model", "required"},
		{`[1]`, "params", "must be a JSON object"},
	} {
		err := ValidateParams("t@1", s, json.RawMessage(c.params))
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.params, err)
			}
			continue
		}
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != core.CodeInvalidArgument || ae.Field != c.field || !strings.Contains(ae.Message, c.msg) {
			t.Errorf("%s: got %v (field %q), want %s on %s containing %q", c.params, err, fieldOf(ae), core.CodeInvalidArgument, c.field, c.msg)
		}
	}
}

func fieldOf(e *core.Error) string {
	if e == nil {
		return ""
	}
	return e.Field
}

// TestParamRows: the table rows show type, default and range (an
// exclusive minimum as "> N").
func TestParamRows(t *testing.T) {
	rows := ParamRows(MustParamSchema[testParams]())
	if len(rows) != 8 || rows[6].Name != "sub.a" || rows[6].Type != "object of string" || rows[7].Range != "> 0" {
		t.Fatalf("rows = %+v", rows)
	}
	want := ParamRow{Name: "order", Type: "integer", Default: "0", Range: "0..20", Description: "state dimension"}
	if rows[0] != want {
		t.Errorf("row 0 = %+v, want %+v", rows[0], want)
	}
	if rows[1].Range != `"a", "b"` || rows[2].Type != "array of number" || rows[2].Range != "each ≥ 0, at most 3 items" || !rows[4].Required {
		t.Errorf("rows = %+v", rows)
	}
}
