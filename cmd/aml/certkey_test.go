package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
)

// TestCertRotateKeyCLI: aml cert rotate-key --as ADMIN replaces
// cert-key.json and keeps the old key in keys/; a certificate approved
// under the old key still verifies and executes, a new one is signed with
// the new key and verifies, the audit log verifies across the rotation,
// and a data directory still holding the old key is refused
// (AML_CERT_KEY_RETIRED naming the new key) before it issues.
func TestCertRotateKeyCLI(t *testing.T) {
	d := t.TempDir()
	seedTwin(t, d, 2)
	if _, _, err := subCLI(t, d, newChannelCmd, "set", "--line", certLine, "--profile", "hybrid_twin", "--policy", "hitl_governed",
		"--scene", "injection-hold-control@1.0.0", "--as", "ops"); err != nil {
		t.Fatal(err)
	}
	id1 := issueCLI(t, d, "trial-1")
	if _, err := certCLI(t, d, "approve", id1, "--as", "bob"); err != nil {
		t.Fatal(err)
	}
	old, err := cert.LoadKey(d)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := certCLI(t, d, "rotate-key"); err == nil {
		t.Fatal("rotate-key without --as")
	}
	out, err := certCLI(t, d, "--json", "rotate-key", "--as", "admin")
	if err != nil {
		t.Fatalf("rotate-key: %v\n%s", err, out)
	}
	var rot amlapp.CertRotateKeyResponse
	mustJSON(t, out, &rot)
	cur, err := cert.LoadKey(d)
	if err != nil {
		t.Fatal(err)
	}
	if rot.OldKeyID != old.ID || rot.KeyID != cur.ID || cur.ID == old.ID {
		t.Fatalf("rotation %+v, old %s, data dir %s", rot, old.ID, cur.ID)
	}
	st, err := os.Stat(cert.ArchivedKeyPath(d, old.ID))
	if err != nil || st.Mode().Perm() != 0o600 || rot.RetiredKeyFile != cert.ArchivedKeyPath(d, old.ID) {
		t.Fatalf("retired key file: %v %v", st, err)
	}
	if k, err := cert.LoadKey(filepath.Dir(cert.ArchivedKeyPath(d, old.ID))); err == nil {
		t.Fatalf("keys/ holds a cert-key.json %s", k.ID)
	}

	// The certificate approved under the old key verifies and executes.
	out, err = certCLI(t, d, "verify", id1)
	if err != nil {
		t.Fatalf("verify old certificate: %v\n%s", err, out)
	}
	out, err = certCLI(t, d, "execute", id1, "--as", "carol")
	if err != nil || !strings.Contains(out, "certificate EXECUTED") {
		t.Fatalf("execute old certificate: %v\n%s", err, out)
	}
	out, err = certCLI(t, d, "--json", "verify", id1)
	var rep govern.VerifyReport
	mustJSON(t, out, &rep)
	if err != nil || !rep.OK || rep.KeyID != old.ID || rep.Status != string(contract.CertExecuted) {
		t.Fatalf("verify executed old certificate: %v\n%s", err, out)
	}
	// A new certificate is signed with the new key.
	id2 := issueCLI(t, d, "trial-2")
	out, err = certCLI(t, d, "--json", "verify", id2)
	rep = govern.VerifyReport{}
	mustJSON(t, out, &rep)
	if err != nil || !rep.OK || rep.KeyID != cur.ID {
		t.Fatalf("verify new certificate: %v\n%s", err, out)
	}
	if out, _, err := subCLI(t, d, newAuditCmd, "verify"); err != nil {
		t.Fatalf("audit verify across the rotation: %v\n%s", err, out)
	}

	// A data directory still holding the old key refuses to issue.
	b, err := os.ReadFile(cert.ArchivedKeyPath(d, old.ID))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, cert.KeyFileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = certCLI(t, d, "issue", "--trial", "trial-2", "--as", "alice")
	if core.CodeOf(err) != core.CodeCertKeyRetired || !strings.Contains(err.Error(), cur.ID) {
		t.Fatalf("issue with the retired key: %v", err)
	}
	if _, err := certCLI(t, d, "rotate-key", "--as", "admin"); core.CodeOf(err) != core.CodeCertKeyRetired {
		t.Fatalf("rotate with the retired key: %v", err)
	}
}
