package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// auditCLI runs `aml audit ARGS` on data dir d.
func auditCLI(t *testing.T, d string, args ...string) (string, string, error) {
	t.Helper()
	return subCLI(t, d, newAuditCmd, args...)
}

// seedAudit appends n entries to the audit log of data dir d.
func seedAudit(t *testing.T, d string, n int) []audit.Entry {
	t.Helper()
	s, err := sqlite.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	l := audit.New(s.SQL())
	var es []audit.Entry
	for i := range n {
		subj := "scene-1"
		if i%2 == 1 {
			subj = "cert-1"
		}
		e, err := l.Append(context.Background(), "alice", "certificate.issue", subj, "L1", map[string]any{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

func execSQL(t *testing.T, d string, qs ...string) {
	t.Helper()
	s, err := sqlite.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, q := range qs {
		if _, err := s.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestAuditCLI(t *testing.T) {
	d := t.TempDir()

	out, _, err := auditCLI(t, d, "verify")
	if err != nil || !strings.Contains(out, "audit log verified: 0 entries checked") || !strings.Contains(out, "head 0:"+audit.GenesisHash) {
		t.Fatalf("empty verify: %v\n%s", err, out)
	}

	es := seedAudit(t, d, 5)
	out, _, err = auditCLI(t, d, "verify")
	if err != nil || !strings.Contains(out, "audit log verified: 5 entries checked") || !strings.Contains(out, fmt.Sprintf("head 5:%s", es[4].Hash)) {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	out, _, err = auditCLI(t, d, "verify", "--json")
	var res audit.VerifyResult
	mustJSON(t, out, &res)
	if err != nil || !res.OK || res.Entries != 5 || res.HeadSeq != 5 || res.Head != es[4].Hash {
		t.Fatalf("verify --json: %v %+v", err, res)
	}
	head := fmt.Sprintf("5:%s", es[4].Hash)
	if out, _, err = auditCLI(t, d, "verify", "--expect-head", head); err != nil || !strings.Contains(out, "recorded head 5 present") {
		t.Fatalf("verify --expect-head: %v\n%s", err, out)
	}

	// list: human, JSON, subject filter, paging.
	out, _, err = auditCLI(t, d, "list")
	if err != nil || !strings.Contains(out, "SEQ  AT") || !strings.Contains(out, "certificate.issue") || !strings.Contains(out, es[2].Hash[:12]+"…") ||
		!strings.Contains(out, `{"i":2}`) || !strings.HasSuffix(out, "5 entries\n") {
		t.Fatalf("list:\n%s", out)
	}
	var got []audit.Entry
	out, _, err = auditCLI(t, d, "list", "--json", "--subject", "cert-1")
	mustJSON(t, out, &got)
	if err != nil || len(got) != 2 || got[0].Seq != 2 || got[1].Seq != 4 || got[1].Hash != es[3].Hash {
		t.Fatalf("list --subject: %v %+v", err, got)
	}
	// --json indents the payload; its canonical form (what is hashed) is unchanged.
	if h, err := audit.ComputeHash(got[1]); err != nil || h != es[3].Hash {
		t.Fatalf("list --subject: %v %+v", err, got)
	}
	out, _, err = auditCLI(t, d, "list", "--after", "1", "--limit", "2")
	if err != nil || !strings.Contains(out, "continue with --after 3") || strings.Contains(out, es[0].Hash[:12]) || strings.Contains(out, es[3].Hash[:12]) {
		t.Fatalf("list page:\n%s", out)
	}
	out, _, _ = auditCLI(t, d, "list", "--json", "--after", "5")
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("empty page: %q", out)
	}

	// Usage errors.
	for _, args := range [][]string{
		{"list", "--limit", "0"},
		{"list", "--after", "-1"},
		{"list", "--limit", "x"},
		{"verify", "--expect-head", "5"},
		{"verify", "--expect-head", "x:" + es[4].Hash},
		{"verify", "--expect-head", "5:abc"},
		{"verify", "extra"},
	} {
		var ue *usageError
		if _, _, err := auditCLI(t, d, args...); err == nil || !errors.As(err, &ue) {
			t.Errorf("%v: want usage error, got %v", args, err)
		}
	}

	// Tampering: an edited entry fails with the stable code naming its seq,
	// and nothing on stdout.
	execSQL(t, d, `DROP TRIGGER audit_log_no_update`, `DROP TRIGGER audit_log_no_delete`, `UPDATE audit_log SET actor = 'mallory' WHERE seq = 3`)
	out, _, err = auditCLI(t, d, "verify", "--json")
	if core.CodeOf(err) != audit.CodeAuditTampered || !strings.Contains(err.Error(), "seq 3") || out != "" {
		t.Fatalf("tampered verify: %v; stdout %q", err, out)
	}
}

func TestAuditCLITruncation(t *testing.T) {
	d := t.TempDir()
	es := seedAudit(t, d, 4)
	execSQL(t, d, `DROP TRIGGER audit_log_no_delete`, `DELETE FROM audit_log WHERE seq = 4`)
	if _, _, err := auditCLI(t, d, "verify"); err != nil {
		t.Fatalf("truncation alone is a valid chain: %v", err)
	}
	_, _, err := auditCLI(t, d, "verify", "--expect-head", fmt.Sprintf("4:%s", es[3].Hash))
	if core.CodeOf(err) != audit.CodeAuditTampered || !strings.Contains(err.Error(), "seq 4") || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("verify --expect-head after truncation: %v", err)
	}
}

// The full CLI exits 1 with one "error: AML_AUDIT_TAMPERED: …" line.
func TestAuditCLIExitStatus(t *testing.T) {
	d := t.TempDir()
	seedAudit(t, d, 3)
	if out, errs, code := aml(t, "audit", "verify", "--data", d); code != 0 || !strings.Contains(out, "3 entries checked") {
		t.Fatalf("verify: %d %s %s", code, out, errs)
	}
	execSQL(t, d, `DROP TRIGGER audit_log_no_update`, `UPDATE audit_log SET payload = '{"i":9}' WHERE seq = 2`)
	out, errs, code := aml(t, "audit", "verify", "--data", d)
	if code != 1 || out != "" || !strings.HasPrefix(errs, "error: AML_AUDIT_TAMPERED: audit log tampered at seq 2: ") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("tampered: %d %q %q", code, out, errs)
	}
	if _, errs, code := aml(t, "audit", "list", "--limit", "0", "--data", d); code != 2 || !strings.HasPrefix(errs, "error: AML_USAGE: ") {
		t.Fatalf("usage: %d %q", code, errs)
	}
}
