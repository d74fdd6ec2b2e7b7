// Package retention deletes what has outlived its use: unreferenced
// datasets older than an age, the artifacts of models retired longer than
// an age (the registry row stays, marked pruned), and the directories of
// failed, cancelled, timed-out or interrupted jobs that ended longer ago than
// an age (the job row stays).
//
// Upstream scanned only the newest rows, so old items were never collected.
// Here every listing is ordered oldest first and paged with a keyset
// cursor, so a run reaches every eligible item however many there are.
package retention

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// Store is what retention needs.
type Store interface {
	core.Datasets
	core.Jobs
	ListEndedJobsBefore(ctx context.Context, before time.Time, afterEnded int64, afterID string, limit int) ([]core.Job, error)
	ListRetiredModelsBefore(ctx context.Context, before time.Time) ([]core.Model, error)
}

// Policy holds the ages; a zero age disables that kind.
type Policy struct {
	DatasetAge time.Duration `json:"datasetAge"`
	ModelAge   time.Duration `json:"modelAge"`
	JobAge     time.Duration `json:"jobAge"`
	DryRun     bool          `json:"dryRun"`
}

// Report lists what was (or, in a dry run, would be) removed.
type Report struct {
	Datasets       []string `json:"datasets"`
	SkippedInUse   []string `json:"skippedInUse"`
	ModelArtifacts []string `json:"modelArtifacts"`
	JobDirs        []string `json:"jobDirs"`
	Bytes          int64    `json:"bytes"`
	DryRun         bool     `json:"dryRun"`
	// SharedCollected is what was collected from the shared artifact store
	// (PostgreSQL) after the deletions; nil on SQLite and in a dry run.
	SharedCollected *artifact.Collected `json:"sharedCollected,omitempty"`
}

// dirSize is the bytes under p, for the report: what cannot be read is
// not counted (the callback never stops the walk, so it returns nil).
func dirSize(p string) int64 {
	var n int64
	_ = filepath.Walk(p, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// Run applies the policy at time now.
func Run(ctx context.Context, st Store, dataDir string, p Policy, now time.Time) (Report, error) {
	rep := Report{Datasets: []string{}, SkippedInUse: []string{}, ModelArtifacts: []string{}, JobDirs: []string{}, DryRun: p.DryRun}
	if p.JobAge > 0 {
		var afterEnded int64 = -1 << 62
		afterID := ""
		for {
			js, err := st.ListEndedJobsBefore(ctx, now.Add(-p.JobAge), afterEnded, afterID, 500)
			if err != nil {
				return rep, err
			}
			for _, j := range js {
				dir := filepath.Join(dataDir, "jobs", j.ID)
				if _, err := os.Stat(dir); err == nil {
					rep.Bytes += dirSize(dir)
					rep.JobDirs = append(rep.JobDirs, j.ID)
					if !p.DryRun {
						if err := os.RemoveAll(dir); err != nil {
							return rep, core.Wrap(core.CodeInternal, err, "remove job dir %s", j.ID)
						}
					}
				}
				afterEnded, afterID = j.EndedAt.UnixMilli(), j.ID
			}
			if len(js) < 500 {
				break
			}
		}
	}
	if p.ModelAge > 0 {
		ms, err := st.ListRetiredModelsBefore(ctx, now.Add(-p.ModelAge))
		if err != nil {
			return rep, err
		}
		for _, m := range ms {
			dir := m.ArtifactPath
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(dataDir, filepath.FromSlash(dir))
			}
			rep.Bytes += dirSize(dir)
			rep.ModelArtifacts = append(rep.ModelArtifacts, m.ID)
			if !p.DryRun {
				if err := os.RemoveAll(dir); err != nil {
					return rep, core.Wrap(core.CodeInternal, err, "remove artifacts of %s", m.ID)
				}
				// On PostgreSQL the files also live in the shared store
				// (local bytes are only this machine's copy).
				if shared, err := artifact.For(ctx, st, dataDir); err != nil {
					return rep, err
				} else if shared != nil && !filepath.IsAbs(m.ArtifactPath) {
					if err := shared.Delete(ctx, m.ArtifactPath); err != nil {
						return rep, err
					}
				}
				if err := st.MarkModelPruned(ctx, m.ID); err != nil {
					return rep, err
				}
			}
		}
	}
	if p.DatasetAge > 0 {
		ds, err := st.ListDatasets(ctx, core.DatasetFilter{}) // oldest first, no limit
		if err != nil {
			return rep, err
		}
		cut := now.Add(-p.DatasetAge)
		for _, d := range ds {
			if !d.CreatedAt.Before(cut) {
				break
			}
			refs, err := st.ListDatasetRefs(ctx, d.ID)
			if err != nil {
				return rep, err
			}
			if len(refs) > 0 {
				rep.SkippedInUse = append(rep.SkippedInUse, d.ID)
				continue
			}
			rep.Bytes += d.Bytes
			rep.Datasets = append(rep.Datasets, d.ID)
			if !p.DryRun {
				if err := dataset.Delete(ctx, st, dataDir, d.ID); err != nil {
					if core.CodeOf(err) == core.CodeInUse { // referenced meanwhile
						rep.Datasets = rep.Datasets[:len(rep.Datasets)-1]
						rep.SkippedInUse = append(rep.SkippedInUse, d.ID)
						continue
					}
					return rep, err
				}
			}
		}
	}
	// On PostgreSQL, deleting a dataset or pruning a model removes its
	// tree from the shared artifact store; the chunks no tree references
	// any more are collected here (bytes counted in SharedCollected).
	if !p.DryRun {
		shared, err := artifact.For(ctx, st, dataDir)
		if err != nil {
			return rep, err
		}
		if c, ok := shared.(interface {
			Collect(context.Context) (artifact.Collected, error)
		}); ok {
			got, err := c.Collect(ctx)
			if err != nil {
				return rep, err
			}
			rep.SharedCollected = &got
		}
	}
	return rep, nil
}
