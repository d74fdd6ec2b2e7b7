package dataset

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/aml-project/aml/internal/core"
)

// Bundle is a dataset directory loaded into memory: its manifest and every
// array, decoded from little-endian files. Dynamic datasets hold
//
//	X      [N, H, nAll]        history of every column
//	U      [N, F, max(1,nCtrl)] future controls (one zero column if none)
//	Y      [N, F, nTgt]         future targets
//	TS     [N, H+F]             window timestamps (Unix ms)
//	Mask   [N, H+F]             1 observed, 0 filled
//	Grid   [T, nAll], GridTS [T] every used run's aligned grid
//
// and static datasets X [N, nIn], Y [N, nTgt], TS [N] (U and Mask nil) plus
// the grid. Windows (rows) are in split order train | val | test.
type Bundle struct {
	Dir      string
	Manifest *Manifest
	X, U, Y  []float32
	TS       []float64
	Mask     []float32
	Grid     []float32
	GridTS   []float64
}

// Dims are the array dimensions a manifest implies.
type Dims struct {
	Static bool
	N      int // windows (rows)
	H      int // history steps; 1 for static datasets (one input row)
	F      int // horizon steps; 1 for static datasets
	XCols  int // dynamic: nAll; static: len(Inputs)
	NCtrl  int // number of controls (0 for static datasets)
	UCols  int // width of the u array: max(1, NCtrl); 0 for static datasets
	YCols  int // number of targets
	NAll   int // every column (width of the grid)
}

// XLen, ULen and YLen are the number of values per window in X, U and Y.
func (d Dims) XLen() int { return d.H * d.XCols }
func (d Dims) ULen() int { return d.F * d.UCols }
func (d Dims) YLen() int { return d.F * d.YCols }

// Dims returns the array dimensions the manifest describes.
func (m *Manifest) Dims() Dims {
	d := Dims{
		Static: m.Kind == KindStatic,
		N:      m.Split.Train.Count + m.Split.Val.Count + m.Split.Test.Count,
		YCols:  len(m.Targets),
		NAll:   len(m.AllNodes),
	}
	if d.Static {
		d.H, d.F, d.XCols = 1, 1, len(m.Inputs)
		return d
	}
	d.H, d.F, d.XCols = m.HistorySteps, m.HorizonSteps, len(m.AllNodes)
	d.NCtrl = len(m.Controls)
	d.UCols = max(1, d.NCtrl)
	return d
}

// maxManifestBytes bounds manifest.json; a real one is a few hundred KiB.
const maxManifestBytes = 256 << 20

