package app

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/examples"
	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/testfix"
)

// jobApp is an App with a job runner over a small injection dataset.
func jobApp(t *testing.T) (*App, *jobs.Runner, string, string) {
	t.Helper()
	st, dir := testfix.SQLite(t)
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed, cfg.RunDuration = 6, 3, 10*time.Minute
	ds := testfix.InjectionDataset(t, st, dir, testfix.Injection(t, cfg))
	r := jobs.NewRunner(st, jobs.Options{DataDir: dir, Trainers: jobs.NewTrainers(trainers.All()...).WithFormats(trainers.Formats()), Bus: events.New()})
	return New(&service.Deps{Store: st, DataDir: dir, Runner: r}, Options{}), r, dir, ds.ID
}

// TestSec1_PhysicsPathRefused: a job request naming a physics file on the
// server is refused before anything is opened; a physics model is uploaded
// content (physics.put: validated, hashed, stored) named by id, its hash
// pinned in the job's params.
func TestSec1_PhysicsPathRefused(t *testing.T) {
	a, r, _, ds := jobApp(t)
	ctx := context.Background()
	for _, path := range []string{"/etc/passwd", "/dev/zero", "/proc/self/environ", "examples/physics/injection.aml"} {
		params := json.RawMessage(`{"physics":"` + path + `","mapping":{"outputs":{"weight":"part_weight"}}}`)
		_, err := a.JobSubmit(ctx, engineer, JobSubmitRequest{DatasetID: ds, Trainer: "hybrid_residual@1", Params: params})
		if core.CodeOf(err) != core.CodeInvalidArgument || !strings.Contains(err.Error(), "physics put") {
			t.Errorf("physics %s: %v, want a refusal naming physics put", path, err)
		}
	}
	if js, _ := a.JobList(ctx, admin, JobListRequest{}); js.Count != 0 {
		t.Fatalf("%d jobs queued with a path", js.Count)
	}

	src, err := fs.ReadFile(examples.FS, "physics/injection.aml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.PhysicsPut(ctx, viewer, PhysicsPutRequest{Source: string(src)}); core.CodeOf(err) != core.CodeForbidden {
		t.Fatalf("viewer put: %v", err)
	}
	if _, err := a.PhysicsPut(ctx, engineer, PhysicsPutRequest{Source: "state x\nnext x = y +"}); core.CodeOf(err) != core.CodePhysicsInvalid {
		t.Fatalf("invalid source: %v", err)
	}
	pm, err := a.PhysicsPut(ctx, engineer, PhysicsPutRequest{Source: string(src), FileName: "../../injection.aml"})
	if err != nil {
		t.Fatal(err)
	}
	if !IsPhysicsID(pm.ID) || pm.SHA256 == "" || pm.FileName != "injection.aml" || pm.Name == "" {
		t.Fatalf("stored %+v", pm)
	}
	again, err := a.PhysicsPut(ctx, agent, PhysicsPutRequest{Source: string(src)})
	if err != nil || again.ID != pm.ID {
		t.Fatalf("put again: %+v %v", again, err)
	}
	show, err := a.PhysicsShow(ctx, viewer, PhysicsRequest{ID: pm.ID})
	if err != nil || show.Source != string(src) {
		t.Fatalf("show: %v", err)
	}
	if l, err := a.PhysicsList(ctx, viewer, PhysicsListRequest{}); err != nil || l.Count != 1 || l.Items[0].Source != "" {
		t.Fatalf("list: %+v %v", l, err)
	}
	params := json.RawMessage(`{"physics":"` + pm.ID + `","mapping":{"outputs":{"weight":"part_weight"}},"ensemble":0,"starts":1,"maxIter":5}`)
	if _, err := a.JobSubmit(ctx, engineer, JobSubmitRequest{DatasetID: ds, Trainer: "hybrid_residual@1",
		Params: json.RawMessage(`{"physics":"` + pm.ID + `","physicsSha256":"` + strings.Repeat("a", 64) + `"}`)}); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("wrong hash: %v", err)
	}
	j, err := a.JobSubmit(ctx, engineer, JobSubmitRequest{DatasetID: ds, Trainer: "hybrid_residual@1", Params: params})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(j.Params), pm.SHA256) {
		t.Fatalf("hash not pinned: %s", j.Params)
	}
	if err := r.Run(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
	if j, _ = a.JobShow(ctx, viewer, JobRequest{ID: j.ID}); j.Status != core.JobDone {
		t.Fatalf("job by physics id: %s %s %s", j.Status, j.ErrorCode, j.Error)
	}
}

