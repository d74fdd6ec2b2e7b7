package jobs

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// perm fails t unless path's permission bits are want.
func perm(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Errorf("%s: mode %o, want %o", path, got, want)
	}
}

// TestSec12_PrivateFiles: the data dir is 0700 and what AML writes in it —
// the database, job folders, logs, job files, artifacts and dataset files
// — is readable by its owner only.
func TestSec12_PrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	perm(t, dir, 0o700)
	perm(t, st.Path(), 0o600)
	// An existing world-readable data dir and database are tightened.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, sqlite.FileName), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err = sqlite.Open(dir); err != nil {
		t.Fatal(err)
	}
	perm(t, dir, 0o700)
	perm(t, st.Path(), 0o600)

	h := newHarness(t, 1)
	h.start(t)
	ctx := context.Background()
	j, err := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{"steps":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if j = h.waitFor(t, j.ID, terminal, 60*time.Second); j.Status != core.JobDone {
		t.Fatalf("job %s %s", j.Status, j.Error)
	}
	s := writeScript(t, `echo hello; echo '##AML {"type":"done"}'`)
	x, err := h.r.Submit(ctx, SubmitRequest{DatasetID: h.ds, TrainerRef: "exec:" + s})
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, x.ID, terminal, 60*time.Second)
	for _, id := range []string{j.ID, x.ID} {
		jd := h.r.JobDir(id)
		perm(t, jd, 0o700)
		perm(t, filepath.Join(jd, "logs"), 0o700)
		perm(t, filepath.Join(jd, "logs", "trainer.log"), 0o600)
		perm(t, filepath.Join(jd, "job.json"), 0o600)
	}
	perm(t, filepath.Join(h.r.JobDir(x.ID), "trainer-result.json"), 0o600)
	perm(t, filepath.Join(h.r.JobDir(j.ID), "artifacts", "model.json"), 0o600)
	d, err := h.st.GetDataset(ctx, h.ds)
	if err != nil {
		t.Fatal(err)
	}
	perm(t, filepath.Join(h.dir, filepath.FromSlash(d.Path), "arrays", "y.f32"), 0o600)
	perm(t, filepath.Join(h.dir, filepath.FromSlash(d.Path), "manifest.json"), 0o600)
}

// TestSec12_RelativeDataDir: a runner opened on a relative data dir runs
// exec: trainers (the child gets an absolute job dir).
func TestSec12_RelativeDataDir(t *testing.T) {
	st, dir, ds := fixture(t)
	t.Chdir(filepath.Dir(dir))
	r := NewRunner(st, Options{DataDir: filepath.Base(dir), Trainers: NewTrainers(TestMeanTrainer{}), HeartbeatEvery: 100 * time.Millisecond})
	if !filepath.IsAbs(r.JobDir("x")) {
		t.Errorf("JobDir %q is relative", r.JobDir("x"))
	}
	s := writeScript(t, `touch "$AML_JOB_DIR/ran"; echo '##AML {"type":"done"}'`)
	j, err := r.Submit(context.Background(), SubmitRequest{DatasetID: ds, TrainerRef: "exec:" + s})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), j.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", j.ID, "ran")); err != nil {
		j, _ = st.GetJob(context.Background(), j.ID)
		t.Fatalf("the trainer did not run: %s %s", j.ErrorCode, j.Error)
	}
}

// TestSec8_TrainerReadsConfined: an exec: trainer run by the job runner
// reads its job directory and its dataset, not the database or the other
// files of the data directory (on a kernel with Landlock; elsewhere the
// job log says reads are not restricted).
func TestSec8_TrainerReadsConfined(t *testing.T) {
	h := newHarness(t, 1)
	h.start(t)
	if err := os.WriteFile(filepath.Join(h.dir, "cert-key.json"), []byte("PRIVATE"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := writeScript(t, `ds=$(sed -n 's/.*"datasetPath": "\(.*\)",/\1/p' job.json)
cat "$ds/manifest.json" >/dev/null && echo "dataset ok"
cat "$AML_JOB_DIR/../../aml.db" >/dev/null 2>&1 && echo "db READ" || echo "db refused"
cat "$AML_JOB_DIR/../../cert-key.json" >/dev/null 2>&1 && echo "key READ" || echo "key refused"
echo '##AML {"type":"done"}'
`)
	j, err := h.r.Submit(context.Background(), SubmitRequest{DatasetID: h.ds, TrainerRef: "exec:" + s})
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, j.ID, terminal, 60*time.Second)
	b, err := os.ReadFile(filepath.Join(h.r.JobDir(j.ID), "logs", "trainer.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	if strings.Contains(log, "Landlock is not available") {
		t.Skip("no Landlock on this kernel; the job log says reads are not restricted")
	}
	for _, want := range []string{"dataset ok", "db refused", "key refused"} {
		if !strings.Contains(log, want) {
			t.Errorf("%q missing from the job log:\n%s", want, log)
		}
	}
}

// TestSec8_RunnerWritesNotFollowed: files the runner writes into the job
// directory after (or before a retry of) the trainer — trainer-result.json,
// job.json — are not written through links the trainer left there.
func TestSec8_RunnerWritesNotFollowed(t *testing.T) {
	h := newHarness(t, 1)
	h.start(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("KEEP"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := writeScript(t, `ln -sf "`+victim+`" trainer-result.json
echo '##AML {"type":"done"}'
`)
	j, err := h.r.Submit(context.Background(), SubmitRequest{DatasetID: h.ds, TrainerRef: "exec:" + s})
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, j.ID, terminal, 60*time.Second)
	if b, _ := os.ReadFile(victim); string(b) != "KEEP" {
		t.Fatalf("the runner wrote through the trainer's link: %q", b)
	}
	st, err := os.Lstat(filepath.Join(h.r.JobDir(j.ID), "trainer-result.json"))
	if err != nil || !st.Mode().IsRegular() {
		t.Fatalf("trainer-result.json: %v %v", st, err)
	}
}
