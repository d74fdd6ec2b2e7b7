package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

func seedDataset(t testing.TB, s *Store, id string) {
	t.Helper()
	err := s.InsertDataset(context.Background(), core.Dataset{ID: id, LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		Path: "datasets/" + id, SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"})
	if err != nil {
		t.Fatal(err)
	}
}

func newJob(id string) core.Job {
	return core.Job{ID: id, DatasetID: "ds", DatasetSHA256: strings.Repeat("b", 64), TrainerRef: "test_mean@1", MaxRetries: 2, TimeoutSec: 60, StallSec: 60}
}

func testModel(id, job string) *core.Model {
	return &core.Model{ID: id, JobID: job, DatasetID: "ds", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
		TrainerRef: "test_mean@1", ArtifactKind: "aml.mean/1", ArtifactPath: "models/" + id, ArtifactHash: strings.Repeat("c", 64), GatePassed: true}
}

// TestJobStateMachineProperty drives many jobs through random operation
// sequences and checks the invariants after every step: a terminal status
// is never left, done is entered only from evaluating or provisioning and
// always with a model, and the DB agrees with the table.
func TestJobStateMachineProperty(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	rng := rand.New(rand.NewPCG(42, 7))
	all := core.AllJobStatuses
	for k := 0; k < 60; k++ {
		id := fmt.Sprintf("job-%d", k)
		if err := s.CreateJob(ctx, newJob(id), core.JobLimits{}); err != nil {
			t.Fatal(err)
		}
		prev := core.JobQueued
		for step := 0; step < 25; step++ {
			cur, _ := s.GetJob(ctx, id)
			var err error
			op := rng.IntN(7)
			switch op {
			case 0:
				_, err = s.ClaimJob(ctx, id, "w1")
			case 1:
				err = s.TransitionJob(ctx, id, "w1", cur.Status, all[rng.IntN(len(all))], "x")
			case 2:
				err = s.TransitionJob(ctx, id, "w1", all[rng.IntN(len(all))], all[rng.IntN(len(all))], "x") // maybe stale from
			case 3:
				err = s.EndJob(ctx, id, cur.Status, all[rng.IntN(len(all))], "E", "e")
			case 4:
				err = s.RequeueJob(ctx, id, cur.Status, "AML_WORKER_LOST", "lost")
			case 5:
				_, err = s.RequestCancel(ctx, id)
			case 6:
				err = s.FinishJob(ctx, id, "w1", cur.Status, nil, nil, true, "p", testModel(fmt.Sprintf("m-%d-%d", k, step), id))
			}
			after, gerr := s.GetJob(ctx, id)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if prev.Terminal() && after.Status != prev {
				t.Fatalf("job %s left terminal %s for %s (op %d)", id, prev, after.Status, op)
			}
			if after.Status != prev {
				ok := core.CanTransition(prev, after.Status) || (after.Status == core.JobQueued && core.CanRequeue(prev))
				if !ok {
					t.Fatalf("illegal %s → %s (op %d)", prev, after.Status, op)
				}
				if err != nil {
					t.Fatalf("status changed but op %d returned %v", op, err)
				}
			}
			if after.Status == core.JobDone {
				if after.ModelID == "" {
					t.Fatal("done without a model")
				}
				if _, err := s.GetModel(ctx, after.ModelID); err != nil {
					t.Fatalf("done job's model missing: %v", err)
				}
			}
			if after.Status.Terminal() && after.EndedAt == nil {
				t.Fatal("terminal without end time")
			}
			if after.RetryCount > after.MaxRetries {
				t.Fatalf("retries %d > max %d", after.RetryCount, after.MaxRetries)
			}
			prev = after.Status
		}
	}
	// Models registered by failed FinishJob calls must not exist.
	models, _ := s.ListModels(ctx, core.ModelFilter{})
	jobs, _ := s.ListJobs(ctx, core.JobFilter{})
	done := map[string]bool{}
	for _, j := range jobs {
		if j.Status == core.JobDone {
			done[j.ModelID] = true
		}
	}
	for _, m := range models {
		if !done[m.ID] {
			t.Fatalf("model %s registered without its job being done", m.ID)
		}
	}
}

func TestRacingTransitionsOneWinner(t *testing.T) {
	s, dir := openTest(t)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	s2, err := Open(dir) // a second "process"
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s2.Close(); err != nil {
			t.Error(err)
		}
	}()
	for k := 0; k < 20; k++ {
		id := fmt.Sprintf("race-%d", k)
		if err := s.CreateJob(ctx, newJob(id), core.JobLimits{}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wins := make(chan string, 4)
		for w, st := range []*Store{s, s2, s, s2} {
			wg.Add(1)
			go func(w int, st *Store) {
				defer wg.Done()
				if _, err := st.ClaimJob(ctx, id, fmt.Sprintf("w%d", w)); err == nil {
					wins <- fmt.Sprintf("w%d", w)
				} else if core.CodeOf(err) != core.CodeJobConflict {
					t.Errorf("claim: %v", err)
				}
			}(w, st)
		}
		wg.Wait()
		close(wins)
		if n := len(wins); n != 1 {
			t.Fatalf("%d workers claimed the same job", n)
		}
		// Two racing terminal transitions: one wins.
		var ok int
		var mu sync.Mutex
		for _, to := range []core.JobStatus{core.JobCancelled, core.JobTimeout} {
			wg.Add(1)
			go func(to core.JobStatus) {
				defer wg.Done()
				if err := s.EndJob(ctx, id, core.JobProvisioning, to, "", ""); err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}(to)
		}
		wg.Wait()
		if ok != 1 {
			t.Fatalf("%d terminal transitions won", ok)
		}
	}
}

func TestQueueLimitsAndCancel(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	lim := core.JobLimits{MaxQueued: 2, MaxPerDataset: 3}
	if err := s.CreateJob(ctx, newJob("a"), lim); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateJob(ctx, newJob("b"), lim); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateJob(ctx, newJob("c"), lim); core.CodeOf(err) != core.CodeQueueFull {
		t.Fatalf("queue cap: %v", err)
	}
	j, err := s.RequestCancel(ctx, "a")
	if err != nil || j.Status != core.JobCancelled {
		t.Fatalf("cancel queued: %+v %v", j, err)
	}
	if err := s.CreateJob(ctx, newJob("c"), lim); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateJob(ctx, newJob("d"), core.JobLimits{MaxPerDataset: 3}); core.CodeOf(err) != core.CodeQuotaExceeded {
		t.Fatalf("per-dataset cap: %v", err)
	}
	if _, err := s.ClaimJob(ctx, "b", "w"); err != nil {
		t.Fatal(err)
	}
	j, _ = s.RequestCancel(ctx, "b")
	if j.Status != core.JobProvisioning || !j.CancelRequest {
		t.Fatalf("cancel running: %+v", j)
	}
	if _, err := s.RequestCancel(ctx, "a"); core.CodeOf(err) != core.CodeJobConflict {
		t.Fatalf("cancel terminal: %v", err)
	}
	if err := s.ReportProgress(ctx, "b", "intruder", 0.5, ""); core.CodeOf(err) != core.CodeJobConflict {
		t.Fatalf("progress from another worker: %v", err)
	}
	if err := s.ReportProgress(ctx, "b", "w", 0.5, "fitting"); err != nil {
		t.Fatal(err)
	}
	// The dataset is referenced by its jobs: deletion refused.
	if err := s.DeleteDataset(ctx, "ds"); core.CodeOf(err) != core.CodeInUse {
		t.Fatalf("delete referenced dataset: %v", err)
	}
	// Requeue at most max_retries times.
	for i := 0; i < 2; i++ {
		if err := s.RequeueJob(ctx, "b", core.JobProvisioning, core.CodeWorkerLost, "lost"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClaimJob(ctx, "b", "w"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RequeueJob(ctx, "b", core.JobProvisioning, core.CodeWorkerLost, "lost"); core.CodeOf(err) != core.CodeJobConflict {
		t.Fatalf("third requeue: %v", err)
	}
}

// TestPromotionRace: many goroutines promote different candidates of the
// same key to production; the database never holds two production models.
func TestPromotionRace(t *testing.T) {
	s, dir := openTest(t)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	s2, _ := Open(dir)
	defer func() {
		if err := s2.Close(); err != nil {
			t.Error(err)
		}
	}()
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("j%d", i)
		if err := s.CreateJob(ctx, newJob(id), core.JobLimits{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClaimJob(ctx, id, "w"); err != nil {
			t.Fatal(err)
		}
		if err := s.TransitionJob(ctx, id, "w", core.JobProvisioning, core.JobTraining, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.TransitionJob(ctx, id, "w", core.JobTraining, core.JobEvaluating, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishJob(ctx, id, "w", core.JobEvaluating, nil, nil, true, "p", testModel(fmt.Sprintf("m%d", i), id)); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				st := s
				if i%2 == 1 {
					st = s2
				}
				m, err := st.GetModel(ctx, fmt.Sprintf("m%d", i))
				if err != nil || m.Stage == core.StageProduction || m.Stage == core.StageRetired {
					return
				}
				err = st.MoveModelStage(ctx, m.ID, m.Stage, core.StageProduction, "tester", "race")
				if err != nil && core.CodeOf(err) != core.CodeStageRace {
					t.Errorf("promote: %v", err)
				}
			}(i)
		}
		wg.Wait()
		prod, _ := s.ListModels(ctx, core.ModelFilter{Stage: core.StageProduction})
		if len(prod) != 1 {
			t.Fatalf("round %d: %d production models", round, len(prod))
		}
	}
	// Same-stage CAS: a stale expected stage loses.
	m, _ := s.GetModel(ctx, "m0")
	if err := s.MoveModelStage(ctx, "m0", core.StageCandidate, core.StageShadow, "x", ""); m.Stage != core.StageCandidate && core.CodeOf(err) != core.CodeStageRace && core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("stale CAS: %v", err)
	}
	// The unique index itself refuses a second production row.
	if _, err := s.w.Exec(`UPDATE models SET stage='production' WHERE stage<>'production'`); err == nil {
		t.Fatal("database accepted two production models")
	}
	h, _ := s.ModelHistory(ctx, "m1")
	_ = h
}

func TestStageReportKeepsProgress(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	if err := s.CreateJob(ctx, newJob("j"), core.JobLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimJob(ctx, "j", "w"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReportProgress(ctx, "j", "w", 0.6, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.ReportProgress(ctx, "j", "w", -1, "fitting"); err != nil {
		t.Fatal(err)
	}
	j, _ := s.GetJob(ctx, "j")
	if j.Progress != 0.6 || j.Stage != "fitting" {
		t.Fatalf("progress %v stage %q", j.Progress, j.Stage)
	}
}
