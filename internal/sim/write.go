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
	sum, rv, err := writeHeader(ctx, st, &o.Header)
	if err != nil {
		return sum, err
	}
	for i := range o.Runs {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		rd := &o.Runs[i]
		created, added, n, err := writeRun(ctx, st, rd.Run, rv, func(emit func([]core.Sample) error) error {
			for from := 0; from < len(rd.Samples); from += WriteBatchSize {
				if err := emit(rd.Samples[from:min(from+WriteBatchSize, len(rd.Samples))]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return sum, err
		}
		sum.add(created, added, n)
		if progress != nil {
			progress(i+1, len(o.Runs))
		}
	}
	return sum, nil
}

func (s *WriteSummary) add(created, added bool, samples int) {
	s.Runs++
	s.Samples += samples
	if created {
		s.RunsCreated++
	}
	if added {
		s.SegmentsAdded++
	}
}

// writeHeader stores line, product, recipe, the recipe version and the
// nodes of h.
func writeHeader(ctx context.Context, st core.SeriesStore, h *Header) (WriteSummary, core.RecipeVersion, error) {
	var sum WriteSummary
	if err := ctx.Err(); err != nil {
		return sum, core.RecipeVersion{}, err
	}
	if err := st.EnsureLine(ctx, h.Line); err != nil {
		return sum, core.RecipeVersion{}, core.Wrap(core.CodeInternal, err, "ensure line %s", h.Line.ID)
	}
	if err := st.EnsureProduct(ctx, h.Product); err != nil {
		return sum, core.RecipeVersion{}, core.Wrap(core.CodeInternal, err, "ensure product %s", h.Product.ID)
	}
	if err := st.EnsureRecipe(ctx, h.Recipe); err != nil {
		return sum, core.RecipeVersion{}, core.Wrap(core.CodeInternal, err, "ensure recipe %s", h.Recipe.ID)
	}
	rv, err := st.PutRecipeVersion(ctx, h.Recipe.ID, h.RecipeParams)
	if err != nil {
		return sum, rv, core.Wrap(core.CodeInternal, err, "put recipe version of %s", h.Recipe.ID)
	}
	if rv.ContentHash == "" {
		if rv.ContentHash, err = core.CanonicalHash(h.RecipeParams); err != nil {
			return sum, rv, err
		}
	}
	sum.RecipeVersion, sum.ContentHash = rv.Version, rv.ContentHash
	for _, n := range h.Nodes {
		if err := st.UpsertNode(ctx, n); err != nil {
			return sum, rv, core.Wrap(core.CodeInternal, err, "upsert node %s", n.ID)
		}
		sum.Nodes++
	}
	return sum, rv, nil
}

// writeRun writes one run, its samples as samples hands them to emit (in
// batches of at most WriteBatchSize, each free for reuse once emit
// returns), and its context segment; it reports whether the run was created,
// whether a segment was added and the number of samples written.
func writeRun(ctx context.Context, st core.SeriesStore, run core.Run, rv core.RecipeVersion, samples func(emit func([]core.Sample) error) error) (created, added bool, n int, err error) {
	version := rv.Version
	run.RecipeVersion = &version

	// Refuse to mix samples into a different run of the same id. Checked
	// before the transaction: a store may serialise all access on it.
	switch old, err := st.GetRun(ctx, run.ID); {
	case err == nil:
		if old.LineID != run.LineID || old.ProductID != run.ProductID || old.RecipeID != run.RecipeID ||
			old.StartedMs != run.StartedMs || old.EndedMs == nil || *old.EndedMs != *run.EndedMs {
			return false, false, 0, core.FieldErrorf(core.CodeConflict, FieldRecipe,
				"run %s already exists with another context or time span; use another recipe id or an empty store", run.ID)
		}
	case core.CodeOf(err) != core.CodeNotFound:
		return false, false, 0, core.Wrap(core.CodeInternal, err, "get run %s", run.ID)
	}

	err = st.Ingest(ctx, func(tx core.IngestTx) error {
		n = 0
		c, err := tx.EnsureRun(run)
		if err != nil {
			return core.Wrap(core.CodeInternal, err, "ensure run %s", run.ID)
		}
		created = c
		return samples(func(batch []core.Sample) error {
			if _, err := tx.Write(batch); err != nil {
				return core.Wrap(core.CodeInternal, err, "write samples of run %s", run.ID)
			}
			n += len(batch)
			return nil
		})
	})
	if err != nil {
		return false, false, 0, err
	}

	segs, err := st.ListContextSegments(ctx, run.ID)
	if err != nil {
		return created, false, n, core.Wrap(core.CodeInternal, err, "list context segments of run %s", run.ID)
	}
	for _, s := range segs {
		if s.RecipeID == run.RecipeID && s.RecipeVersion == rv.Version && s.ContentHash == rv.ContentHash &&
			s.FromMs == run.StartedMs && s.ToMs != nil && *s.ToMs == *run.EndedMs {
			return created, false, n, nil
		}
	}
	to := *run.EndedMs
	_, err = st.AddContextSegment(ctx, core.ContextSegment{
		RunID: run.ID, RecipeID: run.RecipeID, RecipeVersion: rv.Version, ContentHash: rv.ContentHash,
		FromMs: run.StartedMs, ToMs: &to, ConfirmedBy: ConfirmedBy,
	})
	if err != nil {
		return created, false, n, core.Wrap(core.CodeInternal, err, "add context segment of run %s", run.ID)
	}
	return created, true, n, nil
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
		f, err := createRunCSV(dir, rd.Run.ID)
		if err != nil {
			return paths, err
		}
		if err := f.rows(rd.Samples); err != nil {
			f.abort()
			return paths, err
		}
		if err := f.commit(); err != nil {
			return paths, err
		}
		paths = append(paths, f.path)
	}
	path, err := writeNodesCSV(dir, o.Nodes)
	if err != nil {
		return paths, err
	}
	return append(paths, path), nil
}

// createRunCSV starts the CSV file of one run, header written.
func createRunCSV(dir, runID string) (*atomicFile, error) {
	if !fileIDPattern.MatchString(runID) {
		return nil, core.Errorf(core.CodeInvalidArgument, "run id %q is not a safe file name", runID)
	}
	f, err := createAtomic(filepath.Join(dir, runID+".csv"))
	if err != nil {
		return nil, err
	}
	if _, err := f.w.WriteString("time,node,value,state\n"); err != nil {
		f.abort()
		return nil, core.Wrap(core.CodeInternal, err, "write %s", f.path)
	}
	return f, nil
}

// rows appends samples as CSV rows.
func (f *atomicFile) rows(samples []core.Sample) error {
	buf := f.buf
	for _, s := range samples {
		buf = strconv.AppendInt(buf[:0], core.UsToMs(s.TsUs), 10) // the simulator samples on whole ms
		buf = append(buf, ',')
		buf = append(buf, s.Node...)
		buf = append(buf, ',')
		buf = strconv.AppendFloat(buf, s.Value, 'g', -1, 64)
		buf = append(buf, ',')
		buf = append(buf, s.State...)
		buf = append(buf, '\n')
		if _, err := f.w.Write(buf); err != nil {
			return core.Wrap(core.CodeInternal, err, "write %s", f.path)
		}
	}
	f.buf = buf
	return nil
}

// writeNodesCSV writes nodes.csv into dir and returns its path.
func writeNodesCSV(dir string, nodes []core.Node) (string, error) {
	path := filepath.Join(dir, NodesCSV)
	err := writeAtomic(path, func(w *bufio.Writer) error {
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"id", "unit", "min", "max", "kind", "meaning"})
		for _, n := range nodes {
			_ = cw.Write([]string{n.ID, n.Unit, formatOpt(n.Min), formatOpt(n.Max), n.Kind, n.Meaning})
		}
		cw.Flush()
		return cw.Error()
	})
	return path, err
}

