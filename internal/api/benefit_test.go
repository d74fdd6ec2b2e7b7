package api

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// TestBenefitRoutes: the benefit study's routes are the app's ops with
// their rules: a viewer may not start a study, a runs count over the cap
// and an unknown field are refused before anything starts (no study
// directory), as are a study without a line and one for a line that
// does not exist; a study id that is not one is refused, an unknown one is
// not found, and any reader lists the studies.
func TestBenefitRoutes(t *testing.T) {
	e := newEnv(t, Options{})
	refused := func(role string, body any, status int, code, field string) {
		t.Helper()
		r := e.do(role, "POST", "/api/v1/benefit-studies", body)
		if r.status != status {
			t.Fatalf("%s POST %v: %d, want %d: %s", role, body, r.status, status, r.body)
		}
		if b := r.errBody(t); b.Code != code || b.Field != field {
			t.Errorf("%s POST %v: %s", role, body, r.body)
		}
		if _, err := os.Stat(filepath.Join(e.dir, "benefit")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s POST %v: a study directory exists (%v)", role, body, err)
		}
	}
	refused("viewer", map[string]any{"line": simLine, "runs": 2}, 403, core.CodeForbidden, "role")
	refused("approver", map[string]any{"line": simLine, "runs": 2}, 403, core.CodeForbidden, "role")
	refused("engineer", map[string]any{"line": simLine, "runs": 201}, 400, core.CodeInvalidArgument, "runs")
	refused("engineer", map[string]any{"line": simLine, "runs": 2, "dataDir": "/etc"}, 400, core.CodeInvalidArgument, "dataDir")
	refused("engineer", map[string]any{"runs": 2}, 400, core.CodeInvalidArgument, "line")
	refused("engineer", map[string]any{"line": "no-such-line", "runs": 2}, 404, core.CodeNotFound, "line")

	var l struct {
		Items []any `json:"items"`
		Count int   `json:"count"`
	}
	e.want(e.do("viewer", "GET", "/api/v1/benefit-studies", nil), 200, "").json(t, &l)
	if l.Items == nil || l.Count != 0 {
		t.Errorf("list: %+v", l)
	}
	e.want(e.do("viewer", "GET", "/api/v1/benefit-studies/not-a-study", nil), 400, core.CodeInvalidArgument)
	e.want(e.do("viewer", "GET", "/api/v1/benefit-studies/bs-20261205T122256.000-abcd1234", nil), 404, core.CodeNotFound)
}
