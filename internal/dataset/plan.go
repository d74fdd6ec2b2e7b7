package dataset

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"sort"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// planned is a dataset decided but not yet written: the split, the blocks
// and, per block, the windows (by the grid step of their first future
// value). Static datasets have rows instead of windows.
type planned struct {
	spec   *Spec
	nodes  []node
	grids  []*runGrid
	static bool
	nAll   int
	ctrl   []int // column indices of controls
	tgt    []int // column indices of targets
	inputs []int // static: every non-target column

	blocks   []BlockWindow
	blockRun []*runGrid
	windows  [][]int // per block: first-future grid step of each window

	rows []rowRef // static, in split order

	train, val, test SplitPart
}

type rowRef struct {
	g *runGrid
	i int
}

func (p *planned) total() int { return p.train.Count + p.val.Count + p.test.Count }

func (p *planned) nCtrlCols() int { return max(1, len(p.ctrl)) }

func (p *planned) ctrlNames() []string {
	out := []string{}
	for _, j := range p.ctrl {
		out = append(out, p.nodes[j].NodeID)
	}
	return out
}

func (p *planned) tgtNames() []string {
	out := []string{}
	for _, j := range p.tgt {
		out = append(out, p.nodes[j].NodeID)
	}
	return out
}

func (p *planned) inputNames() []string {
	out := []string{}
	for _, j := range p.inputs {
		out = append(out, p.nodes[j].NodeID)
	}
	return out
}

func (p *planned) gridSteps() int {
	t := 0
	for _, g := range p.grids {
		t += g.steps
	}
	return t
}

func (p *planned) shapes() map[string][]int {
	n, H, F, T := p.total(), p.spec.HistorySteps, p.spec.HorizonSteps, p.gridSteps()
	if p.static {
		return map[string][]int{"x": {n, len(p.inputs)}, "y": {n, len(p.tgt)}, "timestamps": {n}, "grid": {T, p.nAll}, "gridTimestamps": {T}}
	}
	return map[string][]int{
		"x": {n, H, p.nAll}, "u": {n, F, p.nCtrlCols()}, "y": {n, F, len(p.tgt)},
		"timestamps": {n, H + F}, "mask": {n, H + F}, "grid": {T, p.nAll}, "gridTimestamps": {T},
	}
}

func (p *planned) bytes() int64 {
	var b int64
	for name, sh := range p.shapes() {
		n := int64(1)
		for _, d := range sh {
			n *= int64(d)
		}
		if name == "timestamps" || name == "gridTimestamps" {
			b += 8 * n
		} else {
			b += 4 * n
		}
	}
	return b + 1<<20 // JSON files
}

func plan(spec *Spec, nodes []node, grids []*runGrid) (*planned, error) {
	p := &planned{spec: spec, nodes: nodes, grids: grids, static: spec.Purpose == PurposeStaticResponse, nAll: len(nodes)}
	for j, n := range nodes {
		switch n.Role {
		case RoleControl:
			p.ctrl = append(p.ctrl, j)
		case RoleTarget:
			p.tgt = append(p.tgt, j)
		}
		if n.Role != RoleTarget {
			p.inputs = append(p.inputs, j)
		}
	}
	if p.static {
		return p, p.planRows()
	}
	return p, p.planWindows()
}

