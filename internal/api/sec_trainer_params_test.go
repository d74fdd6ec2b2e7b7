package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// Security finding 13b: a native trainer runs in the serving process,
// and its params sized its networks without a ceiling: narx_mlp@1 and
// neural_state_space@1 took any number of hidden layers (10 000 layers
// of 1024 units is 10^10 weights, tens of gigabytes before the first
// epoch), hybrid_residual@1 any width and any number of ensemble members.
// An engineer or agent's job.submit with such params is refused before
// it is queued, naming the param.
func TestSec13_TrainerParamsBounded(t *testing.T) {
	e := newEnv(t, Options{})
	var built struct {
		Dataset core.Dataset `json:"dataset"`
	}
	e.want(e.do("engineer", "POST", "/api/v1/datasets", map[string]any{"spec": json.RawMessage(spec(t))}), 201, "").json(t, &built)
	layers := "[" + strings.TrimSuffix(strings.Repeat("1024,", 10_000), ",") + "]"
	for _, c := range []struct{ trainer, params, field, msg string }{
		{"narx_mlp@1", `{"hidden":` + layers + `}`, "params.hidden", "at most"},
		{"neural_state_space@1", `{"hidden":` + layers + `}`, "params.hidden", "at most"},
		{"hybrid_residual@1", `{"physics":"phys-none","hidden":100000000}`, "params.hidden", "above the maximum"},
		{"hybrid_residual@1", `{"physics":"phys-none","ensemble":1000000}`, "params.ensemble", "above the maximum"},
		{"hybrid_residual@1", `{"physics":"phys-none","lags":100000000}`, "params.lags", "above the maximum"},
	} {
		r := e.do("agent", "POST", "/api/v1/jobs", map[string]any{"datasetId": built.Dataset.ID, "trainer": c.trainer, "params": json.RawMessage(c.params)})
		if r.status != 400 {
			t.Errorf("%s %.60s: status %d, want 400: %.200s", c.trainer, c.params, r.status, r.body)
			if r.status == 201 {
				var j core.Job
				r.json(t, &j)
				e.do("admin", "POST", "/api/v1/jobs/"+j.ID+"/cancel", nil)
			}
			continue
		}
		if b := r.errBody(t); b.Code != core.CodeInvalidArgument || b.Field != c.field || !strings.Contains(b.Message, c.msg) {
			t.Errorf("%s %.60s: %+v, want %s on field %s and %q", c.trainer, c.params, b, core.CodeInvalidArgument, c.field, c.msg)
		}
	}
	var jl struct{ Count int }
	e.want(e.do("viewer", "GET", "/api/v1/jobs", nil), 200, "").json(t, &jl)
	if jl.Count != 0 {
		t.Fatalf("%d jobs queued with unbounded params", jl.Count)
	}
}
