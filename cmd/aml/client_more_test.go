package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/api"
)

// copyDataDir copies a closed data dir file by file (keeping modes: the
// signing key must stay owner-only), so a local CLI and a
// server can start from the same history.
func copyDataDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		info, err := d.Info()
		if err != nil {
			return err
		}
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// parity runs one history locally on local and over --server against
// srv (whose data dir started identical), comparing --json documents.
type parity struct {
	t     *testing.T
	local string
	srv   *testServer
	ids   map[bool]map[string]string // remote? → name → id learnt from that mode's answers
	// idLists are keys holding lists of ids the next comparisons blank
	// (the caller checks them against ids itself).
	idLists map[string]bool
}

func newParity(t *testing.T, local string, srv *testServer) *parity {
	return &parity{t: t, local: local, srv: srv, ids: map[bool]map[string]string{false: {}, true: {}}}
}

// both runs args (built per mode from that mode's ids) both ways, asserts
// both succeed with the same normalized JSON and returns both documents.
func (p *parity) both(name, role string, args func(ids map[string]string) []string) (local, remote string) {
	p.t.Helper()
	lo, le, lc := aml(p.t, append(args(p.ids[false]), "--data", p.local, "--json")...)
	ro, re, rc := p.srv.as(p.t, role, append(args(p.ids[true]), "--json")...)
	if lc != 0 || rc != 0 {
		p.t.Fatalf("%s: local exit %d (%s), remote exit %d (%s)", name, lc, le, rc, re)
	}
	l, r := blankKeys(normalize(p.t, lo), authoredHashes), blankKeys(normalize(p.t, ro), authoredHashes)
	l, r = blankKeys(l, p.idLists), blankKeys(r, p.idLists)
	if !reflect.DeepEqual(l, r) {
		lb, _ := json.MarshalIndent(l, "", " ")
		rb, _ := json.MarshalIndent(r, "", " ")
		p.t.Fatalf("%s: local and --server JSON differ at %v:\n%s", name, diffPaths(l, r, ""), firstDiff(string(lb), string(rb)))
	}
	return lo, ro
}

// diffPaths lists where two decoded documents differ.
func diffPaths(a, b any, at string) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for k := range am {
			out = append(out, diffPaths(am[k], bm[k], at+"."+k)...)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				out = append(out, at+"."+k)
			}
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, diffPaths(al[i], bl[i], at+"["+strconv.Itoa(i)+"]")...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{at}
	}
	return nil
}

// authoredHashes are the hashes and signatures of documents whose content
// includes their author and creation time (normalize already blanks
// "hash"), an id answered as "deleted", the actor and time of a stage change ("by", "at"), and the
// audit position (the server's data dir also holds the
// test tokens' audit entries).
var authoredHashes = map[string]bool{"snapshotHash": true, "trialHash": true, "objectiveHash": true, "certificateHash": true, "signature": true,
	"auditSeq": true, "auditHash": true, "by": true, "at": true, "deleted": true}

// blankKeys blanks the keys in keys at any depth of a normalized document.
func blankKeys(v any, keys map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if keys[k] {
				x[k] = "*"
			} else {
				x[k] = blankKeys(e, keys)
			}
		}
	case []any:
		for i := range x {
			x[i] = blankKeys(x[i], keys)
		}
	}
	return v
}

// learn stores under key the value pick extracts from each mode's answer.
func (p *parity) learn(key, local, remote string, pick func(t *testing.T, out string) string) {
	p.t.Helper()
	for r, out := range map[bool]string{false: local, true: remote} {
		v := pick(p.t, out)
		if v == "" {
			p.t.Fatalf("%s: nothing learnt from (remote %v) %s", key, r, out)
		}
		p.ids[r][key] = v
	}
}

// bothFail runs args both ways and asserts both fail with exit code and
// the same error code on stderr.
func (p *parity) bothFail(name, role string, code int, want string, args func(ids map[string]string) []string) {
	p.t.Helper()
	_, le, lc := aml(p.t, append(args(p.ids[false]), "--data", p.local)...)
	_, re, rc := p.srv.as(p.t, role, args(p.ids[true])...)
	if lc != code || rc != code || !strings.Contains(le, want) || !strings.Contains(re, want) {
		p.t.Fatalf("%s: local exit %d %q, remote exit %d %q; want exit %d with %q", name, lc, le, rc, re, code, want)
	}
}