func (p *planned) planRows() error {
	var all []rowRef
	for _, g := range p.grids {
		for i := 0; i < g.steps; i++ {
			ok := true
			for j := 0; j < p.nAll; j++ {
				if math.IsNaN(g.at(i, j, p.nAll)) {
					ok = false
					break
				}
			}
			if ok {
				all = append(all, rowRef{g, i})
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	tr, va, te, err := SplitRows(len(all), p.spec.Split.ValRatio, p.spec.Split.TestRatio, p.spec.Split.Seed)
	if err != nil {
		return core.Wrap(core.CodeSpecInvalid, err, "split")
	}
	off := 0
	part := func(idx []int) SplitPart {
		runs := map[string]bool{}
		for _, k := range idx {
			p.rows = append(p.rows, all[k])
			runs[all[k].g.run.ID] = true
		}
		sp := SplitPart{RunIDs: sortedKeys(runs), Offset: off, Count: len(idx)}
		off += len(idx)
		return sp
	}
	p.train, p.val, p.test = part(tr), part(va), part(te)
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var splitOrder = map[string]int{SplitTrain: 0, SplitVal: 1, SplitTest: 2}

func (p *planned) planWindows() error {
	H, F, stride := p.spec.HistorySteps, p.spec.HorizonSteps, p.spec.Stride
	byID := map[string]*runGrid{}
	var ids []string
	for _, g := range p.grids {
		byID[g.run.ID] = g
		ids = append(ids, g.run.ID)
	}
	var blocks []Block
	switch p.spec.Split.Mode {
	case SplitModeTimeBlocks:
		for i, g := range p.grids {
			bs, err := SplitTimeBlocks(g.run.ID, g.steps, p.spec.Split.Blocks, H+F, p.spec.Split.ValRatio, p.spec.Split.TestRatio, p.spec.Split.Seed+uint64(i))
			if err != nil {
				return core.Wrap(core.CodeSpecInvalid, err, "split run %s into time blocks", g.run.ID)
			}
			blocks = append(blocks, bs...)
		}
		runIdx := map[string]int{}
		for i, id := range ids {
			runIdx[id] = i
		}
		sort.SliceStable(blocks, func(a, b int) bool {
			x, y := blocks[a], blocks[b]
			if splitOrder[x.Split] != splitOrder[y.Split] {
				return splitOrder[x.Split] < splitOrder[y.Split]
			}
			if runIdx[x.RunID] != runIdx[y.RunID] {
				return runIdx[x.RunID] < runIdx[y.RunID]
			}
			return x.StartStep < y.StartStep
		})
	default:
		var rs RunSplit
		var err error
		if p.spec.Split.Mode == SplitModeExplicit {
			rs, err = explicitSplit(p.spec.Split, byID)
		} else {
			rs, err = SplitRuns(ids, p.spec.Split.ValRatio, p.spec.Split.TestRatio, p.spec.Split.Seed)
		}
		if err != nil {
			return core.Wrap(core.CodeSpecInvalid, err, "split runs")
		}
		for _, id := range rs.Train {
			byID[id].split = SplitTrain
		}
		for _, id := range rs.Val {
			byID[id].split = SplitVal
		}
		for _, id := range rs.Test {
			byID[id].split = SplitTest
		}
		blocks = RunBlocks(rs, func(id string) int { return byID[id].steps })
	}
	// Prefix counts of rows with a missing value, for O(1) window checks.
	badAll := map[*runGrid][]int{}
	badCT := map[*runGrid][]int{}
	for _, g := range p.grids {
		a, c := make([]int, g.steps+1), make([]int, g.steps+1)
		for i := 0; i < g.steps; i++ {
			ba, bc := 0, 0
			for j := 0; j < p.nAll; j++ {
				if math.IsNaN(g.at(i, j, p.nAll)) {
					ba = 1
				}
			}
			for _, j := range append(append([]int{}, p.ctrl...), p.tgt...) {
				if math.IsNaN(g.at(i, j, p.nAll)) {
					bc = 1
				}
			}
			a[i+1], c[i+1] = a[i]+ba, c[i]+bc
		}
		badAll[g], badCT[g] = a, c
	}
	parts := map[string]*SplitPart{SplitTrain: &p.train, SplitVal: &p.val, SplitTest: &p.test}
	runsIn := map[string]map[string]bool{SplitTrain: {}, SplitVal: {}, SplitTest: {}}
	off := 0
	for _, b := range blocks {
		g := byID[b.RunID]
		lo, hi := b.StartStep+b.PurgeBeforeSteps, b.EndStep-b.PurgeAfterSteps
		var ws []int
		a, c := badAll[g], badCT[g]
		for t := lo + H; t+F <= hi; t += stride {
			if a[t]-a[t-H] == 0 && c[t+F]-c[t] == 0 {
				ws = append(ws, t)
			}
		}
		sp := parts[b.Split]
		if sp.Count == 0 {
			sp.Offset = off
		}
		sp.Count += len(ws)
		off += len(ws)
		runsIn[b.Split][b.RunID] = true
		p.blocks = append(p.blocks, BlockWindow{Block: b, WindowOffset: off - len(ws), WindowCount: len(ws)})
		p.blockRun = append(p.blockRun, g)
		p.windows = append(p.windows, ws)
	}
	for s, sp := range parts {
		sp.RunIDs = sortedKeys(runsIn[s])
	}
	// Offsets of empty splits still follow the concatenation order.
	p.val.Offset = p.train.Count
	p.test.Offset = p.train.Count + p.val.Count
	// A split that was asked for but got no window (time blocks too short
	// once purged, or its runs too gappy) is an error, not a silent gap.
	for _, c := range []struct {
		name  string
		ratio float64
		part  *SplitPart
	}{{SplitVal, p.spec.Split.ValRatio, &p.val}, {SplitTest, p.spec.Split.TestRatio, &p.test}} {
		if c.ratio > 0 && c.part.Count == 0 && len(c.part.RunIDs) > 0 {
			return core.FieldErrorf(core.CodeDatasetEmpty, "split", "the %s split (runs %v) has no complete window: its blocks are too short after purging %d steps at each split boundary, or its data too gappy; use fewer blocks, a shorter history/horizon or more data", c.name, c.part.RunIDs, H+F)
		}
	}
	return nil
}

func (p *planned) manifestSplit() ManifestSplit {
	ms := ManifestSplit{Mode: p.spec.Split.Mode, Seed: p.spec.Split.Seed, Train: p.train, Val: p.val, Test: p.test}
	if !p.static {
		ms.Blocks = p.blocks
	}
	return ms
}

func (p *planned) manifestRuns() []ManifestRun {
	var out []ManifestRun
	off := 0
	for _, g := range p.grids {
		mr := ManifestRun{RunID: g.run.ID, Split: g.split, GridOffset: off, GridSteps: g.steps, StartMs: core.UsToMs(g.startUs)}
		if p.spec.BeatUs()%1000 != 0 {
			mr.StartUs = g.startUs
		}
		out = append(out, mr)
		off += g.steps
	}
	return out
}

// norm computes per-column statistics over the train data only. For
// windows, each grid step covered by any train window counts once (stride-1
// windows overlap H+F-fold; counting windows would weigh the middle of a run
// more than its ends).
func (p *planned) norm() Norm {
	n := Norm{Rule: "population mean and std over train data only (each grid step once); std floored at 1e-6 × the column's largest |value| in train, or 1 for an all-zero column"}
	// One running (Welford) accumulator per column, fed the values in the
	// order a column's list of them would hold (runs in order, steps in
	// order): the same figures without holding every train value.
	cols := make([]welford, p.nAll)
	if p.static {
		for _, r := range p.rows[:p.train.Count] {
			for j := 0; j < p.nAll; j++ {
				cols[j].add(r.g.at(r.i, j, p.nAll))
			}
		}
	} else {
		H, F := p.spec.HistorySteps, p.spec.HorizonSteps
		used := map[*runGrid][]bool{}
		for bi, b := range p.blocks {
			if b.Split != SplitTrain {
				continue
			}
			g := p.blockRun[bi]
			u := used[g]
			if u == nil {
				u = make([]bool, g.steps)
				used[g] = u
			}
			for _, t := range p.windows[bi] {
				for i := t - H; i < t+F; i++ {
					u[i] = true
				}
			}
		}
		for _, g := range p.grids {
			u := used[g]
			for i := 0; u != nil && i < g.steps; i++ {
				if !u[i] {
					continue
				}
				for j := 0; j < p.nAll; j++ {
					if v := g.at(i, j, p.nAll); !math.IsNaN(v) {
						cols[j].add(v)
					}
				}
			}
		}
	}
	stat := func(idx []int) Stats {
		s := Stats{Mean: []float64{}, Std: []float64{}}
		for _, j := range idx {
			m, sd := cols[j].meanStd()
			s.Mean, s.Std = append(s.Mean, m), append(s.Std, sd)
		}
		return s
	}
	all := make([]int, p.nAll)
	for j := range all {
		all[j] = j
	}
	if p.static {
		n.X, n.Y, n.U = stat(p.inputs), stat(p.tgt), Stats{Mean: []float64{}, Std: []float64{}}
		return n
	}
	n.X, n.Y = stat(all), stat(p.tgt)
	if len(p.ctrl) == 0 {
		n.U = Stats{Mean: []float64{0}, Std: []float64{1}}
	} else {
		n.U = stat(p.ctrl)
	}
	return n
}

// welford is a running population mean and variance (Welford's update)
// with the largest |value| seen.
type welford struct {
	n            int
	mean, m2, mx float64
}

func (w *welford) add(v float64) {
	w.n++
	d := v - w.mean
	w.mean += d / float64(w.n)
	w.m2 += d * (v - w.mean)
	w.mx = max(w.mx, math.Abs(v))
}

// meanStd is the population mean and std with the relative floor.
func (w *welford) meanStd() (float64, float64) {
	if w.n == 0 {
		return 0, 1
	}
	sd := math.Sqrt(w.m2 / float64(w.n))
	if w.mx == 0 {
		return w.mean, 1
	}
	return w.mean, max(sd, 1e-6*w.mx)
}

// debugWriteDelay pauses a build mid-write. It exists for the crash-safety
// test, which kills the process during the pause; set
// AML_DEBUG_DATASET_WRITE_DELAY (a Go duration) to use it.
func debugWriteDelay() {
	if d, err := time.ParseDuration(os.Getenv("AML_DEBUG_DATASET_WRITE_DELAY")); err == nil && d > 0 {
		time.Sleep(d)
	}
}

// write streams every array into dir, hashing as it goes.
func (p *planned) write(ctx context.Context, dir string) ([]Artifact, error) {
	sh := p.shapes()
	type spec struct{ name, key, dtype string }
	var specs []spec
	if p.static {
		specs = []spec{{"arrays/x.f32", "x", "<f4"}, {"arrays/y.f32", "y", "<f4"}, {"arrays/timestamps.f64", "timestamps", "<f8"},
			{"arrays/grid.f32", "grid", "<f4"}, {"arrays/grid_timestamps.f64", "gridTimestamps", "<f8"}}
	} else {
		specs = []spec{{"arrays/x.f32", "x", "<f4"}, {"arrays/u.f32", "u", "<f4"}, {"arrays/y.f32", "y", "<f4"},
			{"arrays/timestamps.f64", "timestamps", "<f8"}, {"arrays/mask.f32", "mask", "<f4"},
			{"arrays/grid.f32", "grid", "<f4"}, {"arrays/grid_timestamps.f64", "gridTimestamps", "<f8"}}
	}
	files := map[string]*arrayFile{}
	var order []*arrayFile
	closeAll := func() {
		for _, f := range order {
			f.abort()
		}
	}
	for _, s := range specs {
		f, err := createArray(dir, s.name, s.dtype, sh[s.key])
		if err != nil {
			closeAll()
			return nil, err
		}
		files[s.key] = f
		order = append(order, f)
	}
	grid, gts := files["grid"], files["gridTimestamps"]
	beat := p.spec.BeatUs()
	var rb runBytes
	for _, g := range p.grids {
		rb.fill(p, g)
		grid.write(rb.x)
		gts.write(rb.ts)
	}
	debugWriteDelay()
	if p.static {
		x, y, ts := files["x"], files["y"], files["timestamps"]
		for k, r := range p.rows {
			if k%65536 == 0 && ctx.Err() != nil {
				closeAll()
				return nil, core.Wrap(core.CodeStoreUnavailable, ctx.Err(), "build cancelled")
			}
			for _, j := range p.inputs {
				x.f32(r.g.at(r.i, j, p.nAll))
			}
			for _, j := range p.tgt {
				y.f32(r.g.at(r.i, j, p.nAll))
			}
			ts.f64(tsMs(r.g.startUs + int64(r.i)*beat))
		}
	} else {
		// Every array of a window is a contiguous range of its run's rows
		// (x: grid rows t-H…t-1; u, y: rows t…t+F-1 of the control and
		// target columns; timestamps, mask: rows t-H…t+F-1), so each is
		// one copy out of the run's encoded rows (runBytes) instead of a
		// write per value.
		H, F := p.spec.HistorySteps, p.spec.HorizonSteps
		x, u, y, ts, mask := files["x"], files["u"], files["y"], files["timestamps"], files["mask"]
		xw, uw, yw := 4*p.nAll, 4*p.nCtrlCols(), 4*len(p.tgt)
		var cur *runGrid
		for bi := range p.blocks {
			g := p.blockRun[bi]
			if ctx.Err() != nil {
				closeAll()
				return nil, core.Wrap(core.CodeStoreUnavailable, ctx.Err(), "build cancelled")
			}
			if len(p.windows[bi]) > 0 && g != cur {
				rb.fill(p, g)
				cur = g
			}
			for _, t := range p.windows[bi] {
				x.write(rb.x[(t-H)*xw : t*xw])
				u.write(rb.u[t*uw : (t+F)*uw])
				y.write(rb.y[t*yw : (t+F)*yw])
				ts.write(rb.ts[(t-H)*8 : (t+F)*8])
				mask.write(rb.mask[(t-H)*4 : (t+F)*4])
			}
		}
	}
	var arts []Artifact
	for i, f := range order {
		a, err := f.close()
		if err != nil {
			for _, g := range order[i+1:] {
				g.abort()
			}
			return nil, err
		}
		arts = append(arts, a)
	}
	return arts, nil
}

// runBytes is one run's rows encoded as the array files hold them
// (little-endian): x every column, u the control columns (one zero column
// when there is none), y the target columns, as float32; ts the grid
// times (tsMs) as float64; mask 1 where every node was observed, else 0,
// as float32. fill reuses the buffers from run to run.
type runBytes struct {
	x, u, y, ts, mask []byte
}

func (rb *runBytes) fill(p *planned, g *runGrid) {
	T, nAll := g.steps, p.nAll
	rb.x = grow(rb.x, 4*T*nAll)
	for i, v := range g.vals[:T*nAll] {
		binary.LittleEndian.PutUint32(rb.x[4*i:], math.Float32bits(v))
	}
	beat := p.spec.BeatUs()
	rb.ts = grow(rb.ts, 8*T)
	for i := range T {
		binary.LittleEndian.PutUint64(rb.ts[8*i:], math.Float64bits(tsMs(g.startUs+int64(i)*beat)))
	}
	if p.static {
		return
	}
	rb.mask = grow(rb.mask, 4*T)
	for i, ok := range g.observed[:T] {
		var m float32
		if ok {
			m = 1
		}
		binary.LittleEndian.PutUint32(rb.mask[4*i:], math.Float32bits(m))
	}
	nc := p.nCtrlCols()
	rb.u = grow(rb.u, 4*T*nc)
	if len(p.ctrl) == 0 {
		clear(rb.u) // float32 0 is four zero bytes
	}
	rb.y = grow(rb.y, 4*T*len(p.tgt))
	for i := range T {
		row := g.vals[i*nAll : (i+1)*nAll]
		for k, j := range p.ctrl {
			binary.LittleEndian.PutUint32(rb.u[4*(i*nc+k):], math.Float32bits(row[j]))
		}
		for k, j := range p.tgt {
			binary.LittleEndian.PutUint32(rb.y[4*(i*len(p.tgt)+k):], math.Float32bits(row[j]))
		}
	}
}

// grow returns b with length n, reusing its array when large enough.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// explicitSplit assigns the used runs by name. A listed run that was dropped
// by the build is simply absent; a used run nobody listed is an error.
func explicitSplit(sp Split, used map[string]*runGrid) (RunSplit, error) {
	var rs RunSplit
	listed := map[string]bool{}
	pick := func(ids []string) []string {
		out := []string{}
		for _, id := range ids {
			listed[id] = true
			if _, ok := used[id]; ok {
				out = append(out, id)
			}
		}
		sort.Strings(out)
		return out
	}
	rs.Train, rs.Val, rs.Test = pick(sp.TrainRunIDs), pick(sp.ValRunIDs), pick(sp.TestRunIDs)
	for id := range used {
		if !listed[id] {
			return rs, core.FieldErrorf(core.CodeSpecInvalid, "split.trainRunIds", "run %s is used but not assigned to train, val or test", id)
		}
	}
	if len(rs.Train) == 0 {
		return rs, core.FieldErrorf(core.CodeDatasetEmpty, "split.trainRunIds", "none of the train runs is usable")
	}
	return rs, nil
}

// tsMs is a grid time (epoch µs) as the timestamp arrays hold it: epoch ms
// as float64, exact for whole milliseconds (every dataset before
// sub-millisecond beats keeps its bytes and hash), with the µs as a
// fraction otherwise (float64 holds today's epoch ms to about 0.2 µs).
func tsMs(us int64) float64 {
	if us%1000 == 0 {
		return float64(us / 1000)
	}
	return float64(us) / 1000
}
