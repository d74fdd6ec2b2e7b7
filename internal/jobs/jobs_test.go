package jobs

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/envlease"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
)

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureDS   string
	fixtureErr  error
)

// fixture is a data dir with a small simulated dataset, built once and
// copied per test.
func fixture(t *testing.T) (*sqlite.Store, string, string) {
	t.Helper()
	fixtureOnce.Do(func() {
		fixtureDir, fixtureErr = os.MkdirTemp("", "aml-jobs-fixture-")
		if fixtureErr != nil {
			return
		}
		st, err := sqlite.Open(fixtureDir)
		if err != nil {
			fixtureErr = err
			return
		}
		defer func() {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		}()
		cfg := sim.DefaultInjectionConfig()
		cfg.Runs, cfg.Seed, cfg.RunDuration = 5, 4, 8*time.Minute
		out, err := sim.GenerateInjection(cfg)
		if err != nil {
			fixtureErr = err
			return
		}
		if _, err := out.Write(context.Background(), st, nil); err != nil {
			fixtureErr = err
			return
		}
		b, _ := os.ReadFile("../../examples/specs/injection.json")
		spec, err := dataset.ParseSpec(b)
		if err != nil {
			fixtureErr = err
			return
		}
		spec.Split.ValRatio, spec.Split.TestRatio = 0.2, 0.2
		spec.Stride = 5
		res, err := dataset.Build(context.Background(), st, spec, dataset.Options{DataDir: fixtureDir})
		if err != nil {
			fixtureErr = err
			return
		}
		fixtureDS = res.Dataset.ID
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", fixtureDir+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("copy fixture: %v %s", err, out)
	}
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st, dir, fixtureDS
}

// tinyFixture is a data dir with a one-run, few-window dataset (benchmarks:
// the job system's overhead, not the data, is measured).
func tinyFixture(tb testing.TB) (*sqlite.Store, string, string) {
	tb.Helper()
	dir := tb.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed, cfg.RunDuration = 3, 1, 3*time.Minute
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := out.Write(context.Background(), st, nil); err != nil {
		tb.Fatal(err)
	}
	b, _ := os.ReadFile("../../examples/specs/injection.json")
	spec, err := dataset.ParseSpec(b)
	if err != nil {
		tb.Fatal(err)
	}
	spec.Split.ValRatio, spec.Split.TestRatio, spec.Stride = 0.34, 0.33, 20
	res, err := dataset.Build(context.Background(), st, spec, dataset.Options{DataDir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	return st, dir, res.Dataset.ID
}

type harness struct {
	st  *sqlite.Store
	dir string
	ds  string
	r   *Runner
	q   *Queue
	bus *events.Bus
}

func newHarness(t *testing.T, concurrency int) *harness {
	st, dir, ds := fixture(t)
	envs, err := envlease.Open(dir, envlease.WithHeartbeat(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	bus := events.New()
	r := NewRunner(st, Options{DataDir: dir, Trainers: NewTrainers(TestMeanTrainer{}), Bus: bus, Envs: envs, HeartbeatEvery: 100 * time.Millisecond})
	q, err := NewQueue(context.Background(), st.DB(), r, QueueOptions{Work: true, MaxConcurrent: concurrency, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{st: st, dir: dir, ds: ds, r: r, q: q, bus: bus}
}

func (h *harness) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 20*time.Second)
		defer c()
		if err := h.q.Stop(sctx); err != nil {
			t.Errorf("stop the queue: %v", err)
		}
		cancel()
	})
}

func (h *harness) waitFor(t *testing.T, id string, pred func(core.Job) bool, within time.Duration) core.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := h.st.GetJob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if pred(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: condition not met within %s; status %s stage %q error %s %s", id, within, j.Status, j.Stage, j.ErrorCode, j.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func terminal(j core.Job) bool { return j.Status.Terminal() }

func TestJobsThroughQueue(t *testing.T) {
	h := newHarness(t, 2)
	h.start(t)
	ctx := context.Background()
	sub := h.bus.Subscribe(1000, nil)
	defer sub.Close()
	var ids []string
	for i := 0; i < 6; i++ {
		j, err := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{"steps":3,"stepMs":20}`), Seed: int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		j := h.waitFor(t, id, terminal, 60*time.Second)
		if j.Status != core.JobDone || j.ModelID == "" || len(j.Metrics) == 0 || j.Attempt != 1 {
			t.Fatalf("job %+v", j)
		}
		m, err := h.st.GetModel(ctx, j.ModelID)
		if err != nil || m.ArtifactKind != "aml.mean/1" || m.Stage != core.StageCandidate || m.JobID != id || !m.LineageVerified {
			t.Fatalf("model %+v %v", m, err)
		}
		if m.GatePassed {
			t.Fatal("a mean predictor passed the accuracy gates")
		}
	}
	// Events: every job went queued → provisioning → training → evaluating → done.
	seen := map[string][]string{}
	for len(sub.C) > 0 {
		e := <-sub.C
		if e.Kind == events.JobState {
			seen[e.ID] = append(seen[e.ID], e.Data["status"].(core.JobStatus).String())
		}
	}
	for _, id := range ids {
		got := strings.Join(seen[id], ",")
		if got != "queued,provisioning,training,evaluating,done" {
			t.Fatalf("job %s states %s", id, got)
		}
	}
	// Registry: a tampered artifact cannot be promoted.
	j, _ := h.st.GetJob(ctx, ids[0])
	reg := registry.New(h.st, h.dir, h.bus)
	m, _ := h.st.GetModel(ctx, j.ModelID)
	if _, err := reg.Move(ctx, m.ID, core.StageShadow, "tester", "", ""); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(reg.ArtifactDir(m), "model.json"), []byte(`{"format":"aml.mean/1","horizon":10,"yCols":3,"mean":[1,2,3]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Move(ctx, m.ID, core.StageShadow, "tester", "", ""); core.CodeOf(err) != core.CodeInvalidArgument && core.CodeOf(err) != core.CodeModelTampered {
		t.Fatalf("re-shadow: %v", err)
	}
	if _, err := reg.Move(ctx, m.ID, core.StageProduction, "tester", "", ""); core.CodeOf(err) != core.CodeGateFailed && core.CodeOf(err) != core.CodeModelTampered {
		t.Fatalf("tampered promotion: %v", err)
	}
	if err := reg.VerifyArtifact(context.Background(), m); core.CodeOf(err) != core.CodeModelTampered {
		t.Fatalf("tampered artifact not detected: %v", err)
	}
}

func TestCancelTimeoutStall(t *testing.T) {
	h := newHarness(t, 1)
	h.start(t)
	ctx := context.Background()
	// Cancel a running job: with one slot, the next job must then run.
	long, _ := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{"steps":1000,"stepMs":50}`)})
	next, _ := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{"steps":2,"stepMs":10}`)})
	h.waitFor(t, long.ID, func(j core.Job) bool { return j.Status == core.JobTraining }, 30*time.Second)
	// Cancel through a second runner, as another process would (flag in the store).
	other := NewRunner(h.st, Options{DataDir: h.dir})
	if _, err := other.Cancel(ctx, long.ID); err != nil {
		t.Fatal(err)
	}
	j := h.waitFor(t, long.ID, terminal, 10*time.Second)
	if j.Status != core.JobCancelled {
		t.Fatalf("cancelled job is %s", j.Status)
	}
	if j = h.waitFor(t, next.ID, terminal, 30*time.Second); j.Status != core.JobDone {
		t.Fatalf("next job after cancel: %s %s", j.Status, j.Error)
	}
	// Wall timeout counts training only.
	to, _ := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{"steps":1000,"stepMs":20}`), Timeout: time.Second})
	if j = h.waitFor(t, to.ID, terminal, 30*time.Second); j.Status != core.JobTimeout || j.ErrorCode != core.CodeJobTimeout {
		t.Fatalf("timeout: %s %s", j.Status, j.ErrorCode)
	}
	// Stall: progress stops after step 2 while the trainer keeps running.
	stl, _ := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{"steps":1000,"stepMs":20,"silentAfter":2}`), Stall: time.Second})
	if j = h.waitFor(t, stl.ID, terminal, 30*time.Second); j.Status != core.JobTimeout || j.ErrorCode != core.CodeJobStalled {
		t.Fatalf("stall: %s %s", j.Status, j.ErrorCode)
	}
	// A trainer error fails the job for good (no retry); retry makes a child experiment.
	bad, _ := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{"fail":true}`)})
	if j = h.waitFor(t, bad.ID, terminal, 30*time.Second); j.Status != core.JobFailed || j.RetryCount != 0 || j.ErrorCode != core.CodeTrainerFailed {
		t.Fatalf("failing trainer: %+v", j)
	}
	child, err := h.r.Retry(ctx, bad.ID, "tester")
	if err != nil || child.ParentID != bad.ID || child.Status != core.JobQueued {
		t.Fatalf("retry: %+v %v", child, err)
	}
	h.waitFor(t, child.ID, terminal, 30*time.Second)
	if _, err := h.r.Retry(ctx, child.ID, "t"); err != nil {
		t.Fatal(err)
	}
}

func TestTamperedDatasetFailsJob(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	d, _ := h.st.GetDataset(ctx, h.ds)
	y := filepath.Join(h.dir, d.Path, "arrays", "y.f32")
	b, _ := os.ReadFile(y)
	b[10] ^= 1
	if err := os.WriteFile(y, b, 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "test_mean@1"})
	if err != nil {
		t.Fatal(err)
	}
	h.start(t)
	j = h.waitFor(t, j.ID, terminal, 30*time.Second)
	if j.Status != core.JobFailed || j.ErrorCode != core.CodeDatasetTampered || j.RetryCount != 0 {
		t.Fatalf("tampered dataset: %s %s %s", j.Status, j.ErrorCode, j.Error)
	}
}

// writeScript writes an executable shell trainer.
func writeScript(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "trainer.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExternalTrainerCancelKillsTree(t *testing.T) {
	h := newHarness(t, 1)
	h.start(t)
	ctx := context.Background()
	script := writeScript(t, `echo '##AML {"type":"stage","stage":"fit"}'
sleep 1000 &
echo $! > "$AML_JOB_DIR/grandchild.pid"
while true; do echo '##AML {"type":"progress","progress":0.1}'; sleep 0.1; done
`)
	j, err := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "exec:" + script})
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(h.r.JobDir(j.ID), "grandchild.pid")
	deadline := time.Now().Add(30 * time.Second)
	var pid int
	for pid == 0 && time.Now().Before(deadline) {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("trainer never started")
	}
	if _, err := h.r.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if j = h.waitFor(t, j.ID, terminal, 15*time.Second); j.Status != core.JobCancelled {
		t.Fatalf("status %s", j.Status)
	}
	time.Sleep(100 * time.Millisecond)
	if alive(pid) {
		t.Fatalf("grandchild %d still alive after cancel", pid)
	}
	// A trainer killed by a signal nobody sent is an infrastructure failure:
	// retried, at most twice, then failed.
	kill := writeScript(t, `echo '##AML {"type":"progress","progress":0.5}'; kill -9 $$`)
	j, _ = h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "exec:" + kill})
	j = h.waitFor(t, j.ID, terminal, 60*time.Second)
	if j.Status != core.JobFailed || j.RetryCount != 2 || j.Attempt != 3 || j.ErrorCode != core.CodeWorkerLost {
		t.Fatalf("killed trainer: status %s retries %d attempt %d code %s", j.Status, j.RetryCount, j.Attempt, j.ErrorCode)
	}
	// Exit code and error event.
	fail := writeScript(t, `echo '##AML {"type":"error","message":"matrix is singular"}'; exit 3`)
	j, _ = h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "exec:" + fail})
	j = h.waitFor(t, j.ID, terminal, 30*time.Second)
	if j.Status != core.JobFailed || !strings.Contains(j.Error, "code 3") || !strings.Contains(j.Error, "matrix is singular") || j.RetryCount != 0 {
		t.Fatalf("failing external trainer: %+v", j)
	}
}

func TestPythonRidgeTrainerEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found on PATH")
	}
	h := newHarness(t, 1)
	h.start(t)
	ctx := context.Background()
	script, _ := filepath.Abs("../../examples/trainers/ridge_arx.py")
	sub := h.bus.Subscribe(1000, nil)
	defer sub.Close()
	j, err := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "exec:" + script, Params: json.RawMessage(`{"lambda":1,"lags":5,"emitMalformed":true}`), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if j.EnvName != "python" {
		t.Fatalf("python trainer without env lease: %q", j.EnvName)
	}
	j = h.waitFor(t, j.ID, terminal, 120*time.Second)
	if j.Status != core.JobDone {
		t.Fatalf("ridge job %s: %s %s", j.Status, j.ErrorCode, j.Error)
	}
	var tr struct {
		Malformed int
		Events    int
	}
	b, _ := os.ReadFile(filepath.Join(h.r.JobDir(j.ID), "trainer-result.json"))
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Malformed != 1 || tr.Events < 3 {
		t.Fatalf("trainer result %s", b)
	}
	progress := 0
	for len(sub.C) > 0 {
		if e := <-sub.C; e.Kind == events.JobProgress && e.ID == j.ID {
			progress++
		}
	}
	if progress < 3 {
		t.Fatalf("%d progress events", progress)
	}
	var met struct {
		Test struct {
			MeanNRMSE float64 `json:"meanNrmse"`
		} `json:"test"`
	}
	if err := json.Unmarshal(j.Metrics, &met); err != nil {
		t.Fatal(err)
	}
	if !(met.Test.MeanNRMSE > 0 && met.Test.MeanNRMSE < 10) {
		t.Fatalf("platform metrics %s", j.Metrics)
	}
}

func TestEnvLeaseWithJobs(t *testing.T) {
	h := newHarness(t, 1)
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(h.dir, "envs.json"), []byte(`[{"name":"slow","rebuild":["sh","-c","sleep 2"]},{"name":"fast","rebuild":["true"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	envs, err := envlease.Open(h.dir, envlease.WithHeartbeat(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	h.r.opt.Envs = envs
	h.start(t)
	script := writeScript(t, `while true; do echo '##AML {"type":"progress","progress":0.2}'; sleep 0.1; done`)
	j, err := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "exec:" + script, EnvName: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, j.ID, func(j core.Job) bool { return j.Status == core.JobTraining }, 30*time.Second)
	// Rebuild refused while the job holds its read lease (a second manager = another process).
	other, _ := envlease.Open(h.dir)
	if _, err := other.Rebuild(ctx, "fast", "admin", os.Stderr); core.CodeOf(err) != core.CodeEnvBusy {
		t.Fatalf("rebuild during job: %v", err)
	}
	if _, err := h.r.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, j.ID, terminal, 15*time.Second)
	if _, err := other.Rebuild(ctx, "fast", "admin", os.Stderr); err != nil {
		t.Fatalf("rebuild after job: %v", err)
	}
	// A job is refused while its environment is being rebuilt.
	done := make(chan error, 1)
	go func() { _, err := other.Rebuild(ctx, "slow", "admin", os.Stderr); done <- err }()
	time.Sleep(500 * time.Millisecond)
	if _, err := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "exec:" + script, EnvName: "slow"}); core.CodeOf(err) != core.CodeEnvBusy {
		t.Fatalf("submit during rebuild: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// alive reports a running process; a zombie (dead, not yet reaped by a
// PID 1 that does not reap) counts as dead.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
