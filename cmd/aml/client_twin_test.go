package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

// bothReport runs args both ways, asserts both exit 1 with the same error
// code and print the same --json report (the answer beside the failure).
func (p *parity) bothReport(name, role string, args func(ids map[string]string) []string) {
	p.t.Helper()
	lo, le, lc := aml(p.t, append(args(p.ids[false]), "--data", p.local, "--json")...)
	ro, re, rc := p.srv.as(p.t, role, append(args(p.ids[true]), "--json")...)
	if lc != 1 || rc != 1 || errCode(le) == "" || errCode(le) != errCode(re) {
		p.t.Fatalf("%s: local exit %d %q, remote exit %d %q; want both exit 1 with the same code", name, lc, le, rc, re)
	}
	// The ids learnt so far (quoted in messages) by name.
	for k := range p.ids[false] {
		lo, ro = strings.ReplaceAll(lo, p.ids[false][k], k), strings.ReplaceAll(ro, p.ids[true][k], k)
	}
	l, r := blankKeys(normalize(p.t, lo), authoredHashes), blankKeys(normalize(p.t, ro), authoredHashes)
	if !reflect.DeepEqual(l, r) {
		p.t.Fatalf("%s: local and --server reports differ at %v:\n%s", name, diffPaths(l, r, ""), firstDiff(lo, ro))
	}
}

