package retention

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// testNow is the clock of every retention run here: the policy compares
// ages against it, never against the wall clock.
var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// TestReachesTheOldest creates more old items than any page, plus new
// ones, and checks that every old eligible item is collected and nothing
// else.
func TestReachesTheOldest(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	now := testNow
	old := now.Add(-90 * 24 * time.Hour)
	mkDataset := func(id string, at time.Time) {
		if err := os.MkdirAll(filepath.Join(dir, "datasets", id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "datasets", id, "manifest.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := st.InsertDataset(ctx, core.Dataset{ID: id, LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "p", Path: "datasets/" + id,
			SHA256: strings.Repeat("a", 64), SpecJSON: "{}", CreatedBy: "t", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	mkDataset("ds-old-free", old)
	mkDataset("ds-old-used", old)
	mkDataset("ds-new", now)
	// 1200 old failed jobs (more than two pages) and 10 recent ones.
	const nOld = 1200
	for i := 0; i < nOld+10; i++ {
		id := fmt.Sprintf("job-%04d", i)
		if err := st.CreateJob(ctx, core.Job{ID: id, DatasetID: "ds-old-used", DatasetSHA256: strings.Repeat("a", 64), TrainerRef: "x", MaxRetries: 2, TimeoutSec: 1, StallSec: 1}, core.JobLimits{}); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "jobs", id, "logs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "jobs", id, "logs", "trainer.log"), []byte("log\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := st.EndJob(ctx, id, core.JobQueued, core.JobFailed, "E", "e"); err != nil {
			t.Fatal(err)
		}
		at := old.Add(time.Duration(i) * time.Minute)
		if i >= nOld {
			at = now
		}
		if _, err := st.DB().Exec(`UPDATE jobs SET ended_at=? WHERE id=?`, at.UnixMilli(), id); err != nil {
			t.Fatal(err)
		}
	}
	pol := Policy{DatasetAge: 30 * 24 * time.Hour, JobAge: 30 * 24 * time.Hour, ModelAge: 30 * 24 * time.Hour, DryRun: true}
	rep, err := Run(ctx, st, dir, pol, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.JobDirs) != nOld || len(rep.Datasets) != 1 || rep.Datasets[0] != "ds-old-free" || len(rep.SkippedInUse) != 1 {
		t.Fatalf("dry run: %d job dirs, datasets %v, in use %v", len(rep.JobDirs), rep.Datasets, rep.SkippedInUse)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", "job-0000")); err != nil {
		t.Fatal("dry run removed files")
	}
	pol.DryRun = false
	if rep, err = Run(ctx, st, dir, pol, now); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"job-0000", "job-0599", fmt.Sprintf("job-%04d", nOld-1)} {
		if _, err := os.Stat(filepath.Join(dir, "jobs", id)); !os.IsNotExist(err) {
			t.Fatalf("old job dir %s kept", id)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", fmt.Sprintf("job-%04d", nOld))); err != nil {
		t.Fatal("recent job dir removed")
	}
	if _, err := st.GetDataset(ctx, "ds-old-free"); core.CodeOf(err) != core.CodeNotFound {
		t.Fatal("old unreferenced dataset kept")
	}
	for _, id := range []string{"ds-old-used", "ds-new"} {
		if _, err := st.GetDataset(ctx, id); err != nil {
			t.Fatalf("%s removed: %v", id, err)
		}
	}
	if _, err := st.GetJob(ctx, "job-0000"); err != nil {
		t.Fatal("job row removed with its dir")
	}
	// A second run finds nothing more.
	if rep, err = Run(ctx, st, dir, pol, now); err != nil {
		t.Fatal(err)
	}
	if len(rep.JobDirs) != 0 || len(rep.Datasets) != 0 {
		t.Fatalf("second run: %+v", rep)
	}
}

func TestRetiredModelArtifactsPruned(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	if err := st.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "p", Path: "datasets/ds", SHA256: strings.Repeat("a", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
		t.Fatal(err)
	}
	for i, stage := range []string{core.StageRetired, core.StageRetired, core.StageCandidate} {
		id := fmt.Sprintf("j%d", i)
		if err := st.CreateJob(ctx, core.Job{ID: id, DatasetID: "ds", DatasetSHA256: strings.Repeat("a", 64), TrainerRef: "x", MaxRetries: 2, TimeoutSec: 1, StallSec: 1}, core.JobLimits{}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ClaimJob(ctx, id, "w"); err != nil {
			t.Fatal(err)
		}
		art := filepath.Join("jobs", id, "artifacts")
		if err := os.MkdirAll(filepath.Join(dir, art), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, art, "model.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		m := &core.Model{ID: "m" + id, JobID: id, DatasetID: "ds", LineID: "L", ProductID: "P", RecipeID: "R", Purpose: "p", TrainerRef: "x",
			ArtifactKind: "k", ArtifactPath: art, ArtifactHash: strings.Repeat("c", 64)}
		if err := st.FinishJob(ctx, id, "w", core.JobProvisioning, nil, nil, false, art, m); err != nil {
			t.Fatal(err)
		}
		if stage == core.StageRetired {
			if err := st.MoveModelStage(ctx, m.ID, core.StageCandidate, core.StageRetired, "t", ""); err != nil {
				t.Fatal(err)
			}
		}
		at := testNow.Add(-100 * 24 * time.Hour)
		if i == 1 {
			at = testNow // retired just now: kept
		}
		if _, err := st.DB().Exec(`UPDATE models SET stage_changed_at=? WHERE id=?`, at.UnixMilli(), m.ID); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Run(ctx, st, dir, Policy{ModelAge: 30 * 24 * time.Hour}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.ModelArtifacts) != 1 || rep.ModelArtifacts[0] != "mj0" {
		t.Fatalf("pruned %v", rep.ModelArtifacts)
	}
	m, _ := st.GetModel(ctx, "mj0")
	if !m.ArtifactsPruned {
		t.Fatal("not marked pruned")
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", "j0", "artifacts")); !os.IsNotExist(err) {
		t.Fatal("artifacts kept")
	}
	for _, id := range []string{"j1", "j2"} {
		if _, err := os.Stat(filepath.Join(dir, "jobs", id, "artifacts", "model.json")); err != nil {
			t.Fatalf("%s artifacts removed", id)
		}
	}
}
