package trainers

import (
	"slices"
	"testing"

	"github.com/aml-project/aml/internal/model"
)

// TestLists: All names every native trainer once, and Formats every
// format they write, none of them a built-in format of package model.
func TestLists(t *testing.T) {
	var refs []string
	for _, tr := range All() {
		refs = append(refs, tr.Ref())
	}
	slices.Sort(refs)
	want := []string{"armax@1", "box_jenkins@1", "hybrid_residual@1", "linear_state_space@1", "narx_mlp@1", "neural_state_space@1", "one_step@1", "output_error@1", "process_model@1", "static_forest@1", "static_response@1"}
	if !slices.Equal(refs, want) {
		t.Fatalf("All() = %v, want %v", refs, want)
	}
	f := Formats()
	for _, name := range []string{FormatARX, FormatStateSpace, FormatStatic, FormatHybrid, FormatProcess, FormatOE, FormatARMAX, FormatBJ, FormatForest, FormatNARX, FormatNSS} {
		if f[name] == nil {
			t.Errorf("Formats() has no loader for %s", name)
		}
	}
	for name := range f {
		if slices.Contains(model.BuiltinFormats(), name) {
			t.Errorf("%s is a built-in format of package model", name)
		}
	}
}
