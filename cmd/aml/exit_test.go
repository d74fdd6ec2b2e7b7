package main

import (
	"strings"
	"testing"
)

// TestExitStatusByKind: an error whose code is of kind usage exits 2 like
// a command-line mistake; any other error exits 1.
func TestExitStatusByKind(t *testing.T) {
	d := t.TempDir()
	if _, errs, code := aml(t, "serve", "--data", d, "--addr", "nonsense:99999"); code != 2 || !strings.HasPrefix(errs, "error: AML_USAGE: listen on") {
		t.Fatalf("serve on a bad address: exit %d, stderr %q", code, errs)
	}
	if _, errs, code := aml(t, "model", "show", "no-such-model", "--data", d); code != 1 || !strings.HasPrefix(errs, "error: AML_NOT_FOUND") {
		t.Fatalf("unknown model: exit %d, stderr %q", code, errs)
	}
}
