package api

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
)

// TestTrainerParamsOverHTTP: GET /trainers/{name} answers a native
// trainer's param schema; POST /jobs with a misspelt, mistyped or
// out-of-range param is refused 400 AML_INVALID_ARGUMENT with the field
// params.<name> before anything is queued; an external trainer's params are
// not validated.
func TestTrainerParamsOverHTTP(t *testing.T) {
	e := newEnv(t, Options{})
	var show app.TrainerShowResponse
	e.want(e.do("viewer", "GET", "/api/v1/trainers/"+url.PathEscape("linear_state_space@1"), nil), 200, "").json(t, &show)
	if show.Kind != app.TrainerNative || show.Params == nil || show.Params.Properties["initSteps"] == nil || string(show.Params.Properties["initSteps"].Default) != "5" {
		t.Fatalf("show: %+v", show)
	}
	e.want(e.do("viewer", "GET", "/api/v1/trainers/one_step", nil), 200, "")
	e.want(e.do("viewer", "GET", "/api/v1/trainers/nope@1", nil), 404, core.CodeNotFound)

	var built struct {
		Dataset core.Dataset `json:"dataset"`
	}
	e.want(e.do("engineer", "POST", "/api/v1/datasets", map[string]any{"spec": json.RawMessage(spec(t))}), 201, "").json(t, &built)
	for _, c := range []struct{ params, field, msg string }{
		{`{"order":2,"ordr":3}`, "params.ordr", "the known fields are order, maxOrder"},
		{`{"order":"2"}`, "params.order", "want integer"},
		{`{"maxOrder":-1}`, "params.maxOrder", "below the minimum 0"},
	} {
		b := e.want(e.do("engineer", "POST", "/api/v1/jobs", map[string]any{"datasetId": built.Dataset.ID, "trainer": "linear_state_space@1", "params": json.RawMessage(c.params)}), 400, core.CodeInvalidArgument).errBody(t)
		if b.Field != c.field || !strings.Contains(b.Message, c.msg) {
			t.Errorf("%s: %+v, want field %s and %q", c.params, b, c.field, c.msg)
		}
	}
	var jl struct{ Count int }
	e.want(e.do("viewer", "GET", "/api/v1/jobs", nil), 200, "").json(t, &jl)
	if jl.Count != 0 {
		t.Fatalf("%d jobs queued with bad params", jl.Count)
	}
}
