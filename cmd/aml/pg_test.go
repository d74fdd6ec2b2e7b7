package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/demo"
	"github.com/aml-project/aml/internal/store/postgres"
	"github.com/aml-project/aml/internal/store/postgres/pgtest"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
)

// pgURL returns a URL on an empty schema of the AML_TEST_PG server
// (.ci/run starts a throwaway PostgreSQL 15 and sets it), dropped at the
// end. Skipped only without a server outside CI.
func pgURL(t *testing.T) string { return pgtest.Schema(t) }

// buildDataset simulates a line and builds the jobs test dataset in data
// directory d on the back-end chosen by extra args (--db URL or nothing).
func buildDataset(t *testing.T, d string, db ...string) (id, sha string) {
	t.Helper()
	if _, errs, code := aml(t, append([]string{"sim", "injection", "--runs", "5", "--seed", "4", "--duration", "8m", "--data", d}, db...)...); code != 0 {
		t.Fatal(errs)
	}
	b, _ := os.ReadFile("../../examples/specs/injection.json")
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	spec["stride"] = 5
	spec["split"].(map[string]any)["valRatio"] = 0.2
	spec["split"].(map[string]any)["testRatio"] = 0.2
	sb, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(d, "spec.json"), sb, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := aml(t, append([]string{"dataset", "build", "--spec", filepath.Join(d, "spec.json"), "--data", d, "--json"}, db...)...)
	if code != 0 {
		t.Fatal(errs)
	}
	var res struct {
		Dataset struct{ ID, SHA256 string } `json:"dataset"`
	}
	mustJSON(t, out, &res)
	return res.Dataset.ID, res.Dataset.SHA256
}

// TestDBFlag: --db selects PostgreSQL (or AML_DB), no SQLite file is
// made, commands read from the database and fetch dataset files from the
// shared artifact store; a --db that is not a postgres URL is a usage
// error.
func TestDBFlag(t *testing.T) {
	u := pgURL(t)
	d := t.TempDir()
	ds, _ := buildDataset(t, d, "--db", u)
	out, errs, code := aml(t, "dataset", "list", "--db", u, "--data", t.TempDir(), "--json")
	var list []struct{ ID string }
	mustJSON(t, out, &list)
	if code != 0 || len(list) != 1 || list[0].ID != ds {
		t.Fatalf("dataset list on postgres from another data dir: %d %q %s", code, errs, out)
	}
	// The SQLite store in d was never created.
	if _, err := os.Stat(filepath.Join(d, "aml.db")); err == nil {
		t.Fatal("a SQLite store was created although --db was given")
	}
	// Every command runs on PostgreSQL: runs from the database, a dataset
	// verified from a data directory that never held it (its files are
	// fetched from the shared artifact store), the audit chain.
	if out, errs, code := aml(t, "runs", "list", "--db", u, "--data", d, "--json"); code != 0 || strings.Count(out, `"status": "ended"`) != 5 {
		t.Fatalf("runs list on postgres: %d %q %s", code, errs, out)
	}
	other := t.TempDir()
	if out, errs, code := aml(t, "dataset", "verify", ds, "--db", u, "--data", other); code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("dataset verify from another data dir: %d %q %s", code, errs, out)
	}
	if _, err := os.Stat(filepath.Join(other, "datasets", ds, "manifest.json")); err != nil {
		t.Fatalf("dataset not materialised under the other data dir: %v", err)
	}
	if out, errs, code := aml(t, "audit", "verify", "--db", u, "--data", other); code != 0 {
		t.Fatalf("audit verify on postgres: %d %q %s", code, errs, out)
	}
	t.Setenv("AML_DB", u)
	if out, errs, code := aml(t, "dataset", "list", "--data", d, "--json"); code != 0 || !strings.Contains(out, ds) {
		t.Fatalf("AML_DB: %d %q", code, errs)
	}
	// Retention removes the dataset from the database and collects its
	// files' chunks from the shared artifact store.
	out, errs, code = aml(t, "retention", "run", "--dataset-age", "1ns", "--data", d, "--json")
	var rep struct {
		Datasets        []string
		SharedCollected *struct{ Blobs, Chunks, Bytes int64 }
	}
	mustJSON(t, out, &rep)
	if code != 0 || len(rep.Datasets) != 1 || rep.SharedCollected == nil || rep.SharedCollected.Chunks == 0 || rep.SharedCollected.Bytes == 0 {
		t.Fatalf("retention on postgres: %d %s %s", code, errs, out)
	}
	if _, errs, code := aml(t, "dataset", "verify", ds, "--data", t.TempDir()); code != 1 || !strings.Contains(errs, "AML_NOT_FOUND") {
		t.Fatalf("verify of a removed dataset: %d %s", code, errs)
	}
	if _, errs, code := aml(t, "dataset", "list", "--db", "mysql://x", "--data", d); code != 2 {
		t.Fatalf("bad --db: %d %q", code, errs)
	}
}