// TestSec2_ExecOnlyLocal: exec:PATH from a request over the API or MCP (a
// token's principal, any role) is refused; the local CLI (Principal.Local)
// keeps it. External trainers are registered by an admin (audited) and
// named ext:NAME.
func TestSec2_ExecOnlyLocal(t *testing.T) {
	a, r, dir, ds := jobApp(t)
	ctx := context.Background()
	for _, p := range []Principal{engineer, agent, admin} {
		_, err := a.JobSubmit(ctx, p, JobSubmitRequest{DatasetID: ds, Trainer: "exec:/usr/bin/id"})
		if core.CodeOf(err) != core.CodeForbidden || !strings.Contains(err.Error(), "ext:NAME") {
			t.Errorf("%s: exec over the API: %v", p.Role, err)
		}
	}
	script := filepath.Join(t.TempDir(), "trainer.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch \"$AML_JOB_DIR/ran\"\necho '##AML {\"type\":\"done\"}'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	local := Principal{Name: "ops", Role: auth.RoleAdmin, Local: true}
	if _, err := a.JobSubmit(ctx, local, JobSubmitRequest{DatasetID: ds, Trainer: "exec:" + script}); err != nil {
		t.Fatalf("local exec: %v", err)
	}

	reg := TrainerRegisterRequest{Name: "touch", Exec: script, Env: []string{"MY_VAR"}}
	for _, p := range []Principal{engineer, agent} {
		if _, err := a.TrainerRegister(ctx, p, reg); core.CodeOf(err) != core.CodeForbidden {
			t.Errorf("%s registered a trainer: %v", p.Role, err)
		}
	}
	if _, err := a.TrainerRegister(ctx, admin, TrainerRegisterRequest{Name: "rel", Exec: "bin/x"}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("relative exec: %v", err)
	}
	tr, err := a.TrainerRegister(ctx, admin, reg)
	if err != nil || tr.Command != script || tr.RegisteredBy != admin.Name {
		t.Fatalf("register: %+v %v", tr, err)
	}
	es, err := audit.New(a.d.Store.SQL()).List(ctx, 0, 100, "ext:touch")
	if err != nil || len(es) != 1 || es[0].Action != "trainer.register" || es[0].Actor != admin.Name {
		t.Fatalf("audit: %+v %v", es, err)
	}
	if l, err := a.TrainerList(ctx, viewer, TrainerListRequest{}); err != nil || len(l.External) != 1 || len(l.Native) == 0 {
		t.Fatalf("list: %+v %v", l, err)
	}
	if _, err := a.JobSubmit(ctx, engineer, JobSubmitRequest{DatasetID: ds, Trainer: "ext:nope"}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("unregistered: %v", err)
	}
	j, err := a.JobSubmit(ctx, agent, JobSubmitRequest{DatasetID: ds, Trainer: "ext:touch"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", j.ID, "ran")); err != nil {
		j, _ = a.JobShow(ctx, viewer, JobRequest{ID: j.ID})
		t.Fatalf("the registered trainer did not run: %s %s", j.ErrorCode, j.Error)
	}
}

// TestSec10a_DatasetBuildBudget: dataset.build refuses a spec whose grid
// is over the work budget (configurable, default 50 M cells) at once,
// naming the limit and the computed size; a request cannot raise it.
func TestSec10a_DatasetBuildBudget(t *testing.T) {
	st, dir := testfix.SQLite(t)
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed, cfg.RunDuration = 4, 3, 10*time.Minute
	if _, err := testfix.Injection(t, cfg).Write(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	raw, err := fs.ReadFile(examples.FS, "specs/injection.json")
	if err != nil {
		t.Fatal(err)
	}
	build := func(a *App, extra string) error {
		var req DatasetBuildRequest
		if err := json.Unmarshal([]byte(`{"spec":`+string(raw)+extra+`}`), &req); err != nil {
			t.Fatal(err)
		}
		req.Spec.BeatMs = 1
		_, err := a.DatasetBuild(context.Background(), engineer, req)
		return err
	}
	a := New(&service.Deps{Store: st, DataDir: dir}, Options{MaxDatasetCells: 1_000_000})
	t0 := time.Now()
	err = build(a, "")
	if core.CodeOf(err) != core.CodeQuotaExceeded || !strings.Contains(err.Error(), "1000000 cells") || !strings.Contains(err.Error(), "grid cells") {
		t.Fatalf("beatMs 1: %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("refused after %s", d)
	}
	if err := build(a, `,"maxCells":2000000`); core.CodeOf(err) != core.CodeQuotaExceeded || !strings.Contains(err.Error(), "maxCells") {
		t.Fatalf("a request raising the budget: %v", err)
	}
	if New(&service.Deps{}, Options{}).o.MaxDatasetCells != 50_000_000 {
		t.Fatal("default budget")
	}
}