func fixedArgs(a ...string) func(map[string]string) []string {
	return func(map[string]string) []string { return a }
}

// TestClientMoreTwin runs the twin and certificate commands not covered
// by TestRemoteParity over --server on a copy of one demo data dir, and
// the same history locally on another copy, comparing --json documents.
func TestClientMoreTwin(t *testing.T) {
	demoDir, out := sharedDemo(t)
	var demo struct {
		ModelID    string    `json:"modelId"`
		SnapshotID string    `json:"snapshotId"`
		DemoClock  time.Time `json:"demoClock"`
	}
	mustJSON(t, out, &demo)
	local, remoteDir := copyDataDir(t, demoDir), copyDataDir(t, demoDir)
	// The server's clock runs on the demo's line clock (as in
	// TestRemoteCertificateFlow) so a certificate can be executed.
	base, start := demo.DemoClock.Add(70*time.Second), time.Now()
	srv := startServer(t, remoteDir, api.Options{Now: func() time.Time { return base.Add(time.Since(start)) }})
	p := newParity(t, local, srv)
	// A snapshot on the demo's last run just before the server's clock,
	// after the demo's own write (an optimum then passes, as in
	// TestRemoteCertificateFlow).
	m, at := demo.ModelID, base.Add(-5*time.Second).Format(time.RFC3339)
	var prev struct {
		Snapshot struct {
			Window struct {
				RunID string `json:"runId"`
				EndMs int64  `json:"endMs"`
			} `json:"window"`
		} `json:"snapshot"`
	}
	out, errs, code := srv.as(t, "viewer", "twin", "snapshot", "show", demo.SnapshotID, "--json")
	if mustJSON(t, out, &prev); code != 0 || prev.Snapshot.Window.RunID == "" {
		t.Fatalf("demo snapshot: %d %s %s", code, errs, out)
	}
	run, from := prev.Snapshot.Window.RunID, strconv.FormatInt(prev.Snapshot.Window.EndMs-300_000, 10)

	// The local commands name their actor; over --server the token's
	// owner is the actor and naming the same person is accepted.
	p.both("twin objective put", "engineer", fixedArgs("twin", "objective", "put", "--default-injection"))
	// The server records the token's owner as the author (locally the
	// preset keeps its own): equal modulo the author and the hash.
	p.both("twin objective show", "viewer", fixedArgs("twin", "objective", "show", "weight-quality"))
	p.both("twin snapshot show", "viewer", fixedArgs("twin", "snapshot", "show", demo.SnapshotID))
	p.both("twin snapshot list", "viewer", fixedArgs("twin", "snapshot", "list"))
	p.both("twin snapshot list --limit", "viewer", fixedArgs("twin", "snapshot", "list", "--limit", "1", "--line", "line-injection-01"))

	lo, ro := p.both("twin snapshot take", "engineer", fixedArgs("twin", "snapshot", "take", "--scene", "injection-hold-control", "--model", m,
		"--at", at, "--max-age", "120s", "--phase", "holding", "--run", run))
	p.learn("snap", lo, ro, func(t *testing.T, s string) string {
		var v struct{ Snapshot struct{ SnapshotID string } }
		mustJSON(t, s, &v)
		return v.Snapshot.SnapshotID
	})
	p.both("twin snapshot show (taken)", "viewer", func(ids map[string]string) []string { return []string{"twin", "snapshot", "show", ids["snap"]} })
	p.both("twin trial --set", "engineer", func(ids map[string]string) []string {
		return []string{"twin", "trial", "--model", m, "--snapshot", ids["snap"], "--set", "hold_pressure=70"}
	})
	cand := filepath.Join(t.TempDir(), "cand.json")
	steps := make([]map[string]float64, 60) // the objective's horizon
	for i := range steps {
		steps[i] = map[string]float64{"hold_pressure": 70, "hold_time": 8, "melt_temperature_setpoint": 249.5}
	}
	cb, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cand, cb, 0o644); err != nil {
		t.Fatal(err)
	}
	p.both("twin trial --candidate", "engineer", func(ids map[string]string) []string {
		return []string{"twin", "trial", "--model", m, "--snapshot", ids["snap"], "--candidate", cand}
	})
	lo, ro = p.both("twin optimize", "engineer", func(ids map[string]string) []string {
		return []string{"twin", "optimize", "--model", m, "--snapshot", ids["snap"], "--max-candidates", "60"}
	})
	p.learn("trial", lo, ro, func(t *testing.T, s string) string {
		var v struct {
			Record *struct {
				Passed bool
				Trial  struct{ TrialID string }
			}
		}
		mustJSON(t, s, &v)
		if v.Record == nil || !v.Record.Passed {
			t.Fatalf("optimize found no passing trial: %s", s)
		}
		return v.Record.Trial.TrialID
	})
	p.both("twin gate", "engineer", fixedArgs("twin", "gate", "--model", m, "--scene", "injection-hold-control@1.0.0", "--snapshots", "3"))
	p.both("twin shadow --dry-run", "engineer", fixedArgs("twin", "shadow", "--model", m, "--max-runs", "2", "--dry-run"))
	p.both("twin shadow", "engineer", fixedArgs("twin", "shadow", "--model", m, "--max-runs", "2"))
	p.both("twin calibrate", "engineer", fixedArgs("twin", "calibrate", "--model", m))
	p.both("twin calibrate list", "viewer", fixedArgs("twin", "calibrate", "list"))
	p.both("model predict", "viewer", fixedArgs("model", "predict", m, "--run", run, "--from", from, "--steps", "3"))

	// Usage errors are found before any request, as locally.
	p.bothFail("twin trial without a move", "engineer", 2, "AML_USAGE", fixedArgs("twin", "trial", "--model", m, "--snapshot", "x"))
	p.bothFail("twin optimize bad mode", "engineer", 2, "AML_USAGE", fixedArgs("twin", "optimize", "--model", m, "--snapshot", demo.SnapshotID, "--mode", "wild"))
	p.bothFail("twin shadow without a model", "engineer", 2, "AML_USAGE", fixedArgs("twin", "shadow"))
	p.bothFail("model predict without steps", "viewer", 2, "AML_USAGE", fixedArgs("model", "predict", m, "--run", "r", "--from", "0", "--steps", "0"))
	p.bothFail("snapshot of an unknown scene", "engineer", 1, "AML_NOT_FOUND", fixedArgs("twin", "snapshot", "take", "--scene", "no-such-scene", "--at", at))
	p.bothFail("objective show unknown", "viewer", 1, "AML_NOT_FOUND", fixedArgs("twin", "objective", "show", "no-such-objective"))

	// The same signing key on both copies: the same document.
	lo, _, lc := aml(t, "cert", "key", "--data", local, "--json")
	ro, re, rc := srv.as(t, "viewer", "cert", "key", "--json")
	if lc != 0 || rc != 0 || lo != ro {
		t.Fatalf("cert key: local %d, remote %d %s:\n%s", lc, rc, re, firstDiff(lo, ro))
	}

	// Issue and revoke: the same certificate documents (modulo ids/times/actors).
	lo, ro = p.both("cert issue", "engineer", func(ids map[string]string) []string {
		return []string{"cert", "issue", "--trial", ids["trial"], "--ttl", "10m", "--as", "erin"}
	})
	type certDoc struct {
		Cert struct {
			ID                    string `json:"recommendationId"`
			Status                string `json:"status"`
			CreatedBy, ApprovedBy string
		} `json:"certificate"`
	}
	p.learn("cert", lo, ro, func(t *testing.T, s string) string {
		var c certDoc
		mustJSON(t, s, &c)
		return c.Cert.ID
	})
	var issued certDoc
	mustJSON(t, ro, &issued)
	if issued.Cert.Status != "ISSUED" || issued.Cert.CreatedBy != "erin" {
		t.Fatalf("issued over --server: %+v", issued.Cert)
	}
	p.bothFail("cert revoke without a reason", "approver", 2, "--reason is required", func(ids map[string]string) []string { return []string{"cert", "revoke", ids["cert"], "--as", "ada"} })
	_, ro = p.both("cert revoke", "approver", func(ids map[string]string) []string {
		return []string{"cert", "revoke", ids["cert"], "--reason", "superseded", "--as", "ada"}
	})
	var revoked certDoc
	mustJSON(t, ro, &revoked)
	if revoked.Cert.Status != "REVOKED" {
		t.Fatalf("revoked over --server: %s", ro)
	}
	// A revoked certificate is refused execution the same way.
	p.sameError("cert execute (revoked)", "approver", func(ids map[string]string) []string { return []string{"cert", "execute", ids["cert"], "--as", "ada"} })

	// The governed write through the CLI client: a second certificate
	// issued by the engineer, approved by the approver, the channel set
	// by the admin, executed by the approver.
	out, errs, code = srv.as(t, "engineer", "cert", "issue", "--trial", p.ids[true]["trial"], "--json")
	var c2 certDoc
	if mustJSON(t, out, &c2); code != 0 || c2.Cert.Status != "ISSUED" {
		t.Fatalf("second issue: %d %s %s", code, errs, out)
	}
	_, errs, code = srv.as(t, "engineer", "cert", "execute", c2.Cert.ID)
	if code != 1 || !strings.Contains(errs, "error: AML_FORBIDDEN:") {
		t.Fatalf("engineer executes: %d %q", code, errs)
	}
	if _, errs, code = srv.as(t, "approver", "cert", "approve", c2.Cert.ID); code != 0 {
		t.Fatalf("approve: %d %s", code, errs)
	}
	if _, errs, code = srv.as(t, "admin", "channel", "set", "--line", "line-injection-01", "--profile", "hybrid_twin", "--policy", "hitl_governed"); code != 0 {
		t.Fatalf("channel set: %d %s", code, errs)
	}
	out, errs, code = srv.as(t, "approver", "cert", "execute", c2.Cert.ID, "--json")
	var x struct {
		Allowed, Executed bool
		Writes            []struct {
			To, Readback      float64
			Written, Verified bool
		}
	}
	if code != 0 {
		t.Fatalf("execute: %d %s %s", code, errs, out)
	}
	mustJSON(t, out, &x)
	if !x.Allowed || !x.Executed || len(x.Writes) == 0 {
		t.Fatalf("execute over --server: %s", out)
	}
	for _, w := range x.Writes {
		if !w.Written || !w.Verified || w.Readback != w.To {
			t.Fatalf("write %+v not read back", w)
		}
	}
	// Executed twice: refused, and the guard's report is still printed.
	out, errs, code = srv.as(t, "approver", "cert", "execute", c2.Cert.ID, "--json")
	if code != 1 || !strings.Contains(errs, "error: AML_") || !strings.Contains(out, c2.Cert.ID) {
		t.Fatalf("second execute: %d %q\n%s", code, errs, out)
	}
	out, errs, code = srv.as(t, "viewer", "cert", "show", c2.Cert.ID, "--json")
	var shown certDoc
	if mustJSON(t, out, &shown); code != 0 || shown.Cert.Status != "EXECUTED" || shown.Cert.ApprovedBy != "ada" {
		t.Fatalf("cert show after execute: %d %s %s", code, errs, out)
	}
}

