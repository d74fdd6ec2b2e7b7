package storetest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// The cases below race two handles on one database (two processes in
// production) through the few read-then-write transactions of the core
// records. SQLite's single writer serialises them by itself; on PostgreSQL
// each relies on a lock of its own (internal/store/records: the recipe
// row, the named job-limit lock, the dataset row), and fails without it.

// testRecipeVersionRace: concurrent new versions of one recipe are numbered
// 1..n without a gap, a duplicate or an error.
func testRecipeVersionRace(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.Again(t, s)
	ctx := context.Background()
	must(t, s.EnsureRecipe(ctx, core.Recipe{ID: "R1", LineID: "L1", ProductID: "P1"}))
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []int
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st := []core.Store{s, s2}[i%2]
			v, err := st.PutRecipeVersion(ctx, "R1", map[string]any{"i": i})
			if err != nil {
				t.Errorf("version %d: %v", i, err)
				return
			}
			mu.Lock()
			got = append(got, v.Version)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	sort.Ints(got)
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("versions %v, want 1..%d", got, n)
		}
	}
	if vs, err := s.ListRecipeVersions(ctx, "R1"); err != nil || len(vs) != n {
		t.Fatalf("%d versions listed, want %d: %v", len(vs), n, err)
	}
}

// testQueueLimitRace: jobs created at once on two handles never exceed
// the queue's limit, and the ones refused are AML_QUEUE_FULL.
func testQueueLimitRace(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.Again(t, s)
	ctx := context.Background()
	seedDataset(t, s, "ds")
	lim := core.JobLimits{MaxQueued: 5}
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			err := []core.Store{s, s2}[i%2].CreateJob(ctx, newJob(fmt.Sprintf("j%d", i)), lim)
			if err != nil && core.CodeOf(err) != core.CodeQueueFull {
				t.Errorf("create j%d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if l, _ := s.ListJobs(ctx, core.JobFilter{}); len(l) != lim.MaxQueued {
		t.Fatalf("%d jobs queued, limit %d", len(l), lim.MaxQueued)
	}
}

// testDeleteReferenceRace: deleting a dataset while another handle adds a
// reference to it ends one of two ways — deleted and the reference refused
// (AML_NOT_FOUND), or kept and the delete refused (AML_IN_USE) — never a
// reference to a deleted dataset, and never another error.
func testDeleteReferenceRace(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.Again(t, s)
	ctx := context.Background()
	for k := 0; k < 20; k++ {
		id := fmt.Sprintf("ds%d", k)
		seedDataset(t, s, id)
		var wg sync.WaitGroup
		var delErr, refErr error
		wg.Add(2)
		go func() { defer wg.Done(); delErr = s.DeleteDataset(ctx, id) }()
		go func() {
			defer wg.Done()
			refErr = s2.AddDatasetRef(ctx, core.DatasetRef{DatasetID: id, Kind: "job", RefID: "j"})
		}()
		wg.Wait()
		switch {
		case delErr == nil && core.CodeOf(refErr) == core.CodeNotFound:
			if _, err := s.GetDataset(ctx, id); core.CodeOf(err) != core.CodeNotFound {
				t.Fatalf("%s: deleted, yet %v", id, err)
			}
		case refErr == nil && core.CodeOf(delErr) == core.CodeInUse:
			if refs, _ := s.ListDatasetRefs(ctx, id); len(refs) != 1 {
				t.Fatalf("%s: kept with references %v", id, refs)
			}
		default:
			t.Fatalf("%s: delete %v, add reference %v", id, delErr, refErr)
		}
	}
}

// retention is what internal/retention pages through; both back-ends
// offer it (internal/store.Store).
type retention interface {
	ListEndedJobsBefore(ctx context.Context, before time.Time, afterEnded int64, afterID string, limit int) ([]core.Job, error)
	ListRetiredModelsBefore(ctx context.Context, before time.Time) ([]core.Model, error)
}

// testRetentionListings: ended jobs in a failure status are paged oldest
// first by (ended_at, id), however the pages fall; retired models whose
// artifacts are still there are listed, oldest first.
func testRetentionListings(t *testing.T, h Harness) {
	s := h.New(t)
	r, ok := s.(retention)
	if !ok {
		t.Fatalf("%T does not offer the retention listings", s)
	}
	ctx := context.Background()
	seedDataset(t, s, "ds")
	for i := 0; i < 7; i++ {
		id := fmt.Sprintf("f%d", i)
		must(t, s.CreateJob(ctx, newJob(id), core.JobLimits{}))
		must(t, s.EndJob(ctx, id, core.JobQueued, []core.JobStatus{core.JobFailed, core.JobCancelled, core.JobInterrupted}[i%3], "E", "e"))
	}
	must(t, s.CreateJob(ctx, newJob("live"), core.JobLimits{}))
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("d%d", i)
		must(t, s.CreateJob(ctx, newJob(id), core.JobLimits{}))
		if _, err := s.ClaimJob(ctx, id, "w"); err != nil {
			t.Fatal(err)
		}
		must(t, s.FinishJob(ctx, id, "w", core.JobProvisioning, nil, nil, true, "p", testModel("m"+id, id)))
	}
	future := time.Now().Add(time.Hour)
	var seen []string
	var afterEnded int64
	afterID := ""
	for pages := 0; ; pages++ {
		js, err := r.ListEndedJobsBefore(ctx, future, afterEnded, afterID, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(js) == 0 {
			break
		}
		for _, j := range js {
			seen = append(seen, j.ID)
			if !j.Status.Terminal() || j.Status == core.JobDone || j.EndedAt == nil {
				t.Fatalf("listed %s %s", j.ID, j.Status)
			}
			e := j.EndedAt.UnixMilli()
			if e < afterEnded || (e == afterEnded && j.ID <= afterID) {
				t.Fatalf("page %d goes back: %s at %d after (%d, %s)", pages, j.ID, e, afterEnded, afterID)
			}
			afterEnded, afterID = e, j.ID
		}
	}
	if len(seen) != 7 {
		t.Fatalf("ended jobs listed %v, want the 7 failures", seen)
	}
	if js, _ := r.ListEndedJobsBefore(ctx, time.Now().Add(-time.Hour), 0, "", 100); len(js) != 0 {
		t.Fatalf("jobs ended before an hour ago: %v", js)
	}
	must(t, s.MoveModelStage(ctx, "md0", core.StageCandidate, core.StageRetired, "t", "old"))
	must(t, s.MoveModelStage(ctx, "md1", core.StageCandidate, core.StageRetired, "t", "old"))
	must(t, s.MarkModelPruned(ctx, "md1"))
	ms, err := r.ListRetiredModelsBefore(ctx, future)
	if err != nil || len(ms) != 1 || ms[0].ID != "md0" {
		t.Fatalf("retired models %+v %v, want md0 (md1 is pruned, md2 is a candidate)", ms, err)
	}
	if ms, _ := r.ListRetiredModelsBefore(ctx, time.Now().Add(-time.Hour)); len(ms) != 0 {
		t.Fatalf("models retired before an hour ago: %+v", ms)
	}
}
