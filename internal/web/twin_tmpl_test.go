package web

import (
	"bytes"
	"net/url"
	"testing"

	"github.com/aml-project/aml/internal/auth"
)

// TestTwinTemplatesRender executes the pages of the twin, approver and
// batch-record actions with empty data (a page a handler renders before
// anything exists must not be a template error).
func TestTwinTemplatesRender(t *testing.T) {
	p := &auth.Principal{Name: "eve", Role: auth.RoleEngineer}
	for _, name := range []string{"batch", "sceneedit", "optimized", "certexec"} {
		data := map[string]any{"Form": url.Values{}}
		if name == "optimized" {
			data["Res"] = struct{ Result, Record any }{Result: struct {
				Mode      string
				Evaluated int
				NoPass    string
			}{}}
		}
		var buf bytes.Buffer
		if err := templates()[name].ExecuteTemplate(&buf, "layout", pageData{Title: name, User: p, Data: data, Nav: name}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
