package main

import (
	"strings"
	"testing"
)

func TestTokenCommands(t *testing.T) {
	d := t.TempDir()
	out, errs, code := aml(t, "token", "create", "--role", "agent", "--name", "bot-1", "--lines", "L1,L2", "--data", d, "--json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errs)
	}
	var c struct {
		ID    string   `json:"id"`
		Token string   `json:"token"`
		Role  string   `json:"role"`
		Lines []string `json:"lines"`
	}
	mustJSON(t, out, &c)
	if !strings.HasPrefix(c.Token, "aml_") || c.Role != "agent" || len(c.Lines) != 2 {
		t.Fatalf("create: %+v", c)
	}
	out, _, code = aml(t, "token", "list", "--data", d)
	if code != 0 || !strings.Contains(out, c.ID) || !strings.Contains(out, "L1,L2") || strings.Contains(out, c.Token) {
		t.Fatalf("list: %d %s", code, out)
	}
	if _, errs, code = aml(t, "token", "revoke", c.ID, "--as", "root", "--data", d); code != 0 {
		t.Fatalf("revoke: %d %s", code, errs)
	}
	out, _, _ = aml(t, "token", "list", "--data", d)
	if !strings.Contains(out, "revoked") || !strings.Contains(out, "by root") {
		t.Fatalf("list after revoke: %s", out)
	}
	if _, errs, code = aml(t, "token", "revoke", c.ID, "--data", d); code != 1 || !strings.Contains(errs, "AML_CONFLICT") {
		t.Fatalf("second revoke: %d %s", code, errs)
	}
	for _, args := range [][]string{
		{"token", "create", "--role", "root", "--name", "x"},
		{"token", "create", "--role", "viewer"},
	} {
		if _, _, code := aml(t, append(args, "--data", d)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