// sameError runs args both ways and asserts both exit 1 with the same
// error code.
func (p *parity) sameError(name, role string, args func(ids map[string]string) []string) {
	p.t.Helper()
	_, le, lc := aml(p.t, append(args(p.ids[false]), "--data", p.local)...)
	_, re, rc := p.srv.as(p.t, role, args(p.ids[true])...)
	lcode, rcode := errCode(le), errCode(re)
	if lc != 1 || rc != 1 || lcode == "" || lcode != rcode {
		p.t.Fatalf("%s: local exit %d %q, remote exit %d %q; want both exit 1 with the same code", name, lc, le, rc, re)
	}
}

// errCode is the CODE of the "error: CODE: message" line.
func errCode(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(l, "error: "); ok {
			c, _, _ := strings.Cut(rest, ":")
			return c
		}
	}
	return ""
}

// TestClientMoreAdmin runs the data, job, model-stage and administration
// commands not covered by TestRemoteParity over --server, and locally on
// an identical data dir where the answers are comparable.
func TestClientMoreAdmin(t *testing.T) {
	t.Setenv("AML_TEST_TRAINERS", "1")
	local, remoteDir := simDir(t), simDir(t)
	// The server's clock runs an hour ahead, so that what the local
	// retention run below finds older than 1ns the server finds older than
	// the whole second its API takes.
	srv := startServer(t, remoteDir, api.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	p := newParity(t, local, srv)

	// ingest csv --sequential: the second file is placed an hour after the
	// first one's last sample, on both sides alike.
	csvDir := t.TempDir()
	a, b := filepath.Join(csvDir, "seq-a.csv"), filepath.Join(csvDir, "seq-b.csv")
	if err := os.WriteFile(a, []byte("time_ms,aux_a,aux_b\n1000,1,2\n2000,3,4\n3000,5,6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("time_ms,aux_a,aux_b\n1000,7,8\n2000,9,10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ro := p.both("ingest csv --sequential", "engineer", fixedArgs("ingest", "csv", a, b, "--line", "injection-line-1", "--product", "P", "--recipe", "R", "--sequential"))
	var ing struct {
		Files []struct {
			FirstTs, LastTs int64
		}
	}
	if mustJSON(t, ro, &ing); len(ing.Files) != 2 || ing.Files[1].FirstTs != ing.Files[0].LastTs+3_600_000 {
		t.Fatalf("--sequential over --server placed the files at %+v", ing.Files)
	}
	p.both("runs show (sequential)", "viewer", fixedArgs("runs", "show", "seq-b"))

	// A dataset and a model on both sides.
	p.ids[false]["dir"], p.ids[true]["dir"] = local, remoteDir
	lo, ro := p.both("dataset build", "engineer", func(ids map[string]string) []string {
		return []string{"dataset", "build", "--spec", filepath.Join(ids["dir"], "spec.json")}
	})
	p.learn("ds", lo, ro, func(t *testing.T, s string) string {
		var v struct{ Dataset struct{ ID string } }
		mustJSON(t, s, &v)
		return v.Dataset.ID
	})
	lo, ro = p.both("job submit --wait", "engineer", func(ids map[string]string) []string {
		return []string{"job", "submit", "--dataset", ids["ds"], "--trainer", "test_mean@1", "--params", `{"steps":3,"stepMs":10}`, "--wait"}
	})
	p.learn("job", lo, ro, func(t *testing.T, s string) string {
		var j struct{ ID string }
		mustJSON(t, s, &j)
		return j.ID
	})
	p.learn("model", lo, ro, func(t *testing.T, s string) string {
		var j struct{ ModelID string }
		mustJSON(t, s, &j)
		return j.ModelID
	})

	// job logs: the server's log is the one a local reader of its data dir
	// sees, byte for byte (the native test trainer writes none; the route
	// and its offsets are what is exercised).
	lo, le, lc := aml(t, "job", "logs", p.ids[true]["job"], "--data", remoteDir)
	ro, re, rc := srv.as(t, "viewer", "job", "logs", p.ids[true]["job"])
	if lc != 0 || rc != 0 || lo != ro {
		t.Fatalf("job logs: local %d %s, remote %d %s:\n%s", lc, le, rc, re, firstDiff(lo, ro))
	}
	if ro2, re, rc := srv.as(t, "viewer", "job", "logs", p.ids[true]["job"], "--follow"); rc != 0 || ro2 != ro {
		t.Fatalf("job logs -f of an ended job: %d %s\n%s", rc, re, firstDiff(ro, ro2))
	}

	// Model stages: shadow, a stage race, production refused, retire.
	model := func(args ...string) func(map[string]string) []string {
		return func(ids map[string]string) []string {
			return append([]string{"model", args[0], ids["model"]}, args[1:]...)
		}
	}
	p.both("model promote --to shadow", "engineer", model("promote", "--to", "shadow", "--expect", "candidate", "--reason", "try it"))
	p.sameError("model promote with a stale --expect", "approver", model("promote", "--to", "production", "--expect", "candidate"))
	p.bothFail("model promote without --to", "approver", 2, `required flag(s) "to" not set`, model("promote"))
	// The test trainer's mean model fails its gates: refused alike.
	p.bothFail("model promote --to production (gates failed)", "approver", 1, "error: AML_GATE_FAILED:", model("promote", "--to", "production", "--expect", "shadow"))
	p.both("model retire", "approver", model("retire", "--expect", "shadow", "--reason", "replaced"))
	_, ro = p.both("model show (retired)", "viewer", model("show"))
	var hist struct{ History []struct{ By, To string } }
	if mustJSON(t, ro, &hist); len(hist.History) != 2 || hist.History[0].By != "erin" || hist.History[1].By != "ada" || hist.History[1].To != "retired" {
		t.Fatalf("stage history over --server: %s", ro)
	}

	// dataset delete: refused while a model references it, done otherwise.
	p.sameError("dataset delete (referenced)", "engineer", func(ids map[string]string) []string { return []string{"dataset", "delete", ids["ds"]} })
	for _, d := range []string{local, remoteDir} {
		sb, err := os.ReadFile(filepath.Join(d, "spec.json"))
		if err != nil {
			t.Fatal(err)
		}
		var spec map[string]any
		if err := json.Unmarshal(sb, &spec); err != nil {
			t.Fatal(err)
		}
		spec["stride"] = 7
		if sb, err = json.Marshal(spec); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "spec2.json"), sb, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lo, ro = p.both("dataset build (unreferenced)", "engineer", func(ids map[string]string) []string {
		return []string{"dataset", "build", "--spec", filepath.Join(ids["dir"], "spec2.json")}
	})
	p.learn("ds2", lo, ro, func(t *testing.T, s string) string {
		var v struct{ Dataset struct{ ID string } }
		mustJSON(t, s, &v)
		return v.Dataset.ID
	})
	lo, ro = p.both("dataset delete", "engineer", func(ids map[string]string) []string { return []string{"dataset", "delete", ids["ds2"]} })
	for r, out := range map[bool]string{false: lo, true: ro} {
		var del struct{ Deleted string }
		if mustJSON(t, out, &del); del.Deleted != p.ids[r]["ds2"] {
			t.Fatalf("dataset delete (remote %v): %s", r, out)
		}
	}
	p.sameError("dataset show (deleted)", "viewer", func(ids map[string]string) []string { return []string{"dataset", "show", ids["ds2"]} })

	// retention: the dry run and the run agree with the local command
	// (sub-second ages were once truncated to 0, "never", over --server);
	// only an admin may apply it over --server.
	p.idLists = map[string]bool{"skippedInUse": true, "modelArtifacts": true}
	checkRet := func(lo, ro string) {
		t.Helper()
		for r, out := range map[bool]string{false: lo, true: ro} {
			var rep struct{ SkippedInUse, ModelArtifacts []string }
			mustJSON(t, out, &rep)
			if !reflect.DeepEqual(rep.SkippedInUse, []string{p.ids[r]["ds"]}) || !reflect.DeepEqual(rep.ModelArtifacts, []string{p.ids[r]["model"]}) {
				t.Fatalf("retention (remote %v): %s", r, out)
			}
		}
	}
	checkRet(p.both("retention run --dry-run", "admin", fixedArgs("retention", "run", "--dry-run", "--dataset-age", "1ns", "--model-age", "1ns", "--job-age", "1ns")))
	_, errs, code := srv.as(t, "engineer", "retention", "run", "--dry-run")
	if code != 1 || !strings.Contains(errs, "error: AML_FORBIDDEN:") {
		t.Fatalf("engineer retention: %d %q", code, errs)
	}
	checkRet(p.both("retention run", "admin", fixedArgs("retention", "run", "--dataset-age", "1ns", "--model-age", "1ns", "--job-age", "1ns")))
	p.idLists = nil

	// job cancel and retry over --server: a long job is cancelled (queued
	// or running), then retried as a new job (cancelled in turn).
	out, errs, code := srv.as(t, "engineer", "job", "submit", "--dataset", p.ids[true]["ds"], "--trainer", "test_mean@1", "--params", `{"steps":600,"stepMs":50}`, "--json")
	var long struct{ ID string }
	if mustJSON(t, out, &long); code != 0 || long.ID == "" {
		t.Fatalf("submit: %d %s", code, errs)
	}
	out, errs, code = srv.as(t, "engineer", "job", "cancel", long.ID, "--json")
	var cj struct{ ID, Status string }
	if mustJSON(t, out, &cj); code != 0 || cj.ID != long.ID {
		t.Fatalf("cancel: %d %s %s", code, errs, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for cj.Status != "cancelled" {
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after cancel", long.ID, cj.Status)
		}
		time.Sleep(50 * time.Millisecond)
		out, errs, code = srv.as(t, "viewer", "job", "status", long.ID, "--json")
		if mustJSON(t, out, &cj); code != 0 {
			t.Fatalf("status: %d %s", code, errs)
		}
	}
	_, errs, code = srv.as(t, "viewer", "job", "cancel", long.ID)
	if code != 1 || !strings.Contains(errs, "error: AML_FORBIDDEN:") {
		t.Fatalf("viewer cancel: %d %q", code, errs)
	}
	out, errs, code = srv.as(t, "engineer", "job", "retry", long.ID, "--json")
	var rj struct{ ID, Status, ParentID string }
	if mustJSON(t, out, &rj); code != 0 || rj.ID == "" || rj.ID == long.ID {
		t.Fatalf("retry: %d %s %s", code, errs, out)
	}
	out, errs, code = srv.as(t, "engineer", "job", "cancel", rj.ID, "--json")
	if code != 0 {
		t.Fatalf("cancel the retry: %d %s %s", code, errs, out)
	}
	// retry --wait follows the new job to its end: a failing job's retry
	// fails the same way, exit 1 with the job's error code.
	if _, errs, code = srv.as(t, "engineer", "job", "submit", "--dataset", p.ids[true]["ds"], "--trainer", "test_mean@1", "--params", `{"fail":true}`, "--wait"); code != 1 {
		t.Fatalf("submit failing: %d %s", code, errs)
	}
	out, errs, code = srv.as(t, "viewer", "job", "list", "--status", "failed", "--json")
	var failed []struct{ ID string }
	if mustJSON(t, out, &failed); code != 0 || len(failed) != 1 {
		t.Fatalf("failed jobs: %d %s %s", code, errs, out)
	}
	fj := failed[0]
	_, errs, code = srv.as(t, "engineer", "job", "retry", fj.ID, "--wait")
	if code != 1 || !strings.Contains(errs, "AML_TRAINER_FAILED") {
		t.Fatalf("retry --wait of a failing job: %d %q", code, errs)
	}
	// Cancelling a job that has ended is refused alike on both sides.
	p.sameError("job cancel (ended)", "engineer", func(ids map[string]string) []string { return []string{"job", "cancel", ids["job"]} })

	// Tokens: an admin creates one (the same record on both sides but for
	// its secret), it works, is listed, is revoked, and no longer works; an
	// engineer may not create tokens.
	p.idLists = map[string]bool{"token": true}
	lo, ro = p.both("token create", "admin", fixedArgs("token", "create", "--name", "kim", "--role", "viewer", "--lines", "L1,L2", "--ttl", "1h"))
	p.learn("tok", lo, ro, func(t *testing.T, s string) string {
		var v struct{ ID, Token string }
		if mustJSON(t, s, &v); !strings.HasPrefix(v.Token, "aml_") {
			t.Fatalf("token create answered no secret: %s", s)
		}
		return v.ID
	})
	var tc struct{ Token string }
	mustJSON(t, ro, &tc)
	if _, errs, code = aml(t, "runs", "list", "--server", srv.url, "--token", tc.Token); code != 0 {
		t.Fatalf("the new token: %d %s", code, errs)
	}
	out, errs, code = srv.as(t, "admin", "token", "list", "--json")
	var infos []struct{ ID, Name string }
	if mustJSON(t, out, &infos); code != 0 || len(infos) != 6 || !strings.Contains(out, p.ids[true]["tok"]) {
		t.Fatalf("token list: %d %s %s", code, errs, out)
	}
	p.both("token revoke", "admin", func(ids map[string]string) []string { return []string{"token", "revoke", ids["tok"], "--as", "root"} })
	p.idLists = nil
	if _, errs, code = aml(t, "runs", "list", "--server", srv.url, "--token", tc.Token); code != 1 || !strings.Contains(errs, "AML_UNAUTHENTICATED") {
		t.Fatalf("revoked token: %d %q", code, errs)
	}
	if _, errs, code = srv.as(t, "engineer", "token", "create", "--name", "x", "--role", "viewer"); code != 1 || !strings.Contains(errs, "AML_FORBIDDEN") {
		t.Fatalf("engineer token create: %d %q", code, errs)
	}
	if _, errs, code = srv.as(t, "admin", "token", "create", "--name", "x", "--role", "boss"); code != 2 || !strings.Contains(errs, "--role") {
		t.Fatalf("bad role: %d %q", code, errs)
	}
}

// TestSec1_CLIPhysicsAndTrainers: physics models and registered external
// trainers through the CLI, locally and with --server alike. A physics
// file named by the person at the machine is read by the CLI and uploaded
// (aml physics put, or a job's params naming a local file); exec:PATH is
// refused over the API (AML_FORBIDDEN) and ext:NAME, registered by an
// admin, accepted.
func TestSec1_CLIPhysicsAndTrainers(t *testing.T) {
	t.Setenv("AML_TEST_TRAINERS", "1")
	local, remoteDir := simDir(t), simDir(t)
	srv := startServer(t, remoteDir, api.Options{})
	p := newParity(t, local, srv)
	phys := filepath.Join(t.TempDir(), "injection.aml")
	src, err := os.ReadFile("../../examples/physics/injection.aml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(phys, src, 0o600); err != nil {
		t.Fatal(err)
	}
	lo, ro := p.both("physics put", "engineer", fixedArgs("physics", "put", phys))
	var pm struct{ ID, SHA256 string }
	if mustJSON(t, lo, &pm); !strings.HasPrefix(pm.ID, "phys-") || !strings.Contains(ro, pm.ID) {
		t.Fatalf("physics put: %s / %s", lo, ro)
	}
	p.both("physics list", "viewer", fixedArgs("physics", "list"))
	p.both("physics show", "viewer", fixedArgs("physics", "show", pm.ID))
	if _, errs, code := srv.as(t, "engineer", "physics", "put", "/dev/zero"); code == 0 || !strings.Contains(errs, "not a regular file") {
		t.Fatalf("physics put /dev/zero: exit %d %s", code, errs)
	}

	script := filepath.Join(t.TempDir(), "trainer.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '##AML {\"type\":\"done\"}'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	p.both("trainer register", "admin", fixedArgs("trainer", "register", "touch", "--exec", script, "--env", "MY_VAR"))
	p.both("trainer list", "viewer", fixedArgs("trainer", "list"))
	p.both("trainer show", "viewer", fixedArgs("trainer", "show", "one_step@1"))
	p.both("trainer show", "viewer", fixedArgs("trainer", "show", "ext:touch"))
	if out, errs, code := srv.as(t, "viewer", "trainer", "show", "linear_state_space"); code != 0 ||
		!strings.Contains(out, "linear_state_space@1") || !strings.Contains(out, "PARAM") || !regexp.MustCompile(`(?m)^initSteps\s+integer\s+5\s+≥ 0\s+steps`).MatchString(out) {
		t.Fatalf("trainer show (text): exit %d %s\n%s", code, errs, out)
	}
	if _, errs, code := srv.as(t, "engineer", "trainer", "register", "x", "--exec", script); code == 0 || !strings.Contains(errs, "AML_FORBIDDEN") {
		t.Fatalf("engineer registered a trainer: exit %d %s", code, errs)
	}

	p.ids[false]["dir"], p.ids[true]["dir"] = local, remoteDir
	lo, ro = p.both("dataset build", "engineer", func(ids map[string]string) []string {
		return []string{"dataset", "build", "--spec", filepath.Join(ids["dir"], "spec.json")}
	})
	p.learn("ds", lo, ro, func(t *testing.T, s string) string {
		var v struct{ Dataset struct{ ID string } }
		mustJSON(t, s, &v)
		return v.Dataset.ID
	})
	ds := p.ids[true]["ds"]
	if _, errs, code := srv.as(t, "engineer", "job", "submit", "--dataset", ds, "--trainer", "linear_state_space@1", "--params", `{"ordr":2}`); code == 0 ||
		!strings.Contains(errs, "AML_INVALID_ARGUMENT") || !strings.Contains(errs, "params.ordr") || !strings.Contains(errs, "initSteps") {
		t.Fatalf("a misspelt param over the API: exit %d %s", code, errs)
	}
	if _, errs, code := aml(t, "job", "submit", "--dataset", p.ids[false]["ds"], "--trainer", "one_step@1", "--params", `{"na":-1}`, "--data", local); code != 1 ||
		!strings.Contains(errs, "AML_INVALID_ARGUMENT") || !strings.Contains(errs, "params.na") || !strings.Contains(errs, "below the minimum 0") {
		t.Fatalf("an out-of-range param locally: exit %d %s", code, errs)
	}
	if _, errs, code := srv.as(t, "engineer", "job", "submit", "--dataset", ds, "--trainer", "exec:/usr/bin/id"); code == 0 || !strings.Contains(errs, "AML_FORBIDDEN") {
		t.Fatalf("exec over the API: exit %d %s", code, errs)
	}
	if out, errs, code := srv.as(t, "agent", "job", "submit", "--dataset", ds, "--trainer", "ext:touch", "--json"); code != 0 || !strings.Contains(out, "ext:touch") {
		t.Fatalf("ext over the API: exit %d %s %s", code, errs, out)
	}
	lo, ro = p.both("job submit (local physics file)", "engineer", func(ids map[string]string) []string {
		return []string{"job", "submit", "--dataset", ids["ds"], "--trainer", "hybrid_residual@1", "--params", `{"physics":"` + phys + `","ensemble":0}`}
	})
	for _, out := range []string{lo, ro} {
		if !strings.Contains(out, pm.ID) || !strings.Contains(out, pm.SHA256) || strings.Contains(out, phys) {
			t.Fatalf("the job does not name the stored model: %s", out)
		}
	}
}
