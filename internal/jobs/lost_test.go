package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// TestWorkerLost: when a job's worker counts as lost (its job is then
// requeued or interrupted). A job of this very runner never does — River's
// retry dispatch of a long job can land on the worker still training it.
func TestWorkerLost(t *testing.T) {
	host, _ := os.Hostname()
	self := fmt.Sprintf("%s/%d/aaaaaa", host, os.Getpid())
	now := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	fresh, stale := now.Add(-time.Second), now.Add(-time.Hour)
	// A pid that is not running: the largest pid the kernel would hand out
	// is far below this.
	dead := fmt.Sprintf("%s/%d/bbbbbb", host, 1<<30)
	cases := []struct {
		name   string
		worker string
		hb     *time.Time
		lost   bool
	}{
		{"this runner, fresh heartbeat", self, &fresh, false},
		{"this runner, stale heartbeat", self, &stale, false},
		{"this pid, another identity (an earlier life)", fmt.Sprintf("%s/%d/cccccc", host, os.Getpid()), &fresh, true},
		{"this host, dead pid", dead, &fresh, true},
		{"this host, live pid (pid 1), fresh", host + "/1/dddddd", &fresh, false},
		{"other host, fresh heartbeat", "elsewhere/42/eeeeee", &fresh, false},
		{"other host, stale heartbeat", "elsewhere/42/eeeeee", &stale, true},
		{"other host, no heartbeat", "elsewhere/42/eeeeee", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := core.Job{Worker: c.worker, HeartbeatAt: c.hb}
			if got := workerLost(j, self, host, time.Minute, now); got != c.lost {
				t.Fatalf("workerLost(%s) = %v, want %v", c.worker, got, c.lost)
			}
		})
	}
}

// TestRescueKeepsLiveJobs: what a rescued River dispatch does with the AML
// job it names (queue_pg.go). A job this very runner is training is left
// alone (River re-dispatches any training longer than RescueAfter, and the
// retry may land on the same worker); a job of a dead worker is requeued
// as a new try.
func TestRescueKeepsLiveJobs(t *testing.T) {
	st, dir, ds := tinyFixture(t)
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	r := NewRunner(st, Options{DataDir: dir, Trainers: NewTrainers(TestMeanTrainer{})})
	host, _ := os.Hostname()
	submit := func(worker string) core.Job {
		t.Helper()
		j, err := r.Submit(ctx, SubmitRequest{DatasetID: ds, TrainerRef: "test_mean@1"})
		if err != nil {
			t.Fatal(err)
		}
		if j, err = st.ClaimJob(ctx, j.ID, worker); err != nil {
			t.Fatal(err)
		}
		return j
	}

	mine := submit(r.Worker())
	again, err := r.rescue(ctx, mine.ID, 0, time.Minute)
	if err != nil || again != time.Minute {
		t.Fatalf("rescue of this runner's own job: again %v, %v", again, err)
	}
	if j, _ := st.GetJob(ctx, mine.ID); j.Status != mine.Status || j.RetryCount != 0 || j.Worker != r.Worker() {
		t.Fatalf("this runner's live job was touched: %s retry %d worker %s", j.Status, j.RetryCount, j.Worker)
	}

	lost := submit(fmt.Sprintf("%s/%d/ffffff", host, 1<<30))
	if _, err := r.rescue(ctx, lost.ID, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if j, _ := st.GetJob(ctx, lost.ID); j.Status != core.JobQueued || j.RetryCount != 1 || j.ErrorCode != core.CodeWorkerLost {
		t.Fatalf("dead worker's job: %s retry %d %s", j.Status, j.RetryCount, j.ErrorCode)
	}
}

// TestFencedAttemptStops: when another worker takes a job over (this
// worker was judged lost: a heartbeat stall longer than the limit), the
// stalled attempt notices at its next heartbeat, stops, and leaves the job
// as the new owner has it — no state change, no model.
func TestFencedAttemptStops(t *testing.T) {
	st, dir, ds := tinyFixture(t)
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	r := NewRunner(st, Options{DataDir: dir, Trainers: NewTrainers(TestMeanTrainer{}), HeartbeatEvery: 50 * time.Millisecond})
	j, err := r.Submit(ctx, SubmitRequest{DatasetID: ds, TrainerRef: "test_mean@1", Params: json.RawMessage(`{"steps":200,"stepMs":50}`)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, j.ID, 0) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, _ := st.GetJob(ctx, j.ID)
		if cur.Status == core.JobTraining && cur.Progress > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job never trained: %s", cur.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Another worker's lost-worker check requeues it, and claims it.
	if err := st.RequeueJob(ctx, j.ID, core.JobTraining, core.CodeWorkerLost, "worker judged lost"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimJob(ctx, j.ID, "elsewhere/1/000000"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fenced attempt kept running")
	}
	cur, _ := st.GetJob(ctx, j.ID)
	if cur.Status != core.JobProvisioning || cur.Worker != "elsewhere/1/000000" || cur.Attempt != 2 || cur.ModelID != "" {
		t.Fatalf("after the fenced attempt stopped: %s worker %s attempt %d model %q", cur.Status, cur.Worker, cur.Attempt, cur.ModelID)
	}
	if ms, _ := st.ListModels(ctx, core.ModelFilter{}); len(ms) != 0 {
		t.Fatalf("the fenced attempt registered a model: %+v", ms)
	}
}
