package archtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestViolations: a banned package, a banned subpackage and a stale
// allowlist entry are reported; a listed import, a types-only package and
// a package whose name merely starts like a banned one are not.
func TestViolations(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import (
	_ "github.com/aml-project/aml/internal/twin/engine"
	_ "github.com/aml-project/aml/internal/ident/lm"
	_ "github.com/aml-project/aml/internal/eval"
	_ "github.com/aml-project/aml/internal/twin/contract"
	_ "github.com/aml-project/aml/internal/evaluation"
	_ "github.com/aml-project/aml/internal/app"
)
`
	name := filepath.Join(dir, "a.go")
	if err := os.WriteFile(name, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// A test file is not checked.
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), []byte("package x\n\nimport _ \"github.com/aml-project/aml/internal/jobs\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Violations([]string{name, filepath.Join(dir, "a_test.go")}, map[string]string{
		filepath.ToSlash(name) + " internal/eval": "listed",
		"gone.go internal/jobs":                   "stale",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("want 3 violations (engine, ident/lm, the stale entry), got %d: %q", len(got), got)
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"imports " + Module + "internal/ident/lm,", "imports " + Module + "internal/twin/engine,", `"gone.go internal/jobs"`} {
		if !strings.Contains(all, want) {
			t.Errorf("want a violation mentioning %q in %q", want, got)
		}
	}
}

// TestViolationsBadFile: a file that does not parse is an error, not a
// pass.
func TestViolationsBadFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "b.go")
	if err := os.WriteFile(name, []byte("package"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Violations([]string{name}, nil); err == nil {
		t.Fatal("want a parse error")
	}
}

// TestBanned covers the prefix rules.
func TestBanned(t *testing.T) {
	for rel, want := range map[string]bool{
		"internal/ident":          false, // "internal/ident/" covers subpackages only
		"internal/ident/trainers": true,
		"internal/jobs":           true,
		"internal/jobsx":          false,
		"internal/twin/contract":  false,
		"internal/twin/cert":      true,
		"internal/eval/sub":       true,
	} {
		if got := banned(rel); got != want {
			t.Errorf("banned(%q) = %v, want %v", rel, got, want)
		}
	}
}
