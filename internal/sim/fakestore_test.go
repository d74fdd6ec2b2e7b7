package sim

import (
	"context"
	"sort"
	"sync"

	"github.com/aml-project/aml/internal/core"
)

// fakeStore is an in-memory core.Store with the semantics Write relies on:
// Ensure* keep existing rows, PutRecipeVersion dedups by content hash,
// samples are keyed by (node, ts), Ingest is all-or-nothing. Query methods
// are not implemented.
type fakeStore struct {
	mu       sync.Mutex
	lines    map[string]core.Line
	products map[string]core.Product
	recipes  map[string]core.Recipe
	versions map[string][]core.RecipeVersion
	nodes    map[string]core.Node
	runs     map[string]core.Run
	segments []core.ContextSegment
	samples  map[sampleKey]core.Sample
	log      []core.Sample // every committed sample in write order

	ingestCalls int
	maxBatch    int
	failWrite   bool // make tx.Write fail
}

type sampleKey struct {
	node string
	ts   int64
}

func newFakeStore() *fakeStore {
	return &fakeStore{
		lines: map[string]core.Line{}, products: map[string]core.Product{}, recipes: map[string]core.Recipe{},
		versions: map[string][]core.RecipeVersion{}, nodes: map[string]core.Node{}, runs: map[string]core.Run{},
		samples: map[sampleKey]core.Sample{},
	}
}

var errNotImplemented = core.Errorf(core.CodeInternal, "fake store: not implemented")

func (f *fakeStore) EnsureLine(_ context.Context, l core.Line) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.lines[l.ID]; !ok {
		f.lines[l.ID] = l
	}
	return nil
}

func (f *fakeStore) EnsureProduct(_ context.Context, p core.Product) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.lines[p.LineID]; !ok {
		return core.Errorf(core.CodeNotFound, "line %s", p.LineID)
	}
	if _, ok := f.products[p.ID]; !ok {
		f.products[p.ID] = p
	}
	return nil
}

func (f *fakeStore) EnsureRecipe(_ context.Context, r core.Recipe) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.products[r.ProductID]; !ok {
		return core.Errorf(core.CodeNotFound, "product %s", r.ProductID)
	}
	if _, ok := f.recipes[r.ID]; !ok {
		f.recipes[r.ID] = r
	}
	return nil
}

func (f *fakeStore) ListLines(context.Context) ([]core.Line, error) { return nil, errNotImplemented }

func (f *fakeStore) PutRecipeVersion(_ context.Context, recipeID string, params map[string]any) (core.RecipeVersion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.recipes[recipeID]; !ok {
		return core.RecipeVersion{}, core.Errorf(core.CodeNotFound, "recipe %s", recipeID)
	}
	h, err := core.CanonicalHash(params)
	if err != nil {
		return core.RecipeVersion{}, err
	}
	for _, v := range f.versions[recipeID] {
		if v.ContentHash == h {
			return v, nil
		}
	}
	v := core.RecipeVersion{RecipeID: recipeID, Version: len(f.versions[recipeID]) + 1, Params: params, ContentHash: h}
	f.versions[recipeID] = append(f.versions[recipeID], v)
	return v, nil
}

func (f *fakeStore) GetRecipeVersion(context.Context, string, int) (core.RecipeVersion, error) {
	return core.RecipeVersion{}, errNotImplemented
}

func (f *fakeStore) ListRecipeVersions(context.Context, string) ([]core.RecipeVersion, error) {
	return nil, errNotImplemented
}

func (f *fakeStore) UpsertNode(_ context.Context, n core.Node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[n.ID] = n
	return nil
}

func (f *fakeStore) GetNode(context.Context, string) (core.Node, error) {
	return core.Node{}, errNotImplemented
}
func (f *fakeStore) ListNodes(context.Context, string) ([]core.Node, error) {
	return nil, errNotImplemented
}

