package sim

import (
	"bufio"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/aml-project/aml/internal/core"
)

// WriteBatchSize is the number of samples per IngestTx.Write call.
const WriteBatchSize = 10_000

// ConfirmedBy is the ConfirmedBy of the context segments Write adds.
const ConfirmedBy = "sim"

// WriteSummary reports what [Output.Write] did.
type WriteSummary struct {
	Runs          int    `json:"runs"`          // runs written (created or re-written)
	RunsCreated   int    `json:"runsCreated"`   // of which did not exist before
	Samples       int    `json:"samples"`       // samples written
	Nodes         int    `json:"nodes"`         // nodes upserted
	SegmentsAdded int    `json:"segmentsAdded"` // context segments added
	RecipeVersion int    `json:"recipeVersion"` // version PutRecipeVersion returned
	ContentHash   string `json:"contentHash"`   // its content hash
}

// Write stores the data set: line, product and recipe (Ensure*), the recipe
// parameters as a recipe version, every node (UpsertNode), then each run in
// its own Ingest transaction (EnsureRun with the stored recipe version, then
// the samples in batches of WriteBatchSize), followed by a context segment
// over the run's span confirmed by "sim". progress, when not nil, is called
// after each run.
//
// Writing the same output again is idempotent: existing runs are kept, their
// samples are replaced (same node and timestamp), and no duplicate context
// segment is added. A run id that already exists with another line,
// product, recipe or time span is an AML_CONFLICT error (samples of a
// different configuration must not be mixed into it).
func (o *Output) Write(ctx context.Context, st core.SeriesStore, progress func(doneRuns, totalRuns int)) (WriteSummary, error) {
	var sum WriteSummary
	if err := ctx.Err(); err != nil {
		return sum, err
	}
	if err := st.EnsureLine(ctx, o.Line); err != nil {
		return sum, core.Wrap(core.CodeInternal, err, "ensure line %s", o.Line.ID)
	}
	if err := st.EnsureProduct(ctx, o.Product); err != nil {
		return sum, core.Wrap(core.CodeInternal, err, "ensure product %s", o.Product.ID)
	}
	if err := st.EnsureRecipe(ctx, o.Recipe); err != nil {
		return sum, core.Wrap(core.CodeInternal, err, "ensure recipe %s", o.Recipe.ID)
	}
	rv, err := st.PutRecipeVersion(ctx, o.Recipe.ID, o.RecipeParams)
	if err != nil {
		return sum, core.Wrap(core.CodeInternal, err, "put recipe version of %s", o.Recipe.ID)
	}
	if rv.ContentHash == "" {
		if rv.ContentHash, err = core.CanonicalHash(o.RecipeParams); err != nil {
			return sum, err
		}
	}
	sum.RecipeVersion, sum.ContentHash = rv.Version, rv.ContentHash
	for _, n := range o.Nodes {
		if err := st.UpsertNode(ctx, n); err != nil {
			return sum, core.Wrap(core.CodeInternal, err, "upsert node %s", n.ID)
		}
		sum.Nodes++
	}

	for i := range o.Runs {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		created, added, err := writeRun(ctx, st, &o.Runs[i], rv)
		if err != nil {
			return sum, err
		}
		sum.Runs++
		sum.Samples += len(o.Runs[i].Samples)
		if created {
			sum.RunsCreated++
		}
		if added {
			sum.SegmentsAdded++
		}
		if progress != nil {
			progress(i+1, len(o.Runs))
		}
	}
	return sum, nil
}

