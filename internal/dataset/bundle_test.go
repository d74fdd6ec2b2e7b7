package dataset

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// writeTestArray writes a little-endian array file and returns its entry.
func writeTestArray(t *testing.T, dir, name, dtype string, shape []int, vals []float64) Artifact {
	t.Helper()
	var b []byte
	for _, v := range vals {
		if dtype == "<f8" {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		} else {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		}
	}
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return Artifact{Name: name, DType: dtype, Shape: shape, Bytes: int64(len(b)), SHA256: sha256hex(b)}
}

// handDynamic writes a tiny dynamic dataset: one run of 6 grid steps with
// columns c (control), t (target); H=2, F=1, stride 1 → windows start
// their future at steps 2..5 (4 windows: train 2, val 1, test 1).
// Grid value of column j at step i is 10·i + j.
func handDynamic(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	const steps, H, F, nAll = 6, 2, 1, 2
	start := int64(1_000_000)
	grid := func(i, j int) float64 { return float64(10*i + j) }
	var x, u, y, ts, mask, g, gts []float64
	N := 0
	for tf := H; tf+F <= steps; tf++ {
		N++
		for i := tf - H; i < tf; i++ {
			for j := 0; j < nAll; j++ {
				x = append(x, grid(i, j))
			}
		}
		for i := tf; i < tf+F; i++ {
			u = append(u, grid(i, 0))
			y = append(y, grid(i, 1))
		}
		for i := tf - H; i < tf+F; i++ {
			ts = append(ts, float64(start+int64(i)*1000))
			mask = append(mask, 1)
		}
	}
	for i := 0; i < steps; i++ {
		for j := 0; j < nAll; j++ {
			g = append(g, grid(i, j))
		}
		gts = append(gts, float64(start+int64(i)*1000))
	}
	shapes := map[string][]int{"x": {N, H, nAll}, "u": {N, F, 1}, "y": {N, F, 1}, "timestamps": {N, H + F}, "mask": {N, H + F}, "grid": {steps, nAll}, "gridTimestamps": {steps}}
	arts := []Artifact{
		writeTestArray(t, dir, "arrays/x.f32", "<f4", shapes["x"], x),
		writeTestArray(t, dir, "arrays/u.f32", "<f4", shapes["u"], u),
		writeTestArray(t, dir, "arrays/y.f32", "<f4", shapes["y"], y),
		writeTestArray(t, dir, "arrays/timestamps.f64", "<f8", shapes["timestamps"], ts),
		writeTestArray(t, dir, "arrays/mask.f32", "<f4", shapes["mask"], mask),
		writeTestArray(t, dir, "arrays/grid.f32", "<f4", shapes["grid"], g),
		writeTestArray(t, dir, "arrays/grid_timestamps.f64", "<f8", shapes["gridTimestamps"], gts),
	}
	m := Manifest{
		FormatVersion: FormatVersion, Kind: KindDynamic, Purpose: PurposeMPCSurrogate,
		AllNodes: []string{"c", "t"}, Controls: []string{"c"}, Targets: []string{"t"},
		BeatMs: 1000, HistorySteps: H, HorizonSteps: F, Stride: 1, Shapes: shapes,
		Split: ManifestSplit{Mode: SplitModeTimeBlocks,
			Train: SplitPart{RunIDs: []string{"r1"}, Offset: 0, Count: 2},
			Val:   SplitPart{RunIDs: []string{"r1"}, Offset: 2, Count: 1},
			Test:  SplitPart{RunIDs: []string{"r1"}, Offset: 3, Count: 1}},
		Runs:      []ManifestRun{{RunID: "r1", GridOffset: 0, GridSteps: steps, StartMs: start}},
		Artifacts: arts,
	}
	writeManifest(t, dir, &m)
	return dir
}