// TestRemoteTwinParity runs the twin commands that need no trained twin
// (scenes, objectives, snapshots, shadow evidence, recalibration, and the
// refusals of trial, optimise and gate for a model that is not a twin)
// locally and over --server on two copies of one data dir, comparing the
// --json documents. The trained twin's trial, optimise and gate:
// TestClientMoreTwin.
func TestRemoteTwinParity(t *testing.T) {
	t.Setenv("AML_TEST_TRAINERS", "1")
	// The local actor is the same person as the remote token's owner, so
	// that documents authored by them (a scene and its hash) are equal.
	t.Setenv("USER", "erin")
	base := simDir(t)
	out, errs, code := aml(t, "dataset", "build", "--spec", filepath.Join(base, "spec.json"), "--data", base, "--json")
	var ds struct{ Dataset struct{ ID string } }
	if mustJSON(t, out, &ds); code != 0 {
		t.Fatal(errs)
	}
	out, errs, code = aml(t, "job", "submit", "--dataset", ds.Dataset.ID, "--trainer", "test_mean@1", "--params", `{"steps":3,"stepMs":1}`, "--wait", "--data", base, "--json")
	var job struct{ ModelID string }
	if mustJSON(t, out, &job); code != 0 || job.ModelID == "" {
		t.Fatalf("job: %d %s %s", code, errs, out)
	}
	out, _, _ = aml(t, "runs", "list", "--data", base, "--json")
	var runs []core.Run
	mustJSON(t, out, &runs)
	last := runs[0]
	for _, r := range runs {
		if r.EndedMs != nil && *r.EndedMs > *last.EndedMs {
			last = r
		}
	}
	at := time.UnixMilli(*last.EndedMs + 5000).UTC().Format(time.RFC3339)

	local, remote := copyDataDir(t, base), copyDataDir(t, base)
	srv := startServer(t, remote, api.Options{})
	p := newParity(t, local, srv)
	m, fixed := job.ModelID, fixedArgs
	sceneFile := filepath.Join(t.TempDir(), "scene.json")
	sc := contract.DefaultInjectionScene()
	sc.SceneVersion = "1.1.0"
	b, _ := json.Marshal(sc)
	if err := os.WriteFile(sceneFile, b, 0o644); err != nil {
		t.Fatal(err)
	}

	lo, ro := p.both("twin scene put", "engineer", fixed("twin", "scene", "put", "--default-injection"))
	if lo != ro {
		t.Fatalf("scene put by the same author: local and --server differ:\n%s", firstDiff(lo, ro))
	}
	var put struct{ SceneID, Hash string }
	mustJSON(t, ro, &put)
	p.both("twin scene put FILE", "engineer", fixed("twin", "scene", "put", sceneFile))
	p.both("twin scene check FILE --bind", "viewer", fixed("twin", "scene", "check", sceneFile, "--bind", "weight=part_weight"))
	p.bothFail("twin scene check FILE", "viewer", 1, contract.CodeContractInvalid, fixed("twin", "scene", "check", sceneFile))
	p.bothFail("twin scene init of a model the twin does not run", "viewer", 1, "AML_TWIN_MODEL_UNSUPPORTED", fixed("twin", "scene", "init", "--model", m))
	p.both("twin scene list", "viewer", fixed("twin", "scene", "list"))
	p.both("twin scene show", "viewer", fixed("twin", "scene", "show", put.SceneID))
	p.both("twin scene show --version", "viewer", fixed("twin", "scene", "show", put.SceneID, "--version", "1.0.0"))
	p.both("twin scene freeze", "approver", fixed("twin", "scene", "freeze", put.SceneID, "--version", "1.0.0", "--expect-hash", put.Hash, "--by", "ada"))
	p.both("twin scene list --line", "viewer", fixed("twin", "scene", "list", "--line", sc.LineID))
	p.both("twin objective put", "engineer", fixed("twin", "objective", "put", "--default-injection"))
	p.both("twin objective show", "viewer", fixed("twin", "objective", "show", "weight-quality"))

	lo, ro = p.both("twin snapshot take", "engineer", fixed("twin", "snapshot", "take", "--scene", put.SceneID+"@1.0.0", "--at", at,
		"--bind", "weight=part_weight", "--max-age", "2m", "--phase", "holding", "--by", "erin"))
	p.learn("snap", lo, ro, func(t *testing.T, s string) string {
		var v struct{ Snapshot struct{ SnapshotID string } }
		mustJSON(t, s, &v)
		return v.Snapshot.SnapshotID
	})
	p.both("twin snapshot show", "viewer", func(ids map[string]string) []string { return []string{"twin", "snapshot", "show", ids["snap"]} })
	p.both("twin snapshot list", "viewer", fixed("twin", "snapshot", "list"))
	p.both("twin steptest plan", "viewer", func(ids map[string]string) []string {
		return []string{"twin", "steptest", "plan", "--scene", put.SceneID + "@1.0.0", "--snapshot", ids["snap"]}
	})
	lo, _ = p.both("twin steptest plan --signal prbs", "viewer", fixed("twin", "steptest", "plan", "--scene", put.SceneID+"@1.0.0", "--signal", "prbs",
		"--var", "hold_pressure", "--var", "hold_time", "--one-at-a-time", "--switches", "4", "--base", "hold_pressure=64", "--base", "hold_time=8", "--seed", "9"))
	var plan struct {
		BaseFrom string
		Actions  int
		Problems []string
	}
	if mustJSON(t, lo, &plan); plan.BaseFrom != "request" || plan.Actions != 10 || len(plan.Problems) != 1 {
		t.Fatalf("step test plan: %s", lo)
	}
	p.bothFail("steptest plan over the policy", "viewer", 1, "AML_INVALID_ARGUMENT", fixed("twin", "steptest", "plan", "--scene", put.SceneID+"@1.0.0",
		"--var", "hold_time", "--base", "hold_time=8", "--amplitude", "hold_time=0.6"))
	p.bothFail("steptest plan, bad --base", "viewer", 2, "AML_USAGE", fixed("twin", "steptest", "plan", "--scene", "s", "--base", "hold_time=high"))
	// A plan over maxActionsPerRun is never issued; an unknown step test
	// is neither shown, approved nor executed.
	p.bothFail("steptest issue over the policy", "engineer", 1, "AML_INVALID_ARGUMENT", fixed("twin", "steptest", "issue", "--scene", put.SceneID+"@1.0.0",
		"--var", "hold_time", "--base", "hold_time=8", "--as", "erin"))
	p.bothFail("steptest show unknown", "viewer", 1, "AML_NOT_FOUND", fixed("twin", "steptest", "show", "st-none"))
	p.bothFail("steptest approve unknown", "approver", 1, "AML_NOT_FOUND", fixed("twin", "steptest", "approve", "st-none", "--as", "ada"))
	p.bothFail("steptest execute unknown", "approver", 1, "AML_NOT_FOUND", fixed("twin", "steptest", "execute", "st-none", "--as", "ada"))
	p.bothFail("steptest revoke unknown", "approver", 1, "AML_NOT_FOUND", fixed("twin", "steptest", "revoke", "st-none", "--as", "ada", "--reason", "r"))
	p.bothFail("steptest revoke without a reason", "approver", 2, "AML_USAGE: --reason", fixed("twin", "steptest", "revoke", "st-none", "--as", "ada"))
	p.both("twin steptest list", "viewer", fixed("twin", "steptest", "list", "--line", sc.LineID))
	// Benefit studies: none kept yet; a run over the cap and an unknown
	// study are refused the same way both sides, before any work (the
	// request is validated before it is sent: a usage error).
	p.both("benefit list", "viewer", fixed("benefit", "list"))
	p.bothFail("benefit run over the cap", "engineer", 2, "AML_USAGE", fixed("benefit", "run", "--line", "line-injection-01", "--runs", "201"))
	p.bothFail("benefit run without a line", "engineer", 2, "AML_USAGE", fixed("benefit", "run", "--runs", "2"))
	p.bothFail("benefit run of an unknown line", "engineer", 1, "AML_NOT_FOUND", fixed("benefit", "run", "--line", "no-such-line", "--runs", "2"))
	p.bothFail("benefit show unknown", "viewer", 1, "AML_NOT_FOUND", fixed("benefit", "show", "bs-20261205T122256.000-abcd1234"))
	p.both("twin snapshot list --line --limit", "viewer", fixed("twin", "snapshot", "list", "--line", sc.LineID, "--limit", "1"))
	p.both("twin shadow --dry-run", "engineer", fixed("twin", "shadow", "--model", m, "--dry-run"))
	p.both("twin shadow", "engineer", fixed("twin", "shadow", "--model", m, "--max-runs", "2"))
	p.both("twin shadow --scene", "engineer", fixed("twin", "shadow", "--model", m, "--scene", put.SceneID, "--dry-run"))
	p.both("twin calibrate", "engineer", fixed("twin", "calibrate", "--model", m, "--scene", "inj"))
	p.both("twin calibrate list", "viewer", fixed("twin", "calibrate", "list"))

	// Usage errors are found before any request, as locally; the ops'
	// own refusals are the same error both ways.
	p.bothFail("snapshot take without a scene", "engineer", 2, "AML_USAGE", fixed("twin", "snapshot", "take"))
	p.bothFail("snapshot take, bad --bind", "engineer", 2, "AML_USAGE", fixed("twin", "snapshot", "take", "--scene", "s", "--bind", "oops"))
	p.bothFail("snapshot take, bad --max-age", "engineer", 2, "AML_USAGE", fixed("twin", "snapshot", "take", "--scene", "s", "--max-age", "soon"))
	p.bothFail("scene freeze without a hash", "approver", 2, "AML_USAGE", fixed("twin", "scene", "freeze", put.SceneID, "--version", "1.0.0"))
	p.bothFail("scene put FILE and preset", "engineer", 2, "AML_USAGE", fixed("twin", "scene", "put", sceneFile, "--default-injection"))
	p.bothFail("gate without a scene", "engineer", 2, "AML_USAGE", fixed("twin", "gate", "--model", m))
	p.bothFail("trial with a bad --set", "engineer", 2, "AML_USAGE", fixed("twin", "trial", "--model", m, "--snapshot", "x", "--set", "hold_pressure"))
	p.bothFail("scene freeze of a frozen scene", "approver", 1, contract.CodeSceneFrozen, fixed("twin", "scene", "freeze", put.SceneID, "--version", "1.0.0", "--expect-hash", put.Hash))
	p.bothFail("scene show unknown", "viewer", 1, "AML_NOT_FOUND", fixed("twin", "scene", "show", "no-such-scene"))
	p.bothFail("shadow of an unknown model", "engineer", 1, "AML_NOT_FOUND", fixed("twin", "shadow", "--model", "no-such-model"))
	p.bothFail("shadow with an unknown scene", "engineer", 1, "AML_NOT_FOUND", fixed("twin", "shadow", "--model", m, "--scene", "no-such-scene"))
	for name, args := range map[string]func(map[string]string) []string{
		"trial of a model that is not a twin": func(ids map[string]string) []string {
			return []string{"twin", "trial", "--model", m, "--snapshot", ids["snap"], "--set", "hold_pressure=70"}
		},
		"trial of an unknown control": func(ids map[string]string) []string {
			return []string{"twin", "trial", "--model", m, "--snapshot", ids["snap"], "--set", "no_such=1"}
		},
		"optimize a model that is not a twin": func(ids map[string]string) []string {
			return []string{"twin", "optimize", "--model", m, "--snapshot", ids["snap"]}
		},
		"gate of a model that is not a twin": fixed("twin", "gate", "--model", m, "--scene", put.SceneID),
	} {
		p.sameError(name, "engineer", args)
	}
	// Over --server the actor is the token's owner.
	if _, errs, code := srv.as(t, "engineer", "twin", "calibrate", "--model", m, "--by", "mallory"); code != 2 || !strings.Contains(errs, `the actor is the token's owner "erin"`) {
		t.Fatalf("someone else's name: %d %s", code, errs)
	}
}