// writeRun writes one run and its context segment; it reports whether the
// run was created and whether a segment was added.
func writeRun(ctx context.Context, st core.SeriesStore, rd *RunData, rv core.RecipeVersion) (created, added bool, err error) {
	run := rd.Run
	version := rv.Version
	run.RecipeVersion = &version

	// Refuse to mix samples into a different run of the same id. Checked
	// before the transaction: a store may serialise all access on it.
	switch old, err := st.GetRun(ctx, run.ID); {
	case err == nil:
		if old.LineID != run.LineID || old.ProductID != run.ProductID || old.RecipeID != run.RecipeID ||
			old.StartedMs != run.StartedMs || old.EndedMs == nil || *old.EndedMs != *run.EndedMs {
			return false, false, core.FieldErrorf(core.CodeConflict, FieldRecipe,
				"run %s already exists with another context or time span; use another recipe id or an empty store", run.ID)
		}
	case core.CodeOf(err) != core.CodeNotFound:
		return false, false, core.Wrap(core.CodeInternal, err, "get run %s", run.ID)
	}

	err = st.Ingest(ctx, func(tx core.IngestTx) error {
		c, err := tx.EnsureRun(run)
		if err != nil {
			return core.Wrap(core.CodeInternal, err, "ensure run %s", run.ID)
		}
		created = c
		for from := 0; from < len(rd.Samples); from += WriteBatchSize {
			to := min(from+WriteBatchSize, len(rd.Samples))
			if _, err := tx.Write(rd.Samples[from:to]); err != nil {
				return core.Wrap(core.CodeInternal, err, "write samples of run %s", run.ID)
			}
		}
		return nil
	})
	if err != nil {
		return false, false, err
	}

	segs, err := st.ListContextSegments(ctx, run.ID)
	if err != nil {
		return created, false, core.Wrap(core.CodeInternal, err, "list context segments of run %s", run.ID)
	}
	for _, s := range segs {
		if s.RecipeID == run.RecipeID && s.RecipeVersion == rv.Version && s.ContentHash == rv.ContentHash &&
			s.FromMs == run.StartedMs && s.ToMs != nil && *s.ToMs == *run.EndedMs {
			return created, false, nil
		}
	}
	to := *run.EndedMs
	_, err = st.AddContextSegment(ctx, core.ContextSegment{
		RunID: run.ID, RecipeID: run.RecipeID, RecipeVersion: rv.Version, ContentHash: rv.ContentHash,
		FromMs: run.StartedMs, ToMs: &to, ConfirmedBy: ConfirmedBy,
	})
	if err != nil {
		return created, false, core.Wrap(core.CodeInternal, err, "add context segment of run %s", run.ID)
	}
	return created, true, nil
}

// NodesCSV is the name of the node table WriteCSV writes.
const NodesCSV = "nodes.csv"

var fileIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// WriteCSV writes one long-format CSV per run, <run id>.csv with header
// time,node,value,state (time in epoch ms, values in strconv 'g' -1 form),
// and nodes.csv (id,unit,min,max,kind,meaning), into dir (created if
// missing). Each file is written to a temporary file in dir and renamed into
// place. It returns the paths written, runs first, nodes.csv last.
func (o *Output) WriteCSV(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, core.Wrap(core.CodeInvalidArgument, err, "create %s", dir)
	}
	var paths []string
	for i := range o.Runs {
		rd := &o.Runs[i]
		if !fileIDPattern.MatchString(rd.Run.ID) {
			return paths, core.Errorf(core.CodeInvalidArgument, "run id %q is not a safe file name", rd.Run.ID)
		}
		path := filepath.Join(dir, rd.Run.ID+".csv")
		err := writeAtomic(path, func(w *bufio.Writer) error {
			w.WriteString("time,node,value,state\n")
			var buf []byte
			for _, s := range rd.Samples {
				buf = strconv.AppendInt(buf[:0], core.UsToMs(s.TsUs), 10) // the simulator samples on whole ms
				buf = append(buf, ',')
				buf = append(buf, s.Node...)
				buf = append(buf, ',')
				buf = strconv.AppendFloat(buf, s.Value, 'g', -1, 64)
				buf = append(buf, ',')
				buf = append(buf, s.State...)
				buf = append(buf, '\n')
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}

	path := filepath.Join(dir, NodesCSV)
	err := writeAtomic(path, func(w *bufio.Writer) error {
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"id", "unit", "min", "max", "kind", "meaning"})
		for _, n := range o.Nodes {
			_ = cw.Write([]string{n.ID, n.Unit, formatOpt(n.Min), formatOpt(n.Max), n.Kind, n.Meaning})
		}
		cw.Flush()
		return cw.Error()
	})
	if err != nil {
		return paths, err
	}
	return append(paths, path), nil
}

func formatOpt(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

// writeAtomic writes path through a temporary file in the same directory,
// synced and renamed into place; on failure the temporary file is removed.
func writeAtomic(path string, fill func(w *bufio.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "create temporary file for %s", path)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			_ = os.Remove(tmp) // best effort: err is what is returned
		}
	}()
	w := bufio.NewWriterSize(f, 1<<16)
	if err = fill(w); err != nil {
		return core.Wrap(core.CodeInternal, err, "write %s", path)
	}
	if err = w.Flush(); err != nil {
		return core.Wrap(core.CodeInternal, err, "write %s", path)
	}
	if err = f.Chmod(0o644); err != nil {
		return core.Wrap(core.CodeInternal, err, "chmod %s", path)
	}
	if err = f.Sync(); err != nil {
		return core.Wrap(core.CodeInternal, err, "sync %s", path)
	}
	if err = f.Close(); err != nil {
		return core.Wrap(core.CodeInternal, err, "close %s", path)
	}
	if err = os.Rename(tmp, path); err != nil {
		return core.Wrap(core.CodeInternal, err, "rename %s", path)
	}
	return nil
}
