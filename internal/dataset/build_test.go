package dataset

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// simStore is a real SQLite store holding the simulated injection line
// (12 runs × 10 min at 1 s), built once and copied per test.
var (
	simOnce sync.Once
	simDir  string
	simErr  error
)

func simulated(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	simOnce.Do(func() {
		simDir, simErr = os.MkdirTemp("", "aml-dataset-sim-")
		if simErr != nil {
			return
		}
		cfg := sim.DefaultInjectionConfig()
		cfg.Seed, cfg.RunDuration = 7, 10*time.Minute
		out, err := sim.GenerateInjection(cfg)
		if err != nil {
			simErr = err
			return
		}
		st, err := sqlite.Open(simDir)
		if err != nil {
			simErr = err
			return
		}
		_, simErr = out.Write(context.Background(), st, nil)
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	})
	if simErr != nil {
		t.Fatal(simErr)
	}
	dir := t.TempDir()
	for _, f := range []string{sqlite.FileName, sqlite.FileName + "-wal", sqlite.FileName + "-shm"} {
		b, err := os.ReadFile(filepath.Join(simDir, f))
		if err == nil {
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st, dir
}

func injectionSpec(t *testing.T) *Spec {
	t.Helper()
	b, err := os.ReadFile("../../examples/specs/injection.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readF32(t *testing.T, path string) []float32 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func readF64(t *testing.T, path string) []float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func TestBuildSimulatedInjection(t *testing.T) {
	st, dir := simulated(t)
	ctx := context.Background()
	spec := injectionSpec(t)
	res, err := Build(ctx, st, spec, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d, m, r := res.Dataset, res.Manifest, res.Report
	if d.TrainWindows == 0 || d.ValWindows == 0 || d.TestWindows == 0 || d.Runs != 12 {
		t.Fatalf("windows %d/%d/%d runs %d", d.TrainWindows, d.ValWindows, d.TestWindows, d.Runs)
	}
	if !d.LineageVerified || !m.Lineage.LineageVerified || len(m.Lineage.Verified) != 12 {
		t.Fatalf("lineage %+v", m.Lineage)
	}
	if len(m.Split.Train.RunIDs) != 8 || len(m.Split.Val.RunIDs) != 2 || len(m.Split.Test.RunIDs) != 2 {
		t.Fatalf("split %+v", m.Split)
	}
	// Every cleaning rule fired somewhere, counted across all runs.
	var tot CleanCounts
	var al AlignCounts
	for _, n := range r.Nodes {
		tot.Add(n.Cleaning)
		al.Add(n.Align)
		var sum CleanCounts
		for _, run := range r.Runs {
			sum.Add(run.Cleaning[n.NodeID])
		}
		if sum != n.Cleaning {
			t.Fatalf("%s: node total %+v != sum over runs %+v", n.NodeID, n.Cleaning, sum)
		}
		if n.Summary.Count == 0 {
			t.Fatalf("%s: empty summary", n.NodeID)
		}
	}
	if tot.State == 0 || tot.Range == 0 || tot.Hampel == 0 || al.Interpolated == 0 {
		t.Fatalf("cleaning counts %+v align %+v", tot, al)
	}
	if tot.Raw != tot.State+tot.Range+tot.Hampel+tot.Kept {
		t.Fatalf("counts do not add up: %+v", tot)
	}
	if len(r.Lags) == 0 {
		t.Fatal("no lag estimates")
	}
	// hold_pressure drives part_weight through a ~6 s lag: positive best lag, positive corr.
	for _, l := range r.Lags {
		if l.Input == "hold_pressure" && l.Target == "part_weight" && (l.BestLag < 0 || l.BestCorr < 0.3) {
			t.Fatalf("hold_pressure→part_weight lag %+v", l)
		}
	}
	if _, err := Verify(dir, d); err != nil {
		t.Fatal(err)
	}

	// Windows: consecutive grid steps, never crossing a run, values equal the grid.
	base := filepath.Join(dir, d.Path, "arrays")
	H, F, nAll := m.HistorySteps, m.HorizonSteps, len(m.AllNodes)
	N := d.TrainWindows + d.ValWindows + d.TestWindows
	ts := readF64(t, filepath.Join(base, "timestamps.f64"))
	x := readF32(t, filepath.Join(base, "x.f32"))
	y := readF32(t, filepath.Join(base, "y.f32"))
	grid := readF32(t, filepath.Join(base, "grid.f32"))
	gts := readF64(t, filepath.Join(base, "grid_timestamps.f64"))
	if len(ts) != N*(H+F) || len(x) != N*H*nAll || len(y) != N*F*len(m.Targets) || len(grid) != len(gts)*nAll {
		t.Fatalf("array sizes: ts %d x %d y %d grid %d", len(ts), len(x), len(y), len(grid))
	}
	gridRow := map[int64]int{}
	for i, v := range gts {
		gridRow[int64(v)] = i
	}
	runOf := func(ms int64) string {
		for _, run := range m.Runs {
			if ms >= run.StartMs && ms < run.StartMs+int64(run.GridSteps)*m.BeatMs {
				return run.RunID
			}
		}
		return ""
	}
	splitOf := func(n int) string {
		switch {
		case n < d.TrainWindows:
			return "train"
		case n < d.TrainWindows+d.ValWindows:
			return "val"
		}
		return "test"
	}
	runSplit := map[string]string{}
	for _, run := range m.Runs {
		runSplit[run.RunID] = run.Split
	}
	tgtCol := nAll - len(m.Targets)
	for n := 0; n < N; n++ {
		w := ts[n*(H+F) : (n+1)*(H+F)]
		run := runOf(int64(w[0]))
		if run == "" || runOf(int64(w[H+F-1])) != run {
			t.Fatalf("window %d crosses runs: %v .. %v", n, w[0], w[H+F-1])
		}
		if runSplit[run] != splitOf(n) {
			t.Fatalf("window %d of run %s (%s) is in the %s part", n, run, runSplit[run], splitOf(n))
		}
		for i := 1; i < H+F; i++ {
			if w[i]-w[i-1] != float64(m.BeatMs) {
				t.Fatalf("window %d not consecutive", n)
			}
		}
		if n%97 == 0 {
			for i := 0; i < H; i++ {
				gi := gridRow[int64(w[i])]
				for j := 0; j < nAll; j++ {
					if x[(n*H+i)*nAll+j] != grid[gi*nAll+j] {
						t.Fatalf("x[%d,%d,%d] != grid", n, i, j)
					}
				}
			}
			for i := 0; i < F; i++ {
				gi := gridRow[int64(w[H+i])]
				for k := range m.Targets {
					if y[(n*F+i)*len(m.Targets)+k] != grid[gi*nAll+tgtCol+k] {
						t.Fatalf("y[%d,%d,%d] != grid", n, i, k)
					}
				}
			}
		}
	}

	// Same spec, same samples: same hash (a new id).
	res2, err := Build(ctx, st, injectionSpec(t), Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Dataset.SHA256 != d.SHA256 || res2.Dataset.ID == d.ID {
		t.Fatalf("rebuild: %s/%s vs %s/%s", res2.Dataset.ID, res2.Dataset.SHA256, d.ID, d.SHA256)
	}
}

func TestTamperAnyArtifact(t *testing.T) {
	st, dir := simulated(t)
	spec := injectionSpec(t)
	spec.Stride = 20 // small and quick
	res, err := Build(context.Background(), st, spec, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Dataset
	root := filepath.Join(dir, d.Path)
	names := []string{"manifest.json"}
	for _, a := range res.Manifest.Artifacts {
		names = append(names, a.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "arrays/sidecar.json") {
		t.Fatalf("sidecar not listed: %v", names)
	}
	for _, name := range names {
		path := filepath.Join(root, name)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, pos := range []int{0, len(orig) / 2, len(orig) - 1} {
			b := append([]byte{}, orig...)
			b[pos] ^= 0x01
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(dir, d)
			if core.CodeOf(err) != core.CodeDatasetTampered || !strings.Contains(err.Error(), name) {
				t.Fatalf("flipping byte %d of %s: %v", pos, name, err)
			}
		}
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(dir, d); err != nil {
			t.Fatalf("restored %s: %v", name, err)
		}
	}
	// A removed file and an extra file are both tampering.
	x := filepath.Join(root, "arrays", "x.f32")
	orig, _ := os.ReadFile(x)
	if err := os.Remove(x); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, d); core.CodeOf(err) != core.CodeDatasetTampered {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(x, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "arrays", "extra.f32"), []byte{1, 2, 3, 4}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, d); core.CodeOf(err) != core.CodeDatasetTampered || !strings.Contains(err.Error(), "extra.f32") {
		t.Fatalf("extra file: %v", err)
	}
	if err := os.Remove(filepath.Join(root, "arrays", "extra.f32")); err != nil {
		t.Fatal(err)
	}
	// Editing the registered hash or spec is caught too.
	d2 := d
	d2.SpecJSON = strings.Replace(d.SpecJSON, `"stride":20`, `"stride":21`, 1)
	if _, err := Verify(dir, d2); core.CodeOf(err) != core.CodeDatasetTampered {
		t.Fatalf("spec edit: %v", err)
	}
}

func TestNormalisationFromTrainOnly(t *testing.T) {
	st, dir := simulated(t)
	ctx := context.Background()
	spec := injectionSpec(t)
	spec.Stride = 10
	a, err := Build(ctx, st, spec, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Change values of a test run: statistics stay, the dataset changes.
	testRun := a.Manifest.Split.Test.RunIDs[0]
	p, err := st.QueryPage(ctx, core.PageQuery{Node: "part_weight", Filter: core.ContextFilter{Run: testRun}, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	var edits []core.Sample
	for _, pt := range p.Points[100:200] {
		if pt.State == core.StateOK {
			edits = append(edits, core.Sample{Node: "part_weight", TsUs: pt.TsUs, Value: pt.Value + 0.5, State: pt.State,
				Line: spec.LineID, Product: spec.ProductID, Recipe: spec.RecipeID, Run: testRun})
		}
	}
	if _, err := st.WriteSamples(ctx, edits); err != nil {
		t.Fatal(err)
	}
	b, err := Build(ctx, st, injectionSpec(t), Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_ = b
	spec2 := injectionSpec(t)
	spec2.Stride = 10
	c, err := Build(ctx, st, spec2, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.Dataset.SHA256 == a.Dataset.SHA256 {
		t.Fatal("changed test data, same hash")
	}
	for _, pair := range [][2]Stats{{a.Manifest.Norm.X, c.Manifest.Norm.X}, {a.Manifest.Norm.Y, c.Manifest.Norm.Y}, {a.Manifest.Norm.U, c.Manifest.Norm.U}} {
		for j := range pair[0].Mean {
			if pair[0].Mean[j] != pair[1].Mean[j] || pair[0].Std[j] != pair[1].Std[j] {
				t.Fatalf("normalisation changed when only test data changed (column %d)", j)
			}
		}
	}
	for _, s := range a.Manifest.Norm.X.Std {
		if !(s > 0) {
			t.Fatalf("std %v", s)
		}
	}
}

func TestQuotaWritesNothing(t *testing.T) {
	st, dir := simulated(t)
	_, err := Build(context.Background(), st, injectionSpec(t), Options{DataDir: dir, MaxWindows: 100})
	if core.CodeOf(err) != core.CodeQuotaExceeded {
		t.Fatalf("max windows: %v", err)
	}
	_, err = Build(context.Background(), st, injectionSpec(t), Options{DataDir: dir, MaxBytes: 1 << 20})
	if core.CodeOf(err) != core.CodeQuotaExceeded {
		t.Fatalf("max bytes: %v", err)
	}
	ds, _ := st.ListDatasets(context.Background(), core.DatasetFilter{})
	ents, _ := os.ReadDir(filepath.Join(dir, "datasets"))
	if len(ds) != 0 || len(ents) != 0 {
		t.Fatalf("quota failure left %d datasets, %d dirs", len(ds), len(ents))
	}
}

func TestSpecAgainstStore(t *testing.T) {
	st, dir := simulated(t)
	ctx := context.Background()
	// Unknown node, node of another line, mixed recipe run, unit mismatch.
	spec := injectionSpec(t)
	spec.Nodes[0].NodeID = "ghost"
	if _, err := Build(ctx, st, spec, Options{DataDir: dir}); core.CodeOf(err) != core.CodeSpecInvalid || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("unknown node: %v", err)
	}
	if err := st.EnsureRecipe(ctx, core.Recipe{ID: "other", LineID: "line-injection-01", ProductID: "product-injection-a"}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, core.Run{ID: "other-run", LineID: "line-injection-01", ProductID: "product-injection-a", RecipeID: "other", StartedMs: 1, EndedMs: ptr(int64(2)), Status: core.RunEnded}); err != nil {
		t.Fatal(err)
	}
	spec = injectionSpec(t)
	spec.RunIDs = []string{"recipe-injection-a-run-001", "other-run"}
	if _, err := Build(ctx, st, spec, Options{DataDir: dir}); core.CodeOf(err) != core.CodeSpecInvalid || !strings.Contains(err.Error(), "runIds[1]") {
		t.Fatalf("mixed recipes: %v", err)
	}
	spec = injectionSpec(t)
	for i := range spec.Nodes {
		if spec.Nodes[i].NodeID == "hold_pressure" {
			one, zero := 1.0, 0.0
			spec.Nodes[i].Unit = &UnitContract{Unit: "psi", ModelUnit: "psi", Scale: &one, Offset: &zero}
		}
	}
	if _, err := Build(ctx, st, spec, Options{DataDir: dir}); core.CodeOf(err) != core.CodeUnitContractInvalid {
		t.Fatalf("unit mismatch: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestUnitContractAndTimeWindow(t *testing.T) {
	st, dir := simulated(t)
	ctx := context.Background()
	spec := injectionSpec(t)
	spec.Stride = 5
	runs, _ := st.ListRuns(ctx, core.RunFilter{Recipe: spec.RecipeID})
	// Only the middle 5 minutes of every run.
	var from, to int64 = runs[0].StartedMs + 120_000, *runs[len(runs)-1].EndedMs - 180_000
	spec.FromMs, spec.ToMs = &from, &to
	scale, offset := 1000.0, 5.0 // g → mg plus an offset, to see the transform
	for i := range spec.Nodes {
		if spec.Nodes[i].NodeID == "part_weight" {
			spec.Nodes[i].Unit = &UnitContract{Unit: "g", ModelUnit: "mg", Scale: &scale, Offset: &offset}
		}
	}
	res, err := Build(ctx, st, spec, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	gts := readF64(t, filepath.Join(dir, res.Dataset.Path, "arrays", "grid_timestamps.f64"))
	if gts[0] < float64(from) || gts[len(gts)-1] > float64(to) {
		t.Fatalf("grid %v..%v outside spec window %d..%d", gts[0], gts[len(gts)-1], from, to)
	}
	for _, n := range res.Report.Nodes {
		if n.NodeID == "part_weight" && (n.ModelUnit != "mg" || n.Summary.Mean < 25_000 || n.Summary.Mean > 40_000) {
			t.Fatalf("part_weight in mg: %+v", n)
		}
	}
	_ = m
}

func TestTimeBlocksSingleRun(t *testing.T) {
	st, dir := simulated(t)
	spec := injectionSpec(t)
	spec.RunIDs = []string{"recipe-injection-a-run-004"}
	spec.Split = Split{Mode: SplitModeTimeBlocks, ValRatio: 0.25, TestRatio: 0.25, Seed: 3, Blocks: 4}
	spec.Normalize()
	res, err := Build(context.Background(), st, spec, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	H, F := m.HistorySteps, m.HorizonSteps
	if len(m.Split.Blocks) != 4 || m.Split.Train.Count == 0 || m.Split.Val.Count == 0 || m.Split.Test.Count == 0 {
		t.Fatalf("blocks %+v", m.Split)
	}
	ts := readF64(t, filepath.Join(dir, res.Dataset.Path, "arrays", "timestamps.f64"))
	start := m.Runs[0].StartMs
	for _, b := range m.Split.Blocks {
		lo := start + int64(b.StartStep+b.PurgeBeforeSteps)*m.BeatMs
		hi := start + int64(b.EndStep-b.PurgeAfterSteps)*m.BeatMs
		for n := b.WindowOffset; n < b.WindowOffset+b.WindowCount; n++ {
			w := ts[n*(H+F) : (n+1)*(H+F)]
			if int64(w[0]) < lo || int64(w[H+F-1]) >= hi {
				t.Fatalf("window %d leaves block %s [%d,%d)", n, b.BlockID, lo, hi)
			}
		}
	}
	// Neighbouring blocks of different splits are separated by ≥ H+F steps.
	bs := append([]BlockWindow{}, m.Split.Blocks...)
	sort.Slice(bs, func(i, j int) bool { return bs[i].StartStep < bs[j].StartStep })
	for i := 1; i < len(bs); i++ {
		if bs[i].Split != bs[i-1].Split && bs[i-1].PurgeAfterSteps+bs[i].PurgeBeforeSteps < H+F {
			t.Fatalf("no purge between %s and %s", bs[i-1].BlockID, bs[i].BlockID)
		}
	}
}

func TestStaticResponse(t *testing.T) {
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
	// 3 runs of 40 cycles each: y = 2·a − b + noise-free.
	for r := 0; r < 3; r++ {
		run := "cyc-" + string(rune('a'+r))
		var ss []core.Sample
		for k := 0; k < 40; k++ {
			a, b := float64(k%7), float64((k*3+r)%5)
			ts := int64(r*100_000 + k*1000)
			for _, s := range []core.Sample{{Node: "a", Value: a}, {Node: "b", Value: b}, {Node: "q", Value: 2*a - b}} {
				s.TsUs, s.Line, s.Product, s.Recipe, s.Run = ts*1000, "L", "P", "R", run
				ss = append(ss, s)
			}
		}
		end := int64(r*100_000 + 39_000)
		err := st.Ingest(ctx, func(tx core.IngestTx) error {
			if _, err := tx.Write(ss); err != nil {
				return err
			}
			_, err := tx.EnsureRun(core.Run{ID: run, LineID: "L", ProductID: "P", RecipeID: "R", StartedMs: int64(r * 100_000), EndedMs: &end, Status: core.RunEnded})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	spec := &Spec{LineID: "L", ProductID: "P", RecipeID: "R", BeatMs: 1000, Purpose: PurposeStaticResponse,
		Nodes: []NodeSpec{{NodeID: "a", Role: RoleFeature}, {NodeID: "b", Role: RoleControl}, {NodeID: "q", Role: RoleTarget}},
		Split: Split{ValRatio: 0.2, TestRatio: 0.2, Seed: 1}}
	res, err := Build(ctx, st, spec, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if m.Kind != KindStatic || m.Split.Train.Count+m.Split.Val.Count+m.Split.Test.Count != 120 || m.Split.Test.Count != 24 {
		t.Fatalf("static split %+v", m.Split)
	}
	x := readF32(t, filepath.Join(dir, res.Dataset.Path, "arrays", "x.f32"))
	y := readF32(t, filepath.Join(dir, res.Dataset.Path, "arrays", "y.f32"))
	if len(x) != 120*2 || len(y) != 120 {
		t.Fatalf("shapes x %d y %d", len(x), len(y))
	}
	// Column order: controls (b), then features (a).
	for i := 0; i < 120; i++ {
		if y[i] != 2*x[2*i+1]-x[2*i] {
			t.Fatalf("row %d: y %v != 2a-b from x %v", i, y[i], x[2*i:2*i+2])
		}
	}
	if res.Dataset.LineageVerified || len(m.Lineage.Unknown) != 3 {
		t.Fatalf("runs without segments must not verify: %+v", m.Lineage)
	}
	if _, err := Verify(dir, res.Dataset); err != nil {
		t.Fatal(err)
	}
}

func TestExplicitSplit(t *testing.T) {
	st, dir := simulated(t)
	spec := injectionSpec(t)
	spec.Stride = 10
	spec.Split = Split{Mode: SplitModeExplicit, TrainRunIDs: []string{"recipe-injection-a-run-001", "recipe-injection-a-run-002", "recipe-injection-a-run-003"},
		ValRunIDs: []string{"recipe-injection-a-run-004"}, TestRunIDs: []string{"recipe-injection-a-run-005"}}
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := Build(context.Background(), st, spec, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sp := res.Manifest.Split
	if len(sp.Train.RunIDs) != 3 || sp.Val.RunIDs[0] != "recipe-injection-a-run-004" || sp.Test.RunIDs[0] != "recipe-injection-a-run-005" || res.Dataset.Runs != 5 {
		t.Fatalf("explicit split %+v runs %d", sp, res.Dataset.Runs)
	}
	bad := *spec
	bad.Split.TestRunIDs = []string{"recipe-injection-a-run-001"}
	if err := bad.Validate(); core.CodeOf(err) != core.CodeSpecInvalid {
		t.Fatalf("run in two splits: %v", err)
	}
	bad = *spec
	bad.Split.ValRatio = 0.2
	if err := bad.Validate(); core.CodeOf(err) != core.CodeSpecInvalid {
		t.Fatalf("ratios with explicit: %v", err)
	}
}

func TestEmptyRequestedSplitIsAnError(t *testing.T) {
	st, dir := simulated(t)
	spec := injectionSpec(t)
	spec.RunIDs = []string{"recipe-injection-a-run-004"}
	// 10-minute run, 5 blocks of 120 steps, purge 40 at each split boundary:
	// a val or test block between two other splits keeps 40 steps < H+F.
	spec.Split = Split{Mode: SplitModeTimeBlocks, ValRatio: 0.2, TestRatio: 0.2, Seed: 3, Blocks: 5}
	spec.Normalize()
	_, err := Build(context.Background(), st, spec, Options{DataDir: dir})
	if core.CodeOf(err) != core.CodeDatasetEmpty || !strings.Contains(err.Error(), "no complete window") {
		t.Fatalf("got %v", err)
	}
}

// Every window's x, u and y equal the grid rows they are cut from, for a
// dataset with controls and for one without (u is then one zero column),
// and the mask is 0 or 1: the arrays are copied out of each run's encoded
// rows (runBytes), so a wrong offset or column shows here.
func TestWindowsEqualGrid(t *testing.T) {
	st, dir := simulated(t)
	for _, noCtrl := range []bool{false, true} {
		spec := injectionSpec(t)
		spec.Stride = 3
		if noCtrl {
			spec.Purpose = PurposeQualityPredict
			for i := range spec.Nodes {
				if spec.Nodes[i].Role == RoleControl {
					spec.Nodes[i].Role = RoleFeature
				}
			}
		}
		res, err := Build(context.Background(), st, spec, Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		d, m := res.Dataset, res.Manifest
		base := filepath.Join(dir, d.Path, "arrays")
		H, F, nAll := m.HistorySteps, m.HorizonSteps, len(m.AllNodes)
		N := d.TrainWindows + d.ValWindows + d.TestWindows
		ts := readF64(t, filepath.Join(base, "timestamps.f64"))
		x, u, y := readF32(t, filepath.Join(base, "x.f32")), readF32(t, filepath.Join(base, "u.f32")), readF32(t, filepath.Join(base, "y.f32"))
		mask := readF32(t, filepath.Join(base, "mask.f32"))
		grid, gts := readF32(t, filepath.Join(base, "grid.f32")), readF64(t, filepath.Join(base, "grid_timestamps.f64"))
		col := map[string]int{}
		for j, id := range m.AllNodes {
			col[id] = j
		}
		nc := max(1, len(m.Controls))
		if noCtrl != (len(m.Controls) == 0) || len(u) != N*F*nc || len(mask) != N*(H+F) || len(x) != N*H*nAll || len(y) != N*F*len(m.Targets) {
			t.Fatalf("noCtrl %v: controls %v, sizes u %d mask %d x %d y %d for %d windows", noCtrl, m.Controls, len(u), len(mask), len(x), len(y), N)
		}
		row := map[float64]int{}
		for i, v := range gts {
			row[v] = i
		}
		for n := range N {
			for i := range H {
				g := row[ts[n*(H+F)+i]]
				if !slices.Equal(x[(n*H+i)*nAll:(n*H+i+1)*nAll], grid[g*nAll:(g+1)*nAll]) {
					t.Fatalf("noCtrl %v: window %d history row %d differs from grid row %d", noCtrl, n, i, g)
				}
			}
			for i := range F {
				g := row[ts[n*(H+F)+H+i]]
				for k := range nc {
					want := float32(0)
					if !noCtrl {
						want = grid[g*nAll+col[m.Controls[k]]]
					}
					if got := u[(n*F+i)*nc+k]; got != want {
						t.Fatalf("noCtrl %v: u[%d,%d,%d] = %v, want %v", noCtrl, n, i, k, got, want)
					}
				}
				for k, id := range m.Targets {
					if got, want := y[(n*F+i)*len(m.Targets)+k], grid[g*nAll+col[id]]; got != want {
						t.Fatalf("noCtrl %v: y[%d,%d,%d] = %v, want %v", noCtrl, n, i, k, got, want)
					}
				}
			}
		}
		for i, v := range mask {
			if v != 0 && v != 1 {
				t.Fatalf("mask[%d] = %v", i, v)
			}
		}
	}
}