// TestRemoteCertParity runs the certificate and channel commands locally
// and over --server on two copies of one seeded data dir (the same signing
// key): the whole lifecycle, the governed write with the recording writer,
// verification, and the refusals.
func TestRemoteCertParity(t *testing.T) {
	base := t.TempDir()
	seedTwinAt(t, base, 2, time.Now().UTC())
	if _, err := cert.LoadOrCreateKey(base); err != nil {
		t.Fatal(err)
	}
	local, remote := copyDataDir(t, base), copyDataDir(t, base)
	srv := startServer(t, remote, api.Options{})
	p := newParity(t, local, srv)
	fixed := fixedArgs
	withID := func(key string, args ...string) func(map[string]string) []string {
		return func(ids map[string]string) []string {
			out := append([]string(nil), args...)
			for i, a := range out {
				if a == "ID" {
					out[i] = ids[key]
				}
			}
			return out
		}
	}
	learnCert := func(key, lo, ro string) {
		p.learn(key, lo, ro, func(t *testing.T, s string) string {
			var c struct {
				Cert struct {
					ID string `json:"recommendationId"`
				} `json:"certificate"`
			}
			mustJSON(t, s, &c)
			return c.Cert.ID
		})
	}

	p.bothFail("channel show (none yet)", "viewer", 1, "AML_NOT_FOUND", fixed("channel", "show", "--line", certLine))
	p.both("channel set", "admin", fixed("channel", "set", "--line", certLine, "--profile", "hybrid_twin", "--policy", "hitl_governed",
		"--scene", "injection-hold-control@1.0.0", "--as", "root"))
	p.both("channel show", "viewer", fixed("channel", "show", "--line", certLine))
	lo, _, lc := aml(t, "cert", "key", "--data", local, "--json")
	ro, re, rc := srv.as(t, "viewer", "cert", "key", "--json")
	if lc != 0 || rc != 0 || lo != ro {
		t.Fatalf("cert key: local %d, remote %d %s:\n%s", lc, rc, re, firstDiff(lo, ro))
	}

	lo, ro = p.both("cert issue", "engineer", fixed("cert", "issue", "--trial", "trial-1", "--ttl", "10m", "--as", "erin"))
	learnCert("c1", lo, ro)
	p.both("cert list", "viewer", fixed("cert", "list"))
	p.both("cert list --status", "viewer", fixed("cert", "list", "--status", "issued", "--line", certLine, "--limit", "5"))
	p.both("cert show", "viewer", withID("c1", "cert", "show", "ID"))
	p.bothReport("cert execute (not approved)", "approver", withID("c1", "cert", "execute", "ID", "--as", "ada"))
	p.sameError("cert approve by its requester", "engineer", withID("c1", "cert", "approve", "ID", "--as", "erin"))
	p.both("cert approve", "approver", withID("c1", "cert", "approve", "ID", "--as", "ada"))
	// The checks' details quote hashes and audit positions.
	verify := func(name string) {
		p.idLists = map[string]bool{"detail": true}
		defer func() { p.idLists = nil }()
		p.both(name, "viewer", withID("c1", "cert", "verify", "ID"))
	}
	verify("cert verify")
	p.both("cert execute", "approver", withID("c1", "cert", "execute", "ID", "--as", "ada"))
	verify("cert verify (executed)")
	p.bothReport("cert execute (again)", "approver", withID("c1", "cert", "execute", "ID", "--as", "ada"))

	lo, ro = p.both("cert issue (second)", "engineer", fixed("cert", "issue", "--trial", "trial-2", "--as", "erin"))
	learnCert("c2", lo, ro)
	p.bothFail("cert revoke without a reason", "approver", 2, "--reason is required", withID("c2", "cert", "revoke", "ID", "--as", "ada"))
	p.both("cert revoke", "approver", withID("c2", "cert", "revoke", "ID", "--reason", "superseded", "--as", "ada"))
	p.bothReport("cert execute (revoked)", "approver", withID("c2", "cert", "execute", "ID", "--as", "ada"))
	p.both("cert list (all)", "viewer", fixed("cert", "list"))

	p.bothFail("cert list, bad status", "viewer", 2, "AML_USAGE", fixed("cert", "list", "--status", "bogus"))
	p.bothFail("cert issue without a trial", "engineer", 2, "AML_USAGE", fixed("cert", "issue"))
	p.bothFail("cert issue, bad ttl", "engineer", 2, "AML_USAGE", fixed("cert", "issue", "--trial", "trial-1", "--ttl", "ever"))
	p.bothFail("channel set without a policy", "admin", 2, "AML_USAGE", fixed("channel", "set", "--line", certLine, "--profile", "legacy"))
	p.bothFail("channel set, bad bound", "admin", 2, "AML_USAGE", fixed("channel", "set", "--line", certLine, "--profile", "hybrid_twin", "--policy", "bounded_auto", "--bound", "x=1"))
	p.bothFail("cert show unknown", "viewer", 1, "AML_NOT_FOUND", fixed("cert", "show", "no-such-cert"))
	p.bothFail("cert issue, ttl over 24h", "engineer", 2, "AML_USAGE", fixed("cert", "issue", "--trial", "trial-1", "--ttl", "25h", "--as", "erin"))
	// Locally the person acting is named; over --server the token names them.
	if _, errs, code := aml(t, "cert", "approve", "x", "--data", local); code != 2 || !strings.Contains(errs, "--as PERSON is required") {
		t.Fatalf("local approve without --as: %d %s", code, errs)
	}
}