func writeManifest(t *testing.T, dir string, m *Manifest) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readManifest(t *testing.T, dir string) *Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestOpenBundleDynamic(t *testing.T) {
	dir := handDynamic(t)
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := b.Dims()
	if d.N != 4 || d.H != 2 || d.F != 1 || d.XCols != 2 || d.UCols != 1 || d.YCols != 1 || d.Static {
		t.Fatalf("dims %+v", d)
	}
	for _, c := range []struct {
		name   string
		lo, hi int
	}{{"train", 0, 2}, {"val", 2, 3}, {"test", 3, 4}, {"bogus", 0, 0}} {
		if lo, hi := b.Split(c.name); lo != c.lo || hi != c.hi {
			t.Fatalf("split %s = [%d,%d), want [%d,%d)", c.name, lo, hi, c.lo, c.hi)
		}
	}
	// Window 1: future at step 3, history steps 1, 2.
	x, u, y := b.Window(1)
	if want := []float32{10, 11, 20, 21}; !equalF32(x, want) {
		t.Fatalf("x %v want %v", x, want)
	}
	if !equalF32(u, []float32{30}) || !equalF32(y, []float32{31}) {
		t.Fatalf("u %v y %v", u, y)
	}
	if ts := b.WindowTS(1); len(ts) != 3 || ts[0] != 1_001_000 || ts[2] != 1_003_000 {
		t.Fatalf("ts %v", ts)
	}
	gts, vals, ok := b.RunGrid("r1")
	if !ok || len(gts) != 6 || len(vals) != 12 || vals[2*5+1] != 51 || gts[5] != 1_005_000 {
		t.Fatalf("grid %v %v %v", ok, gts, vals)
	}
	if _, _, ok := b.RunGrid("nope"); ok {
		t.Fatal("unknown run found")
	}
	// Views cannot be appended into the next window.
	if cap(x) != len(x) {
		t.Fatalf("window view has spare capacity %d", cap(x))
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func wantTampered(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if core.CodeOf(err) != core.CodeDatasetTampered {
		t.Fatalf("%s: code %s (%v), want %s", what, core.CodeOf(err), err, core.CodeDatasetTampered)
	}
}

func TestOpenBundleSizeMismatch(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-4] }},
		{"extended", func(b []byte) []byte { return append(b, 0, 0, 0, 0) }},
		{"one byte short", func(b []byte) []byte { return b[:len(b)-1] }},
	} {
		for _, name := range []string{"arrays/x.f32", "arrays/timestamps.f64", "arrays/grid.f32"} {
			dir := handDynamic(t)
			p := filepath.Join(dir, filepath.FromSlash(name))
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, c.edit(b), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenBundle(dir)
			wantTampered(t, err, c.name+" "+name)
		}
	}
}

func TestOpenBundleInconsistentManifest(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(m *Manifest)
	}{
		{"shape disagrees with shapes", func(m *Manifest) { m.Shapes["x"] = []int{4, 2, 3} }},
		{"artifact shape disagrees", func(m *Manifest) { m.Artifacts[0].Shape = []int{2, 4, 2} }},
		{"horizon disagrees", func(m *Manifest) { m.HorizonSteps = 2 }},
		{"dtype", func(m *Manifest) { m.Artifacts[1].DType = "<f8" }},
		{"missing array", func(m *Manifest) { m.Artifacts = m.Artifacts[1:] }},
		{"split gap", func(m *Manifest) { m.Split.Test.Offset = 4 }},
		{"split count", func(m *Manifest) { m.Split.Test.Count = 2 }},
		{"run outside grid", func(m *Manifest) { m.Runs[0].GridSteps = 7 }},
		{"kind", func(m *Manifest) { m.Kind = "other" }},
		{"format version", func(m *Manifest) { m.FormatVersion = 2 }},
	} {
		dir := handDynamic(t)
		m := readManifest(t, dir)
		c.edit(m)
		writeManifest(t, dir, m)
		_, err := OpenBundle(dir)
		wantTampered(t, err, c.name)
	}
	dir := handDynamic(t)
	if err := os.Remove(filepath.Join(dir, "arrays", "mask.f32")); err != nil {
		t.Fatal(err)
	}
	_, err := OpenBundle(dir)
	wantTampered(t, err, "missing file")
	_, err = OpenBundle(t.TempDir())
	wantTampered(t, err, "no manifest")
}

