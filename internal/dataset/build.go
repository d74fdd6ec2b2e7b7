package dataset

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
)

// Defaults for build quotas.
const (
	DefaultMaxWindows = 200_000
	DefaultMaxBytes   = int64(4) << 30
	// DefaultMaxCells is the default work budget of a build: grid points
	// (run length / beatMs, summed over the selected runs) × nodes,
	// computed from the plan before any sample is read.
	DefaultMaxCells = 50_000_000
	// pageLimit is the page size used to read each node's samples.
	pageLimit = 20_000
)

// Options tune a build.
type Options struct {
	DataDir    string // the data directory; datasets go to DataDir/datasets/<id>
	MaxWindows int    // quota on windows (rows for static datasets); 0 = DefaultMaxWindows
	MaxBytes   int64  // quota on the dataset's size on disk; 0 = DefaultMaxBytes
	MaxCells   int64  // work budget: grid points × nodes over the runs; 0 = DefaultMaxCells
	CreatedBy  string
	// Progress, if set, is called after each run is read and cleaned and
	// at each later stage.
	Progress func(Progress)
	// Bus, if set, receives a dataset.built event once the dataset is
	// registered.
	Bus *events.Bus
}

// Progress reports build progress.
type Progress struct {
	Stage string `json:"stage"` // "read", "window", "write", "register"
	Run   string `json:"run,omitempty"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
}

// Result is a built and registered dataset.
type Result struct {
	Dataset  core.Dataset
	Manifest *Manifest
	Report   *Report
}

// Store is what a build needs: runs and samples to read, a registry to
// register the result in.
type Store interface {
	core.Meta
	core.TimeSeries
	core.Datasets
}

// node is a spec node resolved against the store, in column order.
type node struct {
	NodeSpec
	info          core.Node
	scale, offset float64
	modelUnit     string
	delayMs       int64
}

// runGrid is one used run after cleaning and alignment: the common grid,
// row-major [steps][nAll] in model units, NaN where missing. Values are
// float32, the precision of the dataset arrays: statistics are computed on
// exactly the numbers a trainer reads, and the grid of every run stays in
// memory at half the size.
type runGrid struct {
	run      core.Run
	startUs  int64 // time of grid step 0, epoch µs
	steps    int
	vals     []float32
	observed []bool // every node had a real (not interpolated) value
	clean    map[string]CleanCounts
	align    map[string]AlignCounts
	missing  float64
	split    string // by_run only
}

func (g *runGrid) at(i, j, nAll int) float64 { return float64(g.vals[i*nAll+j]) }

// Build reads the spec's runs from the store, cleans, aligns, windows and
// splits them, writes the dataset files to a temporary directory, renames it
// into place and registers it. It either registers a complete dataset or
// leaves nothing registered; nothing half written is ever visible under its
// final name.
func Build(ctx context.Context, st Store, spec *Spec, opt Options) (*Result, error) {
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if opt.MaxWindows <= 0 {
		opt.MaxWindows = DefaultMaxWindows
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = DefaultMaxBytes
	}
	if opt.CreatedBy == "" {
		opt.CreatedBy = "cli"
	}
	// A build holds every run's aligned grid plus a few runs' raw samples;
	// the rest is short-lived garbage. A tighter GC target keeps peak memory
	// near the live set (bench/dataset.sh measures it); with little garbage
	// left per sample, 50 % costs no measurable CPU over 75 % (bench/RESULTS.md).
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	progress := opt.Progress
	if progress == nil {
		progress = func(Progress) {}
	}
	canonSpec, err := core.CanonicalJSON(spec)
	if err != nil {
		return nil, err
	}
	nodes, err := resolveNodes(ctx, st, spec)
	if err != nil {
		return nil, err
	}
	runs, err := resolveRuns(ctx, st, spec)
	if err != nil {
		return nil, err
	}
	if err := checkWork(spec, runs, len(nodes), opt.MaxCells); err != nil {
		return nil, err
	}
	static := spec.Purpose == PurposeStaticResponse

	// 1. Read, clean and align every run. Up to `readers` runs are read
	// concurrently (the reader pool allows it) while earlier runs are being
	// cleaned; results are consumed in run order, and a run's raw samples
	// are released as soon as it is aligned, which bounds memory to a few
	// runs' raw samples.
	type fetched struct {
		points [][]core.Point
		from   int64
		to     int64
		err    error
		done   chan struct{}
	}
	readers := max(1, min(2, runtime.GOMAXPROCS(0)))
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, readers)
	// Point slices of aligned runs, handed back to the readers: a build
	// allocates the raw samples of a few runs, not of every run.
	free := make(chan [][]core.Point, readers+1)
	fs := make([]*fetched, len(runs))
	for i := range fs {
		fs[i] = &fetched{done: make(chan struct{})}
	}
	go func() {
		for i, r := range runs {
			select {
			case slots <- struct{}{}:
			case <-fctx.Done():
				return
			}
			go func(f *fetched, r core.Run) {
				defer close(f.done)
				from, to := r.StartedMs, *r.EndedMs
				if spec.FromMs != nil {
					from = max(from, *spec.FromMs)
				}
				if spec.ToMs != nil {
					to = min(to, *spec.ToMs)
				}
				f.from, f.to = from, to
				if from > to {
					return
				}
				var bufs [][]core.Point
				select {
				case bufs = <-free:
				default:
					bufs = make([][]core.Point, len(nodes))
				}
				f.points = bufs
				hint := 0
				for j, n := range nodes {
					// Delay-shifted nodes are read over the shifted window;
					// the previous node's count sizes the slice (nodes of a
					// run are mostly sampled alike).
					pts, err := readAll(fctx, st, n.NodeID, r.ID, from+n.delayMs, to+n.delayMs, hint, bufs[j])
					hint = len(pts) + 1
					if err != nil {
						f.err = err
						return
					}
					f.points[j] = pts
				}
			}(fs[i], r)
		}
	}()
	minSteps := spec.HistorySteps + spec.HorizonSteps + 2
	if static {
		minSteps = 1
	}
	var grids []*runGrid
	var dropped []RunReason
	al := &aligner{}
	for i, r := range runs {
		f := fs[i]
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, core.Wrap(core.CodeStoreUnavailable, ctx.Err(), "build cancelled")
		}
		if f.err != nil {
			return nil, f.err
		}
		if f.points == nil {
			dropped = append(dropped, RunReason{r.ID, "run does not overlap the spec's fromMs/toMs"})
		} else if g, reason := alignRun(spec, nodes, r, f.points, f.from, f.to, minSteps, al); reason != "" {
			dropped = append(dropped, RunReason{r.ID, reason})
		} else {
			grids = append(grids, g)
		}
		if f.points != nil {
			select {
			case free <- f.points:
			default:
			}
		}
		fs[i] = nil
		<-slots
		progress(Progress{Stage: "read", Run: r.ID, Done: i + 1, Total: len(runs)})
	}
	if err := ctx.Err(); err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "build cancelled")
	}
	if len(grids) == 0 {
		return nil, datasetEmpty("no run is usable", dropped)
	}

	lineage, err := checkLineage(ctx, st, spec, grids, dropped)
	if err != nil {
		return nil, err
	}

	// 2. Split and plan windows.
	p, err := plan(spec, nodes, grids)
	if err != nil {
		return nil, err
	}
	if p.total() == 0 {
		return nil, datasetEmpty("no complete window (or row) in any run", dropped)
	}
	if p.train.Count == 0 {
		return nil, datasetEmpty("the train split has no complete window (or row)", dropped)
	}
	if p.total() > opt.MaxWindows {
		return nil, core.FieldErrorf(core.CodeQuotaExceeded, "maxWindows", "the dataset would have %d windows, over the quota of %d: raise stride, shorten fromMs/toMs, pick fewer runs, or raise the quota", p.total(), opt.MaxWindows)
	}
	if est := p.bytes(); est > opt.MaxBytes {
		return nil, core.FieldErrorf(core.CodeQuotaExceeded, "maxBytes", "the dataset would take about %d MiB, over the quota of %d MiB", est>>20, opt.MaxBytes>>20)
	}
	progress(Progress{Stage: "window", Done: p.total(), Total: p.total()})

	// 3. Normalisation from train only.
	norm := p.norm()

	// 4. Write into a temporary directory, then rename into place.
	root := filepath.Join(opt.DataDir, "datasets")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create %s", root)
	}
	cleanStaleTemps(root)
	id := newID()
	tmp := filepath.Join(root, ".tmp-"+id)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create %s", tmp)
	}
	// The owner file lets a later build tell a crashed build's leftovers
	// from a build still running in another process.
	committed := false
	defer func() {
		if !committed {
			_ = os.RemoveAll(tmp) // best effort: the build's error is what is returned
		}
	}()
	// Without it a concurrent build would take the directory for a crashed
	// one and remove it.
	if err := os.WriteFile(filepath.Join(tmp, ".owner"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create %s", filepath.Join(tmp, ".owner"))
	}
	progress(Progress{Stage: "write", Done: 0, Total: 1})
	// The report needs only the grids; compute it while the arrays are
	// written.
	reportc := make(chan *Report, 1)
	go func() { reportc <- buildReport(spec, nodes, grids, dropped, p, lineage) }()
	release := extraWriterProc(p.bytes())
	arts, err := p.write(ctx, tmp)
	release()
	report := <-reportc
	if err != nil {
		return nil, err
	}
	m := &Manifest{
		FormatVersion: FormatVersion, Kind: KindDynamic, SpecHash: sha256hex(canonSpec), SpecVersion: SpecVersion,
		LineID: spec.LineID, ProductID: spec.ProductID, RecipeID: spec.RecipeID, Purpose: spec.Purpose,
		BeatMs: spec.BeatMs, BeatUs: subMsBeat(spec), HistorySteps: spec.HistorySteps, HorizonSteps: spec.HorizonSteps, Stride: spec.Stride,
		Shapes: p.shapes(), Split: p.manifestSplit(), Runs: p.manifestRuns(), Norm: norm,
		Provenance: provenance(ctx, st, spec, grids), Lineage: lineage,
	}
	if static {
		m.Kind = KindStatic
		m.Inputs = p.inputNames()
	}
	for _, n := range nodes {
		m.Nodes = append(m.Nodes, ManifestNode{NodeID: n.NodeID, Role: n.Role, Unit: n.info.Unit, ModelUnit: n.modelUnit,
			Scale: n.scale, Offset: n.offset, DelayMs: n.delayMs, Min: n.info.Min, Max: n.info.Max})
		m.AllNodes = append(m.AllNodes, n.NodeID)
	}
	m.Controls, m.Targets = p.ctrlNames(), p.tgtNames()
	for _, blob := range []struct {
		name string
		v    any
	}{{"arrays/sidecar.json", sidecar(nodes, p, m)}, {"report.json", report}} {
		b, err := json.MarshalIndent(blob.v, "", "  ")
		if err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "encode %s", blob.name)
		}
		a, err := writeBlob(tmp, blob.name, append(b, '\n'))
		if err != nil {
			return nil, err
		}
		arts = append(arts, a)
	}
	a, err := writeBlob(tmp, "spec.json", append(append([]byte{}, canonSpec...), '\n'))
	if err != nil {
		return nil, err
	}
	arts = append(arts, a)
	m.Artifacts = arts
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "encode manifest")
	}
	mb = append(mb, '\n')
	if _, err := writeBlob(tmp, "manifest.json", mb); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(tmp, ".owner")); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "remove %s", filepath.Join(tmp, ".owner"))
	}
	hash := DatasetHash(canonSpec, arts, sha256hex(mb))
	var size int64 = int64(len(mb))
	for _, a := range arts {
		size += a.Bytes
	}
	final := filepath.Join(root, id)
	if err := os.Rename(tmp, final); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "rename dataset into place")
	}
	committed = true
	if err := syncDir(root); err != nil {
		_ = os.RemoveAll(final)
		return nil, core.Wrap(core.CodeInternal, err, "sync %s", root)
	}
	progress(Progress{Stage: "register", Done: 0, Total: 1})
	d := core.Dataset{
		ID: id, LineID: spec.LineID, ProductID: spec.ProductID, RecipeID: spec.RecipeID, Purpose: spec.Purpose,
		Path: "datasets/" + id, SHA256: hash, SpecJSON: string(canonSpec),
		TrainWindows: p.train.Count, ValWindows: p.val.Count, TestWindows: p.test.Count, Runs: len(grids), Bytes: size,
		LineageVerified: lineage.LineageVerified, Note: spec.Note, CreatedBy: opt.CreatedBy, CreatedAt: time.Now().UTC(),
	}
	// On a back-end with shared artifacts (PostgreSQL) the files go into
	// the database before the dataset is registered, so a registered
	// dataset is always fetchable by a worker on another machine.
	shared, err := artifact.For(ctx, st, opt.DataDir)
	// Cleanup on the failure paths below is best effort: the failure is
	// what is returned, and an unregistered directory is only disk space.
	if err != nil {
		_ = os.RemoveAll(final)
		return nil, err
	}
	if shared != nil {
		if _, err := shared.Put(context.WithoutCancel(ctx), d.Path, final); err != nil {
			_ = os.RemoveAll(final)
			return nil, err
		}
	}
	if err := st.InsertDataset(context.WithoutCancel(ctx), d); err != nil {
		_ = os.RemoveAll(final)
		if shared != nil {
			_ = shared.Delete(context.WithoutCancel(ctx), d.Path)
		}
		return nil, err
	}
	opt.Bus.Publish(events.Event{Kind: events.DatasetBuilt, Line: d.LineID, ID: d.ID, Data: map[string]any{
		"sha256": d.SHA256, "recipe": d.RecipeID, "windows": d.TrainWindows + d.ValWindows + d.TestWindows, "lineageVerified": d.LineageVerified}})
	return &Result{Dataset: d, Manifest: m, Report: report}, nil
}

func datasetEmpty(what string, dropped []RunReason) error {
	var parts []string
	for i, d := range dropped {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(dropped)-5))
			break
		}
		parts = append(parts, d.RunID+": "+d.Reason)
	}
	msg := what
	if len(parts) > 0 {
		msg += " (dropped runs: " + strings.Join(parts, "; ") + ")"
	}
	return core.Errorf(core.CodeDatasetEmpty, "%s", msg)
}

func newID() string {
	var b [3]byte
	rand.Read(b[:])
	return "ds-" + time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// cleanStaleTemps removes temporary directories left by builds whose process
// is gone (a crash or kill mid-write).
func cleanStaleTemps(root string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), ".tmp-") {
			continue
		}
		dir := filepath.Join(root, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, ".owner"))
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				// Skip builds of this process (another goroutine may be
				// writing) and of any live process (EPERM means it exists).
				if err := syscall.Kill(pid, 0); pid == os.Getpid() || err == nil || errors.Is(err, syscall.EPERM) {
					continue
				}
			}
		}
		_ = os.RemoveAll(dir) // housekeeping: a leftover is retried by the next build
	}
}

// pageAppender is a store that appends a page to a slice (samples.Reader):
// readAll then fills one slice instead of copying every page.
type pageAppender interface {
	AppendPage(ctx context.Context, q core.PageQuery, dst []core.Point) (core.Page, error)
}

// readAll reads one node's points of a run, page by page; hint > 0 is the
// expected count (the slice is made that large up front, so a store that
// appends pages fills it without regrowth or copy). A store that appends
// pages fills buf (an earlier run's slice) when it has any capacity.
func readAll(ctx context.Context, ts core.TimeSeries, nodeID, runID string, from, to int64, hint int, buf []core.Point) ([]core.Point, error) {
	var out []core.Point
	var after *int64
	pa, direct := ts.(pageAppender)
	if direct && cap(buf) > 0 && cap(buf) >= hint {
		out = buf[:0]
	} else if direct && hint > 0 {
		out = make([]core.Point, 0, hint)
	}
	for {
		q := core.PageQuery{Node: nodeID, Filter: core.ContextFilter{Run: runID}, AfterTs: after, FromMs: &from, ToMs: &to, Limit: pageLimit}
		if direct && out != nil {
			p, err := pa.AppendPage(ctx, q, out)
			if err != nil {
				return nil, err
			}
			out = p.Points
			if !p.HasMore {
				return out, nil
			}
			after = &p.NextAfterTs
			continue
		}
		p, err := ts.QueryPage(ctx, q)
		if err != nil {
			return nil, err
		}
		if out == nil && !p.HasMore {
			// One page is the whole series: its slice is the result (no
			// second slice, no copy).
			if p.Points == nil {
				return []core.Point{}, nil
			}
			return p.Points, nil
		}
		if out == nil {
			// Size the result from the first page's density so later pages
			// append without repeated regrowth.
			n := len(p.Points)
			if p.HasMore && n > 1 {
				span := p.Points[n-1].TsUs - from*1000 + 1
				if span > 0 {
					n = int(min(int64(n)*(to-from+1)*1000/span+int64(n)/8, 1<<26))
				}
			}
			out = make([]core.Point, 0, n)
		}
		out = append(out, p.Points...)
		if !p.HasMore {
			return out, nil
		}
		after = &p.NextAfterTs
	}
}

func resolveNodes(ctx context.Context, st core.Meta, spec *Spec) ([]node, error) {
	var problems, unitProblems []core.Problem
	var out []node
	idx := map[string]int{}
	for i, n := range spec.Nodes {
		idx[n.NodeID] = i
	}
	for _, ns := range spec.OrderedNodes() {
		i := idx[ns.NodeID]
		info, err := st.GetNode(ctx, ns.NodeID)
		if core.CodeOf(err) == core.CodeNotFound {
			problems = append(problems, core.Problem{Field: fmt.Sprintf("nodes[%d].nodeId", i), Message: fmt.Sprintf("node %q does not exist", ns.NodeID)})
			continue
		} else if err != nil {
			return nil, err
		}
		if info.LineID != "" && info.LineID != spec.LineID {
			problems = append(problems, core.Problem{Field: fmt.Sprintf("nodes[%d].nodeId", i), Message: fmt.Sprintf("node %q belongs to line %q, not %q", ns.NodeID, info.LineID, spec.LineID)})
		}
		n := node{NodeSpec: ns, info: info, scale: 1, offset: 0, modelUnit: info.Unit}
		if u := ns.Unit; u != nil {
			if info.Unit != "" && u.Unit != info.Unit {
				unitProblems = append(unitProblems, core.Problem{Field: fmt.Sprintf("nodes[%d].unitContract.unit", i), Message: fmt.Sprintf("node %q is measured in %q, the contract says %q", ns.NodeID, info.Unit, u.Unit)})
			}
			n.scale, n.offset, n.modelUnit, n.delayMs = *u.Scale, *u.Offset, u.ModelUnit, u.DelayMs
		}
		out = append(out, n)
	}
	if len(problems) > 0 {
		return nil, core.Invalid(core.CodeSpecInvalid, append(problems, unitProblems...))
	}
	if len(unitProblems) > 0 {
		return nil, core.Invalid(core.CodeUnitContractInvalid, unitProblems)
	}
	return out, nil
}

func resolveRuns(ctx context.Context, st core.Meta, spec *Spec) ([]core.Run, error) {
	var runs []core.Run
	if len(spec.RunIDs) == 0 && spec.Split.Mode == SplitModeExplicit {
		ids := append(append(append([]string{}, spec.Split.TrainRunIDs...), spec.Split.ValRunIDs...), spec.Split.TestRunIDs...)
		cp := *spec
		cp.RunIDs = ids
		return resolveRuns(ctx, st, &cp)
	}
	if len(spec.RunIDs) == 0 {
		all, err := st.ListRuns(ctx, core.RunFilter{Line: spec.LineID, Product: spec.ProductID, Recipe: spec.RecipeID, Status: core.RunEnded})
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return nil, core.FieldErrorf(core.CodeSpecInvalid, "runIds", "no ended run of line %q product %q recipe %q", spec.LineID, spec.ProductID, spec.RecipeID)
		}
		if len(all) > MaxRuns {
			return nil, core.FieldErrorf(core.CodeSpecInvalid, "runIds", "%d ended runs match; a dataset takes at most %d: list runIds", len(all), MaxRuns)
		}
		runs = all
	} else {
		var problems []core.Problem
		for i, id := range spec.RunIDs {
			r, err := st.GetRun(ctx, id)
			field := fmt.Sprintf("runIds[%d]", i)
			if core.CodeOf(err) == core.CodeNotFound {
				problems = append(problems, core.Problem{Field: field, Message: fmt.Sprintf("run %q does not exist", id)})
				continue
			} else if err != nil {
				return nil, err
			}
			if r.LineID != spec.LineID || r.ProductID != spec.ProductID || r.RecipeID != spec.RecipeID {
				problems = append(problems, core.Problem{Field: field, Message: fmt.Sprintf("run %q is line %q product %q recipe %q; a dataset never mixes recipes", id, r.LineID, r.ProductID, r.RecipeID)})
				continue
			}
			if r.Status != core.RunEnded || r.EndedMs == nil {
				problems = append(problems, core.Problem{Field: field, Message: fmt.Sprintf("run %q is %s, not ended", id, r.Status)})
				continue
			}
			runs = append(runs, r)
		}
		if err := core.Invalid(core.CodeSpecInvalid, problems); err != nil {
			return nil, err
		}
	}
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].StartedMs != runs[j].StartedMs {
			return runs[i].StartedMs < runs[j].StartedMs
		}
		return runs[i].ID < runs[j].ID
	})
	return runs, nil
}

// aligner is what alignRun reuses from one run to the next: the cleaner's
// buffers and each node's grid.
type aligner struct {
	cl    cleaner
	grids []Grid
}

// alignRun cleans and aligns one run's nodes and cuts the common grid.
// al (nil: fresh buffers) is reused; nothing of it is kept in the result.
func alignRun(spec *Spec, nodes []node, r core.Run, pts [][]core.Point, from, to int64, minSteps int, al *aligner) (*runGrid, string) {
	if al == nil {
		al = &aligner{}
	}
	g := &runGrid{run: r, clean: map[string]CleanCounts{}, align: map[string]AlignCounts{}}
	if len(al.grids) < len(nodes) {
		al.grids = make([]Grid, len(nodes))
	}
	grids := al.grids[:len(nodes)]
	hampel := spec.Cleaning.Hampel
	fromUs, toUs := core.MsRangeUs(from, to)
	acfg := AlignConfig{BeatUs: spec.BeatUs(), MaxInterpUs: *spec.Cleaning.MaxInterpMs * 1000}
	for j, n := range nodes {
		cfg := CleanConfig{StateFilter: *spec.Cleaning.StateFilter}
		if *spec.Cleaning.Range {
			cfg.Min, cfg.Max = n.info.Min, n.info.Max
		}
		if hampel != nil && hampel.Threshold > 0 {
			cfg.HampelWindowUs, cfg.HampelThreshold = hampel.WindowMs*1000, hampel.Threshold
		}
		grid, cc, ac := al.cl.cleanAlign(pts[j], n.delayMs*1000, cfg, fromUs, toUs, acfg, grids[j].Values, grids[j].Observed)
		grids[j] = grid
		g.clean[n.NodeID] = cc
		g.align[n.NodeID] = ac
	}
	lo, hi, err := CommonRange(grids)
	if err != nil || hi <= lo {
		var empty []string
		for j, gr := range grids {
			has := false
			for _, v := range gr.Values {
				if !math.IsNaN(v) {
					has = true
					break
				}
			}
			if !has {
				empty = append(empty, nodes[j].NodeID)
			}
		}
		if len(empty) > 0 {
			return nil, "no usable samples of " + strings.Join(empty, ", ")
		}
		return nil, "the nodes' series do not overlap in time"
	}
	steps := hi - lo
	if steps < minSteps {
		return nil, fmt.Sprintf("only %d common grid steps, needs at least %d (historySteps+horizonSteps+2)", steps, minSteps)
	}
	nAll := len(nodes)
	g.steps, g.startUs = steps, grids[0].StartUs+int64(lo)*spec.BeatUs()
	g.vals = make([]float32, steps*nAll)
	g.observed = make([]bool, steps)
	nan := 0
	for i := 0; i < steps; i++ {
		obs := true
		for j, n := range nodes {
			v := grids[j].Values[lo+i]
			if math.IsNaN(v) {
				nan++
			} else {
				v = v*n.scale + n.offset
			}
			if !grids[j].Observed[lo+i] {
				obs = false
			}
			g.vals[i*nAll+j] = float32(v)
		}
		g.observed[i] = obs
	}
	// Counts restricted to the common range so the report's missing ratio
	// describes the data actually used.
	for j, n := range nodes {
		ac := AlignCounts{Buckets: steps}
		for i := lo; i < hi; i++ {
			switch {
			case math.IsNaN(grids[j].Values[i]):
				ac.Missing++
			case grids[j].Observed[i]:
				ac.Observed++
			default:
				ac.Interpolated++
			}
		}
		g.align[n.NodeID] = ac
	}
	g.missing = float64(nan) / float64(steps*nAll)
	if g.missing > *spec.Cleaning.MaxDropRatio {
		return nil, fmt.Sprintf("missing ratio %.3f above maxDropRatio %.3f", g.missing, *spec.Cleaning.MaxDropRatio)
	}
	return g, ""
}

func checkLineage(ctx context.Context, st core.Meta, spec *Spec, grids []*runGrid, dropped []RunReason) (Lineage, error) {
	l := Lineage{Verified: []string{}, Unknown: []RunReason{}, Mismatched: []RunReason{}, Excluded: append([]RunReason{}, dropped...)}
	for _, g := range grids {
		r := g.run
		if r.RecipeVersion == nil {
			l.Unknown = append(l.Unknown, RunReason{r.ID, "the run records no recipe version"})
			continue
		}
		rv, err := st.GetRecipeVersion(ctx, r.RecipeID, *r.RecipeVersion)
		if core.CodeOf(err) == core.CodeNotFound {
			l.Mismatched = append(l.Mismatched, RunReason{r.ID, fmt.Sprintf("recipe %s has no version %d", r.RecipeID, *r.RecipeVersion)})
			continue
		} else if err != nil {
			return l, err
		}
		segs, err := st.ListContextSegments(ctx, r.ID)
		if err != nil {
			return l, err
		}
		if len(segs) == 0 {
			l.Unknown = append(l.Unknown, RunReason{r.ID, "no confirmed context segment"})
			continue
		}
		ok := false
		var why string
		for _, s := range segs {
			switch {
			case s.RecipeID != r.RecipeID:
				why = fmt.Sprintf("segment #%d confirms recipe %s, the run is %s", s.ID, s.RecipeID, r.RecipeID)
			case s.RecipeVersion != *r.RecipeVersion:
				why = fmt.Sprintf("segment #%d confirms version %d, the run records %d", s.ID, s.RecipeVersion, *r.RecipeVersion)
			case s.ContentHash != rv.ContentHash:
				why = fmt.Sprintf("segment #%d confirms content %.12s…, version %d is %.12s…", s.ID, s.ContentHash, rv.Version, rv.ContentHash)
			default:
				ok = true
			}
			if ok {
				break
			}
		}
		if ok {
			l.Verified = append(l.Verified, r.ID)
		} else {
			l.Mismatched = append(l.Mismatched, RunReason{r.ID, why})
		}
	}
	l.LineageVerified = len(l.Verified) > 0 && len(l.Unknown) == 0 && len(l.Mismatched) == 0
	return l, nil
}

func provenance(ctx context.Context, st core.Meta, spec *Spec, grids []*runGrid) Provenance {
	p := Provenance{LineID: spec.LineID, ProductID: spec.ProductID, RecipeID: spec.RecipeID, RecipeVersions: []int{}, RecipeContentHashes: []string{}, EvidenceSource: "unassessed"}
	seen := map[int]bool{}
	allSim := true
	for _, g := range grids {
		p.RunIDs = append(p.RunIDs, g.run.ID)
		p.AvailabilityWatermark = max(p.AvailabilityWatermark, *g.run.EndedMs)
		if v := g.run.RecipeVersion; v != nil && !seen[*v] {
			seen[*v] = true
			p.RecipeVersions = append(p.RecipeVersions, *v)
			if rv, err := st.GetRecipeVersion(ctx, g.run.RecipeID, *v); err == nil {
				p.RecipeContentHashes = append(p.RecipeContentHashes, rv.ContentHash)
			}
		}
		segs, _ := st.ListContextSegments(ctx, g.run.ID)
		if len(segs) == 0 {
			allSim = false
		}
		for _, s := range segs {
			if s.ConfirmedBy != "sim" {
				allSim = false
			}
		}
	}
	if allSim {
		p.EvidenceSource = "simulation"
	}
	return p
}

func sidecar(nodes []node, p *planned, m *Manifest) map[string]any {
	delays := map[string]int64{}
	var units []map[string]any
	for _, n := range nodes {
		delays[n.NodeID] = n.delayMs
		units = append(units, map[string]any{"id": n.NodeID, "unit": n.info.Unit, "modelUnit": n.modelUnit, "scale": n.scale, "offset": n.offset, "contract": n.Unit != nil})
	}
	return map[string]any{
		"delays": delays, "units": units, "variableOrder": m.AllNodes,
		"recipeContentHashes": m.Provenance.RecipeContentHashes, "evidenceSource": m.Provenance.EvidenceSource,
		"availabilityWatermark": m.Provenance.AvailabilityWatermark,
		"splitRunIds":           map[string][]string{"train": m.Split.Train.RunIDs, "val": m.Split.Val.RunIDs, "test": m.Split.Test.RunIDs},
	}
}

// checkWork refuses a build whose aligned grids — one point per beat over
// each selected run's window (clipped to fromMs/toMs), times the nodes —
// exceed the work budget maxCells (0: DefaultMaxCells). It runs on the
// plan, before any sample is read: a beat of 1 ms over hours of runs would
// otherwise take many minutes and gigabytes before any later quota applies.
func checkWork(spec *Spec, runs []core.Run, nodes int, maxCells int64) error {
	if maxCells <= 0 {
		maxCells = DefaultMaxCells
	}
	beatUs := spec.BeatUs()
	if beatUs < 1 {
		return nil // Validate refuses it
	}
	var points int64
	for _, r := range runs {
		if r.EndedMs == nil {
			continue
		}
		from, to := r.StartedMs, *r.EndedMs
		if spec.FromMs != nil {
			from = max(from, *spec.FromMs)
		}
		if spec.ToMs != nil {
			to = min(to, *spec.ToMs)
		}
		if from > to {
			continue
		}
		n := (to-from)*1000/beatUs + 1
		if points > math.MaxInt64/4-n {
			points = math.MaxInt64 / 4
			break
		}
		points += n
	}
	cells := points
	if nodes > 0 && points <= math.MaxInt64/int64(nodes) {
		cells = points * int64(nodes)
	} else if nodes > 0 {
		cells = math.MaxInt64
	}
	if cells > maxCells {
		return core.FieldErrorf(core.CodeQuotaExceeded, "beatMs",
			"the build would align %d grid cells (%d points at a beat of %s over %d run(s) × %d nodes), over the work budget of %d cells: raise the beat, shorten fromMs/toMs, pick fewer runs or nodes",
			cells, points, core.FormatPeriod(time.Duration(beatUs)*time.Microsecond), len(runs), nodes, maxCells)
	}
	return nil
}

// subMsBeat is the manifest's beatUs: the beat in µs when it is not a
// whole number of ms, else 0 (manifest beatMs then, as before).
func subMsBeat(spec *Spec) int64 {
	if us := spec.BeatUs(); us%1000 != 0 {
		return us
	}
	return 0
}