type worker struct {
	cmd *exec.Cmd
	id  chan string
}

// startWorker runs `aml worker --db` as its own process with its own data
// directory (no shared filesystem with the submitter or the other worker).
func startWorker(t *testing.T, bin, db string) *worker {
	t.Helper()
	cmd := exec.Command(bin, "worker", "--db", db, "--data", t.TempDir(), "--concurrency", "2", "--rescue-after", "3s")
	cmd.Env = append(os.Environ(), "AML_TEST_TRAINERS=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, id: make(chan string, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "worker "); ok {
				if i := strings.Index(id, ":"); i > 0 {
					select {
					case w.id <- id[:i]:
					default:
					}
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr) // drain: the pipe ends when the worker does
	}()
	stopOnCleanup(t, cmd)
	return w
}

// stopOnCleanup ends a test's child process when the test ends: SIGTERM,
// then SIGKILL after 20 s (a process the test already reaped is left).
func stopOnCleanup(t *testing.T, cmd *exec.Cmd) {
	t.Cleanup(func() {
		if cmd.ProcessState != nil {
			return
		}
		// Teardown: the test has checked what it needed; how the child
		// ends (its exit status, a signal) says nothing more.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

func (w *worker) ident(t *testing.T) string {
	t.Helper()
	select {
	case id := <-w.id:
		return id
	case <-time.After(60 * time.Second):
		t.Fatal("worker did not start")
	}
	return ""
}

// startServe runs `aml serve --db URL --workers 0 --dev` as its own
// process with data directory dataDir and returns its base URL.
func startServe(t *testing.T, bin, db, dataDir string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--db", db, "--data", dataDir, "--workers", "0", "--dev", "--addr", "127.0.0.1:0", "--rate-limit", "-1")
	cmd.Env = append(os.Environ(), "AML_TEST_TRAINERS=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopOnCleanup(t, cmd)
	sc := bufio.NewScanner(stderr)
	var base string
	var said []string
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			base, _, _ = strings.Cut(rest, " ")
			break
		}
		said = append(said, sc.Text())
	}
	if base == "" {
		t.Fatalf("serve did not print its address; it said:\n%s", strings.Join(said, "\n"))
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }() // drain: the pipe ends when serve does
	return base
}

// httpJSON calls the serve API (tokenless: --dev from loopback) and decodes
// the JSON answer into v.
func httpJSON(t *testing.T, method, url, body string, want int, v any, token ...string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if len(token) > 0 {
		req.Header.Set("Authorization", "Bearer "+token[0])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	short := b[:min(len(b), 400)]
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s", method, url, res.StatusCode, short)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, short)
		}
	}
}

// TestMultiWorkerPostgres: one PostgreSQL, one `aml serve` (API only, no
// workers) and two `aml worker` processes, each with its own data
// directory (no shared filesystem). 20 jobs are submitted through the
// serve's HTTP API. One worker is SIGKILLed while it trains; River's
// rescuer hands its dispatch to the other worker, which requeues the lost
// job and runs it. Every job ends done exactly once, with exactly one model
// whose artifact is in the shared store, and the serve reports exactly
// that.
func TestMultiWorkerPostgres(t *testing.T) {
	u := pgURL(t)
	bin := buildBinary(t)
	t.Setenv("AML_TEST_TRAINERS", "1")
	d := t.TempDir()
	ds, _ := buildDataset(t, d, "--db", u)
	base := startServe(t, bin, u, t.TempDir())
	// A token made by the CLI on the database authenticates at the serve
	// (tokens live in PostgreSQL too); half the jobs are submitted with it.
	out, errs, code := aml(t, "token", "create", "--role", "engineer", "--name", "erin", "--db", u, "--data", t.TempDir(), "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var tk struct{ Token string }
	mustJSON(t, out, &tk)
	// The serve's event stream: the workers' job events reach it through
	// the PostgreSQL relay (the serve runs no job itself).
	doneSeen := watchDone(t, base)
	const n = 20
	var ids []string
	for i := 0; i < n; i++ {
		var j struct{ ID, Status, CreatedBy string }
		var tok []string
		if i%2 == 0 {
			tok = []string{tk.Token}
		}
		httpJSON(t, "POST", base+"/api/v1/jobs", `{"datasetId":"`+ds+`","trainer":"test_mean@1","params":{"steps":8,"stepMs":250}}`, 201, &j, tok...)
		if want := map[bool]string{true: "erin", false: "dev"}[i%2 == 0]; j.Status != "queued" || j.CreatedBy != want {
			t.Fatalf("submitted job %s is %s, by %s (want %s)", j.ID, j.Status, j.CreatedBy, want)
		}
		ids = append(ids, j.ID)
	}
	httpJSON(t, "GET", base+"/api/v1/jobs", "", 401, nil, "aml_not-a-token")
	ctx := context.Background()
	st, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	w1, w2 := startWorker(t, bin, u), startWorker(t, bin, u)
	id1, id2 := w1.ident(t), w2.ident(t)

	// Kill worker 1 once it has finished a job and is training another.
	var victim core.Job
	deadline := time.Now().Add(90 * time.Second)
	for victim.ID == "" {
		if time.Now().After(deadline) {
			t.Fatal("worker 1 never trained a second job")
		}
		js, err := st.ListJobs(ctx, core.JobFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		doneBy1 := 0
		var training *core.Job
		for i, j := range js {
			if j.Worker == id1 && j.Status == core.JobDone {
				doneBy1++
			}
			if j.Worker == id1 && j.Status == core.JobTraining && j.Progress > 0 {
				training = &js[i]
			}
		}
		if doneBy1 > 0 && training != nil {
			victim = *training
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := w1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w1.cmd.Wait() // "signal: killed"; reaped: its pid is dead, not a zombie
	killedAt := time.Now()

	// Every job ends; none stays active.
	var js []core.Job
	var rescuedAt time.Time // when the killed job left worker 1
	deadline = time.Now().Add(150 * time.Second)
	for {
		js, err = st.ListJobs(ctx, core.JobFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		ended := 0
		for _, j := range js {
			if j.Status.Terminal() {
				ended++
			}
			if j.ID == victim.ID && rescuedAt.IsZero() && (j.Worker != id1 || j.Status != victim.Status && !j.Status.Terminal() && j.RetryCount > 0) {
				rescuedAt = time.Now()
			}
		}
		if ended == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs ended after the kill", ended, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("all %d jobs ended %.1fs after worker 1 was killed", n, time.Since(killedAt).Seconds())
	byWorker := map[string]int{}
	jobs := map[string]core.Job{}
	for _, j := range js {
		jobs[j.ID] = j
		if j.Status != core.JobDone || j.ModelID == "" {
			t.Errorf("job %s ended %s (%s: %s)", j.ID, j.Status, j.ErrorCode, j.Error)
		}
		byWorker[j.Worker]++
	}
	if byWorker[id1] == 0 || byWorker[id2] == 0 {
		t.Errorf("jobs not spread across both workers: %v", byWorker)
	}
	// The victim was rescued: a second try, finished by worker 2.
	v := jobs[victim.ID]
	if v.Worker != id2 || v.RetryCount != 1 || v.Attempt != 2 {
		t.Errorf("killed job %s: worker %s retry %d attempt %d, want worker 2 (%s), retry 1, attempt 2", v.ID, v.Worker, v.RetryCount, v.Attempt, id2)
	}
	if !rescuedAt.IsZero() {
		t.Logf("the killed job was taken from the dead worker %.1fs after the kill", rescuedAt.Sub(killedAt).Seconds())
	}
	// Exactly one model per job, each artifact in the shared store under
	// its recorded hash.
	ms, err := st.ListModels(ctx, core.ModelFilter{})
	if err != nil {
		t.Fatal(err)
	}
	perJob := map[string]int{}
	arts, err := artifact.NewPostgres(ctx, st.Pool(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		perJob[m.JobID]++
		if jobs[m.JobID].ModelID != m.ID {
			t.Errorf("model %s is not job %s's model %s", m.ID, m.JobID, jobs[m.JobID].ModelID)
		}
		if _, err := arts.Fetch(ctx, m.ArtifactPath, m.ArtifactHash); err != nil {
			t.Errorf("model %s artifact: %v", m.ID, err)
		}
	}
	if len(ms) != n || len(perJob) != n {
		t.Errorf("%d models for %d jobs (per job %v)", len(ms), len(perJob), perJob)
	}
	// A River dispatch may still show running for a moment (completions
	// are recorded in batches) or until the rescuer's next pass (the killed
	// worker's finished-but-unrecorded dispatch); the invariant is on AML's
	// jobs: any such dispatch belongs to a job that has ended.
	rows, err := st.Pool().Query(ctx, `SELECT args->>'jobId' FROM river_job WHERE state = 'running'`)
	if err != nil {
		t.Fatal(err)
	}
	var stale int
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if !jobs[id].Status.Terminal() {
			t.Errorf("river dispatch running for job %s which is %s", id, jobs[id].Status)
		}
		stale++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	t.Logf("river dispatches still marked running (jobs ended): %d", stale)
	// The serve, which ran no job itself, reports the same outcome.
	var listed struct{ Items []core.Job }
	httpJSON(t, "GET", base+"/api/v1/jobs?limit=100", "", 200, &listed)
	doneListed := 0
	for _, j := range listed.Items {
		if j.Status == core.JobDone && j.ModelID == jobs[j.ID].ModelID {
			doneListed++
		}
	}
	var models struct{ Items []core.Model }
	httpJSON(t, "GET", base+"/api/v1/models", "", 200, &models)
	if doneListed != n || len(models.Items) != n {
		t.Errorf("serve reports %d done jobs and %d models, want %d each", doneListed, len(models.Items), n)
	}
	// Every job's end reached the serve's event stream from the workers.
	deadline = time.Now().Add(10 * time.Second)
	for {
		seen := doneSeen()
		missing := 0
		for _, id := range ids {
			if !seen[id] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the serve's event stream showed %d of %d jobs ending", n-missing, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// `job submit --wait` through the serve follows a job that a worker
	// process runs, to its end.
	out, errs, code = aml(t, "job", "submit", "--server", base, "--dataset", ds, "--trainer", "test_mean@1", "--params", `{"steps":4,"stepMs":100}`, "--wait", "--json")
	var waited struct{ Status string }
	mustJSON(t, out, &waited)
	if code != 0 || waited.Status != "done" {
		t.Fatalf("submit --wait through the serve: %d %s %s", code, errs, out)
	}
	fmt.Fprintf(os.Stderr, "multi-worker: jobs per worker %v, victim %s rescued\n", byWorker, victim.ID)
}

// TestParitySQLitePostgres: the same simulated input, spec and seed give
// the same dataset hash, and the same trainer the same model artifact hash
// and platform metrics, on SQLite and on PostgreSQL.
func TestParitySQLitePostgres(t *testing.T) {
	u := pgURL(t)
	type result struct {
		dsSHA, artifact string
		metrics         json.RawMessage
	}
	run := func(db ...string) result {
		d := t.TempDir()
		ds, sha := buildDataset(t, d, db...)
		out, errs, code := aml(t, append([]string{"job", "submit", "--dataset", ds, "--trainer", "one_step@1", "--seed", "11", "--wait", "--data", d, "--json"}, db...)...)
		if code != 0 {
			t.Fatalf("train %v: %s", db, errs)
		}
		var j struct{ ModelID string }
		mustJSON(t, out, &j)
		out, errs, code = aml(t, append([]string{"model", "list", "--data", d, "--json"}, db...)...)
		if code != 0 {
			t.Fatal(errs)
		}
		var ms []core.Model
		mustJSON(t, out, &ms)
		if len(ms) != 1 || ms[0].ID != j.ModelID {
			t.Fatalf("models %v: %+v", db, ms)
		}
		return result{dsSHA: sha, artifact: ms[0].ArtifactHash, metrics: ms[0].Metrics}
	}
	lite, pg := run(), run("--db", u)
	if lite.dsSHA != pg.dsSHA {
		t.Errorf("dataset sha256: sqlite %s, postgres %s", lite.dsSHA, pg.dsSHA)
	}
	if lite.artifact != pg.artifact {
		t.Errorf("model artifact hash: sqlite %s, postgres %s", lite.artifact, pg.artifact)
	}
	cl, _ := core.CanonicalJSON(lite.metrics)
	cp, _ := core.CanonicalJSON(pg.metrics)
	if string(cl) != string(cp) || len(cl) < 100 {
		t.Errorf("metrics differ:\nsqlite   %s\npostgres %s", cl, cp)
	}
	t.Logf("dataset %.12s, model %.12s, metrics %d bytes: identical on both back-ends", lite.dsSHA, lite.artifact, len(cl))
}

// TestDemoPostgres: the whole twin loop (aml demo: ingest, dataset,
// training, scene, shadow, twin gate, promotion, snapshot, optimiser,
// certificate issued, approved, executed) on PostgreSQL; then, from a data
// directory that never held the model or the dataset: a process with
// another signing key is refused (AML_CERT_KEY_MISMATCH), one with the
// deployment's key verifies the certificate and the audit chain, and runs
// a virtual trial (model and dataset files fetched from the database).
func TestDemoPostgres(t *testing.T) {
	skipTraining(t, "aml demo --db postgres://…")
	u := pgURL(t)
	d := t.TempDir()
	out, errs, code := aml(t, "demo", "--db", u, "--data", d, "--json")
	if code != 0 {
		t.Fatalf("demo on postgres: exit %d\n%s", code, errs)
	}
	var r demo.Result
	mustJSON(t, out, &r)
	t.Logf("demo on postgres: %.1f s, gate %v, improvement %.4g, written %d, certificate %s %s",
		r.Seconds, r.GatePassed, r.Improvement, r.Written, r.CertificateID, r.CertStatus)
	if !r.ModelGates || !r.GatePassed || r.Stage != "production" || r.CertStatus != "EXECUTED" || !r.CertVerified || r.Written < 1 || !(r.Improvement > 0) {
		t.Fatalf("demo result: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(d, "aml.db")); err == nil {
		t.Fatal("a SQLite store was created although --db was given")
	}

	other := t.TempDir()
	// No key in this data dir: refused, and no key file is made.
	if _, errs, code := aml(t, "cert", "verify", r.CertificateID, "--db", u, "--data", other); code != 1 || !strings.Contains(errs, twinstore.CodeKeyMismatch) || !strings.Contains(errs, "has no certificate signing key") {
		t.Fatalf("no signing key: %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(other, cert.KeyFileName)); err == nil {
		t.Fatal("a signing key was created although the deployment has one")
	}
	// Another key: refused, naming both.
	k, err := cert.LoadOrCreateKey(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, errs, code := aml(t, "cert", "verify", r.CertificateID, "--db", u, "--data", other); code != 1 || !strings.Contains(errs, twinstore.CodeKeyMismatch) || !strings.Contains(errs, k.ID) {
		t.Fatalf("another signing key: %d %s", code, errs)
	}
	key, err := os.ReadFile(filepath.Join(d, cert.KeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, cert.KeyFileName), key, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := aml(t, "cert", "verify", r.CertificateID, "--db", u, "--data", other); code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("cert verify with the deployment's key: %d %s %s", code, errs, out)
	}
	if _, errs, code := aml(t, "audit", "verify", "--db", u, "--data", other); code != 0 {
		t.Fatalf("audit verify: %d %s", code, errs)
	}
	out, errs, code = aml(t, "twin", "trial", "--model", r.ModelID, "--snapshot", r.SnapshotID, "--set", "hold_pressure=70", "--db", u, "--data", other, "--json")
	if code != 0 {
		t.Fatalf("trial from another data dir: %d %s", code, errs)
	}
	var tr struct {
		Trial struct{ TrialID, ModelID string } `json:"trial"`
	}
	mustJSON(t, out, &tr)
	if tr.Trial.TrialID == "" || tr.Trial.ModelID != r.ModelID {
		t.Fatalf("trial: %s", out[:min(len(out), 400)])
	}

	// aml serve on the same database, from a third data directory holding
	// only the deployment's key: the API and the UI show the demo's
	// records (model card with its stage, the certificate verified, the
	// trial, the audit chain).
	served := t.TempDir()
	if err := os.WriteFile(filepath.Join(served, cert.KeyFileName), key, 0o600); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, buildBinary(t), u, served)
	var info struct{ Database string }
	httpJSON(t, "GET", base+"/api/v1/info", "", 200, &info)
	if !strings.HasPrefix(info.Database, "postgres://") {
		t.Errorf("info: database %q", info.Database)
	}
	var m struct {
		Model struct{ Stage string } `json:"model"`
	}
	httpJSON(t, "GET", base+"/api/v1/models/"+r.ModelID, "", 200, &m)
	var c struct {
		Certificate struct{ Status string } `json:"certificate"`
	}
	httpJSON(t, "GET", base+"/api/v1/certificates/"+r.CertificateID, "", 200, &c)
	var av struct{ OK bool }
	httpJSON(t, "GET", base+"/api/v1/audit/verify", "", 200, &av)
	httpJSON(t, "GET", base+"/api/v1/trials/"+tr.Trial.TrialID, "", 200, nil)
	if m.Model.Stage != "production" || c.Certificate.Status != "EXECUTED" || !av.OK {
		t.Errorf("served: model stage %q, certificate %q, audit ok %v", m.Model.Stage, c.Certificate.Status, av.OK)
	}
	for _, page := range []string{"/ui/models/" + r.ModelID, "/ui/trials/" + r.TrialID, "/ui/certificates/" + r.CertificateID, "/ui/audit"} {
		res, err := http.Get(base + page)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || (strings.Contains(page, "models") && !strings.Contains(string(b), "<svg")) {
			t.Errorf("page %s: %d (%d bytes)", page, res.StatusCode, len(b))
		}
	}
}

// watchDone subscribes to the serve's event stream (job.state) and returns
// a function giving the ids of the jobs seen ending done so far.
func watchDone(t *testing.T, base string) func() map[string]bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/events?kinds=job.state", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("event stream: %v %v", res, err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e struct {
				ID   string
				Data struct{ Status string }
			}
			if json.Unmarshal([]byte(data), &e) == nil && e.Data.Status == "done" {
				mu.Lock()
				seen[e.ID] = true
				mu.Unlock()
			}
		}
	}()
	return func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}