func (f *fakeStore) CreateRun(_ context.Context, r core.Run) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.runs[r.ID]; ok {
		return core.Errorf(core.CodeConflict, "run %s exists", r.ID)
	}
	f.runs[r.ID] = r
	return nil
}

func (f *fakeStore) GetRun(_ context.Context, id string) (core.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return core.Run{}, core.Errorf(core.CodeNotFound, "run %s", id)
	}
	return r, nil
}

func (f *fakeStore) ListRuns(context.Context, core.RunFilter) ([]core.Run, error) {
	return nil, errNotImplemented
}
func (f *fakeStore) EndRun(context.Context, string, int64) error { return errNotImplemented }

func (f *fakeStore) AddContextSegment(_ context.Context, s core.ContextSegment) (core.ContextSegment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.runs[s.RunID]; !ok {
		return s, core.Errorf(core.CodeNotFound, "run %s", s.RunID)
	}
	s.ID = int64(len(f.segments) + 1)
	f.segments = append(f.segments, s)
	return s, nil
}

func (f *fakeStore) ListContextSegments(_ context.Context, runID string) ([]core.ContextSegment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []core.ContextSegment
	for _, s := range f.segments {
		if s.RunID == runID {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeStore) WriteSamples(context.Context, []core.Sample) (core.WriteStats, error) {
	return core.WriteStats{}, errNotImplemented
}

// fakeTx buffers one transaction's writes.
type fakeTx struct {
	f       *fakeStore
	runs    []core.Run
	samples []core.Sample
}

func (t *fakeTx) Write(samples []core.Sample) (core.WriteStats, error) {
	if t.f.failWrite {
		return core.WriteStats{}, core.Errorf(core.CodeIngestInvalid, "fake write failure")
	}
	t.f.maxBatch = max(t.f.maxBatch, len(samples))
	t.samples = append(t.samples, samples...)
	return core.WriteStats{Samples: len(samples)}, nil
}

func (t *fakeTx) EnsureNode(core.Node) (bool, error) { return false, errNotImplemented }

func (t *fakeTx) EnsureRun(r core.Run) (bool, error) {
	if _, ok := t.f.runs[r.ID]; ok {
		return false, nil
	}
	t.runs = append(t.runs, r)
	return true, nil
}

func (f *fakeStore) Ingest(_ context.Context, fn func(tx core.IngestTx) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ingestCalls++
	tx := &fakeTx{f: f}
	if err := fn(tx); err != nil {
		return err
	}
	for _, r := range tx.runs {
		f.runs[r.ID] = r
	}
	for _, s := range tx.samples {
		f.samples[sampleKey{s.Node, s.TsUs}] = s
	}
	f.log = append(f.log, tx.samples...)
	return nil
}

func (f *fakeStore) QueryPage(context.Context, core.PageQuery) (core.Page, error) {
	return core.Page{}, errNotImplemented
}
func (f *fakeStore) QueryMulti(context.Context, core.MultiQuery) (core.MultiResult, error) {
	return core.MultiResult{}, errNotImplemented
}
func (f *fakeStore) Latest(context.Context, []string, core.ContextFilter) ([]core.Sample, error) {
	return nil, errNotImplemented
}
func (f *fakeStore) Buckets(context.Context, core.BucketQuery) ([]core.Bucket, error) {
	return nil, errNotImplemented
}

func (f *fakeStore) CountRunSamples(_ context.Context, runID string) (map[string]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]int64{}
	for _, s := range f.samples {
		if s.Run == runID {
			m[s.Node]++
		}
	}
	return m, nil
}

func (f *fakeStore) Close() error { return nil }

// runSamples returns the stored samples of a run sorted by (ts, node).
func (f *fakeStore) runSamples(runID string) []core.Sample {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []core.Sample
	for _, s := range f.samples {
		if s.Run == runID {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TsUs != out[j].TsUs {
			return out[i].TsUs < out[j].TsUs
		}
		return out[i].Node < out[j].Node
	})
	return out
}

var _ core.SeriesStore = (*fakeStore)(nil)