func formatOpt(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

// writeAtomic writes path through a temporary file in the same directory,
// synced and renamed into place; on failure the temporary file is removed.
func writeAtomic(path string, fill func(w *bufio.Writer) error) error {
	f, err := createAtomic(path)
	if err != nil {
		return err
	}
	if err := fill(f.w); err != nil {
		f.abort()
		return core.Wrap(core.CodeInternal, err, "write %s", path)
	}
	return f.commit()
}

// atomicFile is a file written through a temporary file in its directory:
// commit syncs and renames it into place, abort removes it.
type atomicFile struct {
	f         *os.File
	w         *bufio.Writer
	path, tmp string
	buf       []byte // scratch of rows
}

func createAtomic(path string) (*atomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create temporary file for %s", path)
	}
	return &atomicFile{f: f, w: bufio.NewWriterSize(f, 1<<16), path: path, tmp: f.Name()}, nil
}

func (a *atomicFile) abort() {
	a.f.Close()
	_ = os.Remove(a.tmp) // best effort: the caller reports the first error
}

func (a *atomicFile) commit() (err error) {
	defer func() {
		if err != nil {
			a.abort()
		}
	}()
	if err = a.w.Flush(); err != nil {
		return core.Wrap(core.CodeInternal, err, "write %s", a.path)
	}
	if err = a.f.Chmod(0o644); err != nil {
		return core.Wrap(core.CodeInternal, err, "chmod %s", a.path)
	}
	if err = a.f.Sync(); err != nil {
		return core.Wrap(core.CodeInternal, err, "sync %s", a.path)
	}
	if err = a.f.Close(); err != nil {
		return core.Wrap(core.CodeInternal, err, "close %s", a.path)
	}
	if err = os.Rename(a.tmp, a.path); err != nil {
		return core.Wrap(core.CodeInternal, err, "rename %s", a.path)
	}
	return nil
}