// OpenBundle reads dir/manifest.json and every array the dataset kind needs.
// Each array's size must be exactly prod(shape)·itemsize, its shape must
// agree with manifest.shapes and with the dimensions the manifest implies,
// and the split ranges must tile the windows; anything else is
// AML_DATASET_TAMPERED. OpenBundle does not check hashes: call [Verify]
// first.
func OpenBundle(dir string) (*Bundle, error) {
	mpath := filepath.Join(dir, "manifest.json")
	st, err := os.Stat(mpath)
	if err != nil {
		return nil, core.Wrap(core.CodeDatasetTampered, err, "read manifest.json")
	}
	if st.Size() > maxManifestBytes {
		return nil, core.Errorf(core.CodeDatasetTampered, "manifest.json is %d bytes (limit %d)", st.Size(), maxManifestBytes)
	}
	mb, err := os.ReadFile(mpath)
	if err != nil {
		return nil, core.Wrap(core.CodeDatasetTampered, err, "read manifest.json")
	}
	var m Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, core.Wrap(core.CodeDatasetTampered, err, "decode manifest.json")
	}
	if m.FormatVersion != FormatVersion {
		return nil, core.FieldErrorf(core.CodeDatasetTampered, "manifest.json", "formatVersion %d is not supported (this build reads %d)", m.FormatVersion, FormatVersion)
	}
	if m.Kind != KindDynamic && m.Kind != KindStatic {
		return nil, core.FieldErrorf(core.CodeDatasetTampered, "manifest.json", "unknown kind %q", m.Kind)
	}
	d := m.Dims()
	if d.H < 1 || d.F < 1 || d.XCols < 1 || d.YCols < 1 || d.NAll < 1 {
		return nil, core.FieldErrorf(core.CodeDatasetTampered, "manifest.json", "bad dimensions: history %d, horizon %d, %d input column(s), %d target(s)", d.H, d.F, d.XCols, d.YCols)
	}
	T := 0
	if g, ok := m.Shapes["gridTimestamps"]; ok && len(g) == 1 {
		T = g[0]
	}
	type want struct {
		name, key, dtype string
		shape            []int
	}
	var wants []want
	if d.Static {
		wants = []want{
			{"arrays/x.f32", "x", "<f4", []int{d.N, d.XCols}},
			{"arrays/y.f32", "y", "<f4", []int{d.N, d.YCols}},
			{"arrays/timestamps.f64", "timestamps", "<f8", []int{d.N}},
		}
	} else {
		wants = []want{
			{"arrays/x.f32", "x", "<f4", []int{d.N, d.H, d.XCols}},
			{"arrays/u.f32", "u", "<f4", []int{d.N, d.F, d.UCols}},
			{"arrays/y.f32", "y", "<f4", []int{d.N, d.F, d.YCols}},
			{"arrays/timestamps.f64", "timestamps", "<f8", []int{d.N, d.H + d.F}},
			{"arrays/mask.f32", "mask", "<f4", []int{d.N, d.H + d.F}},
		}
	}
	wants = append(wants,
		want{"arrays/grid.f32", "grid", "<f4", []int{T, d.NAll}},
		want{"arrays/grid_timestamps.f64", "gridTimestamps", "<f8", []int{T}})
	arts := map[string]Artifact{}
	for _, a := range m.Artifacts {
		arts[a.Name] = a
	}
	b := &Bundle{Dir: dir, Manifest: &m}
	for _, w := range wants {
		a, ok := arts[w.name]
		if !ok {
			return nil, core.FieldErrorf(core.CodeDatasetTampered, w.name, "array is not listed in the manifest")
		}
		if a.DType != w.dtype {
			return nil, core.FieldErrorf(core.CodeDatasetTampered, w.name, "dtype %q, want %q", a.DType, w.dtype)
		}
		if !equalShape(a.Shape, w.shape) {
			return nil, core.FieldErrorf(core.CodeDatasetTampered, w.name, "shape %v, the manifest's dimensions imply %v", a.Shape, w.shape)
		}
		if sh, ok := m.Shapes[w.key]; !ok || !equalShape(sh, w.shape) {
			return nil, core.FieldErrorf(core.CodeDatasetTampered, w.name, "manifest.shapes[%q] is %v, want %v", w.key, sh, w.shape)
		}
		count := int64(1)
		for _, n := range w.shape {
			count *= int64(n)
		}
		path := filepath.Join(dir, filepath.FromSlash(w.name))
		switch w.dtype {
		case "<f4":
			v, err := readF32File(path, w.name, count)
			if err != nil {
				return nil, err
			}
			switch w.key {
			case "x":
				b.X = v
			case "u":
				b.U = v
			case "y":
				b.Y = v
			case "mask":
				b.Mask = v
			case "grid":
				b.Grid = v
			}
		case "<f8":
			v, err := readF64File(path, w.name, count)
			if err != nil {
				return nil, err
			}
			switch w.key {
			case "timestamps":
				b.TS = v
			case "gridTimestamps":
				b.GridTS = v
			}
		}
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// Validate checks that the in-memory arrays have the lengths the manifest
// implies and that the split ranges tile the windows, so [Bundle.Window]
// and [Bundle.RunGrid] cannot go out of range. OpenBundle calls it; call it
// on a Bundle built by hand.
func (b *Bundle) Validate() error {
	if b.Manifest == nil {
		return core.Errorf(core.CodeDatasetTampered, "bundle has no manifest")
	}
	m, d := b.Manifest, b.Manifest.Dims()
	sp := m.Split
	if sp.Train.Offset != 0 || sp.Val.Offset != sp.Train.Count || sp.Test.Offset != sp.Train.Count+sp.Val.Count ||
		sp.Train.Count < 0 || sp.Val.Count < 0 || sp.Test.Count < 0 {
		return core.FieldErrorf(core.CodeDatasetTampered, "manifest.json", "split offsets/counts do not tile train|val|test: %d+%d, %d+%d, %d+%d",
			sp.Train.Offset, sp.Train.Count, sp.Val.Offset, sp.Val.Count, sp.Test.Offset, sp.Test.Count)
	}
	if d.H < 1 || d.F < 1 || d.XCols < 1 || d.YCols < 1 || d.NAll < 1 {
		return core.FieldErrorf(core.CodeDatasetTampered, "manifest.json", "bad dimensions: history %d, horizon %d, %d input column(s), %d target(s), %d column(s)", d.H, d.F, d.XCols, d.YCols, d.NAll)
	}
	tsw := 1
	if !d.Static {
		tsw = d.H + d.F
	}
	T := len(b.GridTS)
	check := func(name string, got, want int) error {
		if got != want {
			return core.FieldErrorf(core.CodeDatasetTampered, name, "%d values, the manifest implies %d", got, want)
		}
		return nil
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"x", len(b.X), d.N * d.XLen()},
		{"u", len(b.U), d.N * d.ULen()},
		{"y", len(b.Y), d.N * d.YLen()},
		{"timestamps", len(b.TS), d.N * tsw},
		{"grid", len(b.Grid), T * d.NAll},
	} {
		if err := check(c.name, c.got, c.want); err != nil {
			return err
		}
	}
	if !d.Static {
		if err := check("mask", len(b.Mask), d.N*tsw); err != nil {
			return err
		}
	}
	for _, r := range m.Runs {
		if r.GridOffset < 0 || r.GridSteps < 0 || r.GridOffset+r.GridSteps > T {
			return core.FieldErrorf(core.CodeDatasetTampered, "manifest.json", "run %s: grid rows [%d, %d) outside the grid of %d rows", r.RunID, r.GridOffset, r.GridOffset+r.GridSteps, T)
		}
	}
	for _, bw := range m.Split.Blocks {
		if bw.WindowOffset < 0 || bw.WindowCount < 0 || bw.WindowOffset+bw.WindowCount > d.N {
			return core.FieldErrorf(core.CodeDatasetTampered, "manifest.json", "block %s: windows [%d, %d) outside the %d windows", bw.BlockID, bw.WindowOffset, bw.WindowOffset+bw.WindowCount, d.N)
		}
	}
	return nil
}