func TestOpenBundleStatic(t *testing.T) {
	dir := t.TempDir()
	// 5 rows, inputs a, b; target q; grid of 5 steps, columns a, b, q.
	var x, y, ts, g, gts []float64
	for i := 0; i < 5; i++ {
		a, b := float64(i), float64(2*i)
		x = append(x, a, b)
		y = append(y, a+b)
		ts = append(ts, float64(1000*i))
		g = append(g, a, b, a+b)
		gts = append(gts, float64(1000*i))
	}
	shapes := map[string][]int{"x": {5, 2}, "y": {5, 1}, "timestamps": {5}, "grid": {5, 3}, "gridTimestamps": {5}}
	m := Manifest{FormatVersion: FormatVersion, Kind: KindStatic, Purpose: PurposeStaticResponse,
		AllNodes: []string{"a", "b", "q"}, Controls: []string{"b"}, Inputs: []string{"a", "b"}, Targets: []string{"q"},
		Shapes: shapes,
		Split:  ManifestSplit{Mode: SplitModeByRow, Train: SplitPart{Count: 3}, Val: SplitPart{Offset: 3, Count: 1}, Test: SplitPart{Offset: 4, Count: 1}},
		Runs:   []ManifestRun{{RunID: "r", GridSteps: 5}},
		Artifacts: []Artifact{
			writeTestArray(t, dir, "arrays/x.f32", "<f4", shapes["x"], x),
			writeTestArray(t, dir, "arrays/y.f32", "<f4", shapes["y"], y),
			writeTestArray(t, dir, "arrays/timestamps.f64", "<f8", shapes["timestamps"], ts),
			writeTestArray(t, dir, "arrays/grid.f32", "<f4", shapes["grid"], g),
			writeTestArray(t, dir, "arrays/grid_timestamps.f64", "<f8", shapes["gridTimestamps"], gts),
		}}
	writeManifest(t, dir, &m)
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := b.Dims()
	if !d.Static || d.H != 1 || d.F != 1 || d.XCols != 2 || d.UCols != 0 || d.YCols != 1 {
		t.Fatalf("dims %+v", d)
	}
	xr, u, yr := b.Window(4)
	if !equalF32(xr, []float32{4, 8}) || u != nil || !equalF32(yr, []float32{12}) {
		t.Fatalf("row 4: %v %v %v", xr, u, yr)
	}
	if lo, hi := b.Split("test"); lo != 4 || hi != 5 {
		t.Fatalf("test [%d,%d)", lo, hi)
	}
	if ts := b.WindowTS(2); len(ts) != 1 || ts[0] != 2000 {
		t.Fatalf("ts %v", ts)
	}
}

// TestOpenBundleBuilt opens a real build of the simulated line and checks
// every window against its run's grid.
func TestOpenBundleBuilt(t *testing.T) {
	st, dir := simulated(t)
	res, err := Build(context.Background(), st, injectionSpec(t), Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, res.Dataset); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBundle(filepath.Join(dir, res.Dataset.Path))
	if err != nil {
		t.Fatal(err)
	}
	d, m := b.Dims(), b.Manifest
	if d.N != res.Dataset.TrainWindows+res.Dataset.ValWindows+res.Dataset.TestWindows {
		t.Fatalf("N %d", d.N)
	}
	if lo, hi := b.Split("val"); hi-lo != res.Dataset.ValWindows {
		t.Fatalf("val [%d,%d)", lo, hi)
	}
	col := map[string]int{}
	for j, n := range m.AllNodes {
		col[n] = j
	}
	checked := 0
	for _, bw := range m.Split.Blocks {
		gts, vals, ok := b.RunGrid(bw.RunID)
		if !ok {
			t.Fatalf("block %s: run %s has no grid", bw.BlockID, bw.RunID)
		}
		for n := bw.WindowOffset; n < bw.WindowOffset+bw.WindowCount; n += 97 {
			ts := b.WindowTS(n)
			first := int((ts[0] - gts[0]) / float64(m.BeatMs))
			x, u, y := b.Window(n)
			for h := 0; h < d.H; h++ {
				if gts[first+h] != ts[h] {
					t.Fatalf("window %d: ts %v != grid ts %v", n, ts[h], gts[first+h])
				}
				for j := 0; j < d.NAll; j++ {
					if math.Float32bits(x[h*d.XCols+j]) != math.Float32bits(vals[(first+h)*d.NAll+j]) {
						t.Fatalf("window %d x[%d,%d] %v != grid %v", n, h, j, x[h*d.XCols+j], vals[(first+h)*d.NAll+j])
					}
				}
			}
			for f := 0; f < d.F; f++ {
				row := first + d.H + f
				for k, name := range m.Targets {
					if y[f*d.YCols+k] != vals[row*d.NAll+col[name]] {
						t.Fatalf("window %d y[%d,%d]", n, f, k)
					}
				}
				for k, name := range m.Controls {
					if u[f*d.UCols+k] != vals[row*d.NAll+col[name]] {
						t.Fatalf("window %d u[%d,%d]", n, f, k)
					}
				}
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("only %d windows checked", checked)
	}
}