func equalShape(a, b []int) bool {
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

// openSized opens an array file and checks its size is exactly want bytes.
func openSized(path, name string, want int64) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, core.Wrap(core.CodeDatasetTampered, err, "open %s", name)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, core.Wrap(core.CodeDatasetTampered, err, "stat %s", name)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, core.FieldErrorf(core.CodeDatasetTampered, name, "not a regular file")
	}
	if st.Size() != want {
		f.Close()
		return nil, core.FieldErrorf(core.CodeDatasetTampered, name, "%d bytes, its shape needs %d", st.Size(), want)
	}
	return f, nil
}

// readF32File decodes count little-endian float32 values, in chunks so a
// large array is never held twice.
func readF32File(path, name string, count int64) ([]float32, error) {
	f, err := openSized(path, name, 4*count)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]float32, count)
	// The 64 KiB chunk buffer is the only buffering needed; a large
	// bufio.Reader per file cost more than the read itself on small
	// datasets (measured in BenchmarkJobsEndToEnd).
	r := f
	buf := make([]byte, min(1<<16, int(8*count)+8))
	for i := int64(0); i < count; {
		n := min(int64(len(buf)/4), count-i)
		if _, err := io.ReadFull(r, buf[:4*n]); err != nil {
			return nil, core.Wrap(core.CodeDatasetTampered, err, "read %s", name)
		}
		for k := int64(0); k < n; k++ {
			out[i+k] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*k:]))
		}
		i += n
	}
	return out, nil
}

func readF64File(path, name string, count int64) ([]float64, error) {
	f, err := openSized(path, name, 8*count)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make([]float64, count)
	// The 64 KiB chunk buffer is the only buffering needed; a large
	// bufio.Reader per file cost more than the read itself on small
	// datasets (measured in BenchmarkJobsEndToEnd).
	r := f
	buf := make([]byte, min(1<<16, int(8*count)+8))
	for i := int64(0); i < count; {
		n := min(int64(len(buf)/8), count-i)
		if _, err := io.ReadFull(r, buf[:8*n]); err != nil {
			return nil, core.Wrap(core.CodeDatasetTampered, err, "read %s", name)
		}
		for k := int64(0); k < n; k++ {
			out[i+k] = math.Float64frombits(binary.LittleEndian.Uint64(buf[8*k:]))
		}
		i += n
	}
	return out, nil
}

// Dims returns the bundle's array dimensions (from its manifest).
func (b *Bundle) Dims() Dims { return b.Manifest.Dims() }

// Split returns the [lo, hi) window (row) range of "train", "val" or
// "test"; an unknown name gives an empty range.
func (b *Bundle) Split(name string) (lo, hi int) {
	var p SplitPart
	switch name {
	case SplitTrain:
		p = b.Manifest.Split.Train
	case SplitVal:
		p = b.Manifest.Split.Val
	case SplitTest:
		p = b.Manifest.Split.Test
	default:
		return 0, 0
	}
	return p.Offset, p.Offset + p.Count
}

// Window returns views (not copies) of window n: x [H·nAll], u [F·uCols],
// y [F·nTgt]. For static datasets it is row n: x [nIn], u nil, y [nTgt].
// It panics when n is out of range, like a slice index.
func (b *Bundle) Window(n int) (x, u, y []float32) {
	d := b.Manifest.Dims()
	xl, ul, yl := d.XLen(), d.ULen(), d.YLen()
	x = b.X[n*xl : (n+1)*xl : (n+1)*xl]
	if ul > 0 {
		u = b.U[n*ul : (n+1)*ul : (n+1)*ul]
	}
	y = b.Y[n*yl : (n+1)*yl : (n+1)*yl]
	return x, u, y
}

// WindowTS returns a view of window n's timestamps: H+F values for dynamic
// datasets, one for static datasets.
func (b *Bundle) WindowTS(n int) []float64 {
	w := 1
	if d := b.Manifest.Dims(); !d.Static {
		w = d.H + d.F
	}
	return b.TS[n*w : (n+1)*w : (n+1)*w]
}

// RunGrid returns views of a run's aligned grid: its timestamps [steps] and
// values [steps·nAll] (row-major, columns in AllNodes order, NaN where
// missing). ok is false when the dataset does not use the run.
func (b *Bundle) RunGrid(runID string) (ts []float64, vals []float32, ok bool) {
	for _, r := range b.Manifest.Runs {
		if r.RunID != runID {
			continue
		}
		lo, hi := r.GridOffset, r.GridOffset+r.GridSteps
		n := len(b.Manifest.AllNodes)
		return b.GridTS[lo:hi:hi], b.Grid[lo*n : hi*n : hi*n], true
	}
	return nil, nil, false
}
