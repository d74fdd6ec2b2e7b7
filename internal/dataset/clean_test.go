package dataset

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// ---- helpers ----

// ctSeries returns points at t0, t0+dt, ... with the given values, state ok.
func ctSeries(t0, dt int64, vals ...float64) []core.Point {
	pts := make([]core.Point, len(vals))
	for i, v := range vals {
		pts[i] = core.Point{TsUs: t0 + int64(i)*dt, Value: v, State: core.StateOK}
	}
	return pts
}

func ctConst(n int, v float64) []float64 {
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = v
	}
	return vals
}

func ctNoisy(n int, level, sigma float64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 7))
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = level + sigma*r.NormFloat64()
	}
	return vals
}

// ctCheck verifies the invariants every Clean result must satisfy: counts
// consistent, kept ⊆ input (same point), in time order, finite values.
func ctCheck(t *testing.T, in, kept []core.Point, c CleanCounts) {
	t.Helper()
	if c.Raw != len(in) {
		t.Errorf("Raw = %d, want %d", c.Raw, len(in))
	}
	if c.Kept != len(kept) {
		t.Errorf("Kept = %d, len(kept) = %d", c.Kept, len(kept))
	}
	if c.State+c.Range+c.Hampel+c.Kept != c.Raw {
		t.Errorf("counts do not sum: %+v", c)
	}
	if c.State < 0 || c.Range < 0 || c.Hampel < 0 {
		t.Errorf("negative count: %+v", c)
	}
	if kept == nil {
		t.Errorf("kept is nil")
	}
	// kept must be a subsequence of the (time-sorted) input.
	j := 0
	for _, p := range kept {
		for j < len(in) && in[j] != p && !(in[j].TsUs == p.TsUs && math.IsNaN(in[j].Value) && math.IsNaN(p.Value) && in[j].State == p.State) {
			j++
		}
		if j == len(in) {
			t.Fatalf("kept point %+v is not in the input (or out of order)", p)
		}
		j++
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			t.Errorf("kept non-finite value %+v", p)
		}
	}
	if len(kept) > 0 && len(in) > 0 && &kept[0] == &in[0] {
		t.Errorf("kept aliases the input")
	}
}

// ctRemoved returns the timestamps of input points missing from kept.
func ctRemoved(in, kept []core.Point) []int64 {
	k := make(map[int64]bool, len(kept))
	for _, p := range kept {
		k[p.TsUs] = true
	}
	var out []int64
	for _, p := range in {
		if !k[p.TsUs] {
			out = append(out, p.TsUs)
		}
	}
	return out
}

func ctPtr(v float64) *float64 { return &v }

var ctHampel = CleanConfig{HampelWindowUs: 5000, HampelThreshold: 3}

// ---- state and range ----

func TestCleanStateAndRange(t *testing.T) {
	pts := []core.Point{
		{TsUs: 1, Value: 5, State: "ok"},
		{TsUs: 2, Value: 5, State: ""},
		{TsUs: 3, Value: 5, State: "bad"},
		{TsUs: 4, Value: 5, State: "uncertain"},
		{TsUs: 5, Value: 5, State: "OK"},                           // exact match only
		{TsUs: 6, Value: 0, State: "ok"},                           // == Min
		{TsUs: 7, Value: 10, State: "ok"},                          // == Max
		{TsUs: 8, Value: -0.001, State: "ok"},                      // < Min
		{TsUs: 9, Value: 10.001, State: "ok"},                      // > Max
		{TsUs: 10, Value: 1e6, State: "bad"},                       // out of range AND bad: counted as state
		{TsUs: 11, Value: math.NaN(), State: "ok"},                 // never kept
		{TsUs: 12, Value: math.Inf(1), State: ""},                  // never kept
		{TsUs: 13, Value: math.Inf(-1), State: "ok"},               // never kept
		{TsUs: 14, Value: math.NaN(), State: "substituted"},        // state first
		{TsUs: 15, Value: -math.SmallestNonzeroFloat64, State: ""}, // < Min 0
	}
	cases := []struct {
		name     string
		cfg      CleanConfig
		keptTs   []int64
		st, rg   int
		wantKept int
	}{
		{"no rules", CleanConfig{}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15}, 0, 4, 11},
		{"state only", CleanConfig{StateFilter: true}, []int64{1, 2, 6, 7, 8, 9, 15}, 5, 3, 7},
		{"range only", CleanConfig{Min: ctPtr(0), Max: ctPtr(10)}, []int64{1, 2, 3, 4, 5, 6, 7}, 0, 8, 7},
		{"state and range", CleanConfig{StateFilter: true, Min: ctPtr(0), Max: ctPtr(10)}, []int64{1, 2, 6, 7}, 5, 6, 4},
		{"min only", CleanConfig{StateFilter: true, Min: ctPtr(0)}, []int64{1, 2, 6, 7, 9}, 5, 5, 5},
		{"max only", CleanConfig{StateFilter: true, Max: ctPtr(10)}, []int64{1, 2, 6, 7, 8, 15}, 5, 4, 6},
		{"degenerate range min==max", CleanConfig{Min: ctPtr(5), Max: ctPtr(5)}, []int64{1, 2, 3, 4, 5}, 0, 10, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kept, c := Clean(pts, tc.cfg)
			ctCheck(t, pts, kept, c)
			var got []int64
			for _, p := range kept {
				got = append(got, p.TsUs)
			}
			if !slices.Equal(got, tc.keptTs) {
				t.Errorf("kept %v, want %v", got, tc.keptTs)
			}
			if c.State != tc.st || c.Range != tc.rg || c.Hampel != 0 || c.Kept != tc.wantKept {
				t.Errorf("counts %+v, want state %d range %d kept %d", c, tc.st, tc.rg, tc.wantKept)
			}
		})
	}
}

func TestCleanEmptyAndInputUntouched(t *testing.T) {
	for _, in := range [][]core.Point{nil, {}} {
		kept, c := Clean(in, CleanConfig{StateFilter: true, HampelWindowUs: 5000, HampelThreshold: 3})
		if kept == nil || len(kept) != 0 || c != (CleanCounts{}) {
			t.Errorf("Clean(%v) = %v, %+v", in, kept, c)
		}
	}
	in := ctSeries(0, 1000, 1, 1, 1, 1, 1, 99, 1, 1, 1, 1, 1)
	in[2].State = "bad"
	orig := slices.Clone(in)
	kept, c := Clean(in, CleanConfig{StateFilter: true, HampelWindowUs: 5000, HampelThreshold: 3})
	ctCheck(t, in, kept, c)
	if !slices.Equal(in, orig) {
		t.Errorf("input modified")
	}
	if c.State != 1 || c.Hampel != 1 || c.Kept != 9 {
		t.Errorf("counts %+v", c)
	}
	kept[0].Value = 1234
	if in[0].Value == 1234 {
		t.Errorf("kept aliases input")
	}
}

func TestCleanCountsAdd(t *testing.T) {
	a := CleanCounts{Raw: 10, State: 1, Range: 2, Hampel: 3, Kept: 4}
	a.Add(CleanCounts{Raw: 100, State: 10, Range: 20, Hampel: 30, Kept: 40})
	if a != (CleanCounts{Raw: 110, State: 11, Range: 22, Hampel: 33, Kept: 44}) {
		t.Errorf("Add: %+v", a)
	}
	b := AlignCounts{Buckets: 10, Observed: 5, Interpolated: 3, Missing: 2}
	b.Add(AlignCounts{Buckets: 1, Observed: 1})
	if b != (AlignCounts{Buckets: 11, Observed: 6, Interpolated: 3, Missing: 2}) {
		t.Errorf("Add: %+v", b)
	}
}

// ---- Hampel ----

func TestHampel(t *testing.T) {
	const s = 1000 // 1 s in ms
	type tcase struct {
		name   string
		pts    []core.Point
		cfg    CleanConfig
		remove []int64 // timestamps that must be removed by Hampel
		keep   []int64 // timestamps that must be kept
		extra  int     // max number of other points Hampel may remove
	}
	var cases []tcase

	{ // isolated spike on noisy constant
		v := ctNoisy(200, 100, 0.1, 1)
		v[100] += 5
		cases = append(cases, tcase{"isolated spike on noisy constant", ctSeries(0, s, v...), ctHampel,
			[]int64{100 * s}, []int64{99 * s, 101 * s}, 2})
	}
	{ // negative spike
		v := ctNoisy(200, -3, 0.1, 2)
		v[57] -= 4
		cases = append(cases, tcase{"negative spike", ctSeries(0, s, v...), ctHampel,
			[]int64{57 * s}, []int64{56 * s, 58 * s}, 2})
	}
	{ // 2-sample spike
		v := ctNoisy(200, 100, 0.1, 3)
		v[100] += 5
		v[101] += 5.5
		cases = append(cases, tcase{"two-sample spike", ctSeries(0, s, v...), ctHampel,
			[]int64{100 * s, 101 * s}, []int64{99 * s, 102 * s}, 2})
	}
	{ // clean setpoint step 50 -> 60, noiseless: every point kept
		v := append(ctConst(60, 50), ctConst(60, 60)...)
		cases = append(cases, tcase{"clean step up", ctSeries(0, s, v...), ctHampel,
			nil, []int64{59 * s, 60 * s}, 0})
		w := append(ctConst(60, 60), ctConst(60, 50)...)
		cases = append(cases, tcase{"clean step down", ctSeries(0, s, w...), ctHampel,
			nil, []int64{59 * s, 60 * s}, 0})
		var st []float64
		for _, lv := range []float64{50, 60, 55, 55.5, 80, 0, -20} {
			st = append(st, ctConst(20, lv)...)
		}
		cases = append(cases, tcase{"clean staircase", ctSeries(0, s, st...), ctHampel, nil, nil, 0})
	}
	{ // noisy step (σ 0.1, step 10) with a spike 10 s after the step
		v := ctNoisy(120, 50, 0.1, 4)
		for i := 60; i < 120; i++ {
			v[i] += 10
		}
		v[70] += 2
		cases = append(cases, tcase{"noisy step with spike after", ctSeries(0, s, v...), ctHampel,
			[]int64{70 * s}, []int64{59 * s, 60 * s}, 2})
	}
	{ // ramps
		var up, noisy []float64
		r := ctNoisy(300, 0, 0.1, 5)
		for i := range 300 {
			up = append(up, 0.5*float64(i))
			noisy = append(noisy, 0.05*float64(i)+r[i])
		}
		cases = append(cases, tcase{"noiseless ramp", ctSeries(0, s, up...), ctHampel, nil, nil, 0})
		cases = append(cases, tcase{"noisy ramp", ctSeries(0, s, noisy...), ctHampel, nil, nil, 3})
		// triangle: the apex and the valley are kept
		var tri []float64
		for i := range 100 {
			tri = append(tri, 50-math.Abs(float64(i-50)))
		}
		cases = append(cases, tcase{"triangle", ctSeries(0, s, tri...), ctHampel, nil, []int64{50 * s}, 0})
	}
	{ // spike right at the step edge, beyond both levels
		v := append(ctConst(60, 50), ctConst(60, 60)...)
		v[60] = 200
		cases = append(cases, tcase{"spike at step edge (above)", ctSeries(0, s, v...), ctHampel,
			[]int64{60 * s}, []int64{59 * s, 61 * s}, 0})
		w := append(ctConst(60, 50), ctConst(60, 60)...)
		w[59] = -100 // last sample before the step
		cases = append(cases, tcase{"spike at step edge (below)", ctSeries(0, s, w...), ctHampel,
			[]int64{59 * s}, []int64{58 * s, 60 * s}, 0})
		n := ctNoisy(120, 50, 0.1, 6)
		for i := 60; i < 120; i++ {
			n[i] += 10
		}
		n[60] = 75
		cases = append(cases, tcase{"spike at noisy step edge", ctSeries(0, s, n...), ctHampel,
			[]int64{60 * s}, []int64{59 * s, 61 * s}, 2})
	}
	{ // irregular timestamps: neighbourhoods are by time, not by index
		mk := func(left []int64) []core.Point {
			ts := append(slices.Clone(left), 100, 103, 104, 110, 111, 112, 113, 114)
			pts := []core.Point{}
			for _, x := range []int64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90} {
				pts = append(pts, core.Point{TsUs: x * s, Value: 10})
			}
			for _, x := range ts {
				v := 10.0
				if x == 100 {
					v = 100
				}
				pts = append(pts, core.Point{TsUs: x * s, Value: v})
			}
			return pts
		}
		cases = append(cases,
			tcase{"irregular: 2 left neighbours in window vote", mk([]int64{96, 97}), ctHampel,
				[]int64{100 * s}, nil, 0},
			tcase{"irregular: 1 left neighbour in window does not vote", mk([]int64{94, 97}), ctHampel,
				nil, []int64{100 * s}, 0},
			tcase{"irregular: window edge t-W is inclusive", mk([]int64{95, 97}), ctHampel,
				[]int64{100 * s}, nil, 0})
		// sparse sampling (10 s) with a 5 s window: nobody has neighbours,
		// so an index-based filter would remove the spike, this one cannot.
		v := ctConst(50, 10)
		v[25] = 100
		cases = append(cases, tcase{"sparse sampling: empty windows keep everything", ctSeries(0, 10*s, v...), ctHampel,
			nil, []int64{250 * s}, 0})
		// same 2-sample spike and window: removed at 1 s sampling (5 points
		// per side), kept at 2 s sampling (2 points per side).
		d := ctConst(60, 10)
		d[30], d[31] = 100, 100
		cases = append(cases,
			tcase{"2-sample spike, 1 s sampling", ctSeries(0, s, d...), ctHampel, []int64{30 * s, 31 * s}, nil, 0},
			tcase{"2-sample spike, 2 s sampling", ctSeries(0, 2*s, d...), ctHampel, nil, []int64{60 * s, 62 * s}, 0})
	}
	{ // all-equal series (MAD = 0 everywhere)
		cases = append(cases, tcase{"all equal", ctSeries(0, s, ctConst(100, 42)...), ctHampel, nil, nil, 0})
		cases = append(cases, tcase{"all zero", ctSeries(0, s, ctConst(100, 0)...), ctHampel, nil, nil, 0})
		v := ctConst(100, 42)
		v[50] = 42.5
		cases = append(cases, tcase{"all equal with blip", ctSeries(0, s, v...), ctHampel, []int64{50 * s}, nil, 0})
		b := ctConst(100, 1e6)
		b[50] = 1e6 + 1
		cases = append(cases, tcase{"large level with blip", ctSeries(0, s, b...), ctHampel, []int64{50 * s}, nil, 0})
		// Relative floor: a deviation of 1e-12 of the level is kept.
		e := ctConst(100, 1e6)
		e[50] = 1e6 + 1e-6
		cases = append(cases, tcase{"deviation below relative floor", ctSeries(0, s, e...), ctHampel, nil, nil, 0})
	}
	{ // boundaries: |x - med| == k·σ agrees (kept), one ulp more disagrees
		k, f := 3.0, 1e-9 // σ_floor of a constant series at level 0
		at := k * f
		for _, c := range []struct {
			name string
			x    float64
			out  bool
		}{{"floor boundary: == k·σ_floor kept", at, false}, {"floor boundary: above removed", math.Nextafter(at, 1), true}} {
			v := ctConst(40, 0)
			v[20] = c.x
			tc := tcase{name: c.name, pts: ctSeries(0, s, v...), cfg: ctHampel}
			if c.out {
				tc.remove = []int64{20 * s}
			} else {
				tc.keep = []int64{20 * s}
			}
			cases = append(cases, tc)
		}
		// Pattern -1,0,1 repeated, W = 3 s: each side of the point is
		// {-1,0,1}: median 0, MAD 1, σ = 1.4826 (noise floor 1.048).
		mad := k * 1.4826
		for _, c := range []struct {
			name string
			x    float64
			out  bool
		}{{"MAD boundary: == k·σ kept", mad, false}, {"MAD boundary: above removed", math.Nextafter(mad, 10), true}} {
			var v []float64
			for range 20 {
				v = append(v, -1, 0, 1)
			}
			v = slices.Insert(v, 30, c.x)
			tc := tcase{name: c.name, pts: ctSeries(0, s, v...), cfg: CleanConfig{HampelWindowUs: 3000, HampelThreshold: k}}
			if c.out {
				tc.remove = []int64{30 * s}
			} else {
				tc.keep = []int64{30 * s}
			}
			cases = append(cases, tc)
		}
	}
	{ // disabled, and edges that cannot be judged
		v := ctConst(40, 1)
		v[20] = 50
		cases = append(cases,
			tcase{"window 0 disables", ctSeries(0, s, v...), CleanConfig{HampelWindowUs: 0, HampelThreshold: 3}, nil, nil, 0},
			tcase{"threshold 0 disables", ctSeries(0, s, v...), CleanConfig{HampelWindowUs: 5000, HampelThreshold: 0}, nil, nil, 0},
			tcase{"threshold NaN disables", ctSeries(0, s, v...), CleanConfig{HampelWindowUs: 5000, HampelThreshold: math.NaN()}, nil, nil, 0},
			tcase{"window -1 disables", ctSeries(0, s, v...), CleanConfig{HampelWindowUs: -1, HampelThreshold: 3}, nil, nil, 0})
		f := ctConst(40, 1)
		f[0], f[1], f[38] = 50, -50, 70
		f[10] = 60
		cases = append(cases, tcase{"first/last two samples cannot be judged", ctSeries(0, s, f...), ctHampel,
			[]int64{10 * s}, []int64{0, 1 * s, 38 * s}, 0})
	}
	{ // state/range-dropped points are not neighbours
		v := ctConst(100, 10)
		v[50] = 100
		pts := ctSeries(0, s, v...)
		for i := 46; i <= 49; i++ {
			pts[i].State = "bad"
		}
		cases = append(cases,
			tcase{"bad neighbours excluded (state filter on)", pts, CleanConfig{StateFilter: true, HampelWindowUs: 5000, HampelThreshold: 3},
				nil, []int64{50 * s}, 0},
			tcase{"bad neighbours included (state filter off)", pts, ctHampel, []int64{50 * s}, nil, 0})
		r := ctConst(100, 10)
		r[50] = 100
		for i := 51; i <= 54; i++ {
			r[i] = -1 // below Min
		}
		cases = append(cases, tcase{"range-dropped neighbours excluded", ctSeries(0, s, r...),
			CleanConfig{Min: ctPtr(0), HampelWindowUs: 5000, HampelThreshold: 3}, nil, []int64{50 * s}, 0})
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kept, c := Clean(tc.pts, tc.cfg)
			ctCheck(t, tc.pts, kept, c)
			removed := ctRemoved(tc.pts, kept)
			// points dropped by state/range are not Hampel removals
			var hampelRemoved []int64
			for _, ts := range removed {
				i := slices.IndexFunc(tc.pts, func(p core.Point) bool { return p.TsUs == ts })
				p := tc.pts[i]
				if tc.cfg.StateFilter && p.State != "" && p.State != core.StateOK {
					continue
				}
				if tc.cfg.Min != nil && p.Value < *tc.cfg.Min {
					continue
				}
				hampelRemoved = append(hampelRemoved, ts)
			}
			if len(hampelRemoved) != c.Hampel {
				t.Errorf("Hampel count %d, removed %v", c.Hampel, hampelRemoved)
			}
			for _, ts := range tc.remove {
				if !slices.Contains(removed, ts) {
					t.Errorf("point at %d ms was kept, want removed", ts)
				}
			}
			for _, ts := range tc.keep {
				if slices.Contains(removed, ts) {
					t.Errorf("point at %d ms was removed, want kept", ts)
				}
			}
			extra := 0
			for _, ts := range hampelRemoved {
				if !slices.Contains(tc.remove, ts) {
					extra++
				}
			}
			if extra > tc.extra {
				t.Errorf("%d other points removed (max %d): %v", extra, tc.extra, hampelRemoved)
			}
		})
	}
}

// ctRefHampel is a brute-force statement of the rule documented in
// clean.go: full scans for neighbourhoods, full sorts for medians.
func ctRefHampel(ts []int64, xs []float64, w int64, k float64) []bool {
	n := len(xs)
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		if len(s) == 0 {
			return 0
		}
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return cleanMid(s[len(s)/2-1], s[len(s)/2])
	}
	var diffs []float64
	for i := 0; i+1 < n; i++ {
		diffs = append(diffs, math.Abs(xs[i+1]-xs[i]))
	}
	noise := 0.0
	if n >= 2 {
		noise = 1.4826 * med(diffs) / math.Sqrt2
	}
	floor := max(noise, 1e-9*max(1, math.Abs(med(xs))))
	agrees := func(x float64, side []float64) bool {
		if len(side) < 2 {
			return true
		}
		m := med(side)
		var dev []float64
		for _, v := range side {
			dev = append(dev, math.Abs(v-m))
		}
		sigma := max(1.4826*med(dev), floor)
		return math.Abs(x-m) <= k*sigma
	}
	out := make([]bool, n)
	for i := range n {
		var left, right []float64
		for j := range n {
			switch {
			case ts[j] >= ts[i]-w && ts[j] < ts[i]:
				left = append(left, xs[j])
			case ts[j] > ts[i] && ts[j] <= ts[i]+w:
				right = append(right, xs[j])
			}
		}
		out[i] = !agrees(xs[i], left) && !agrees(xs[i], right)
	}
	return out
}

// TestCleanMatchesReference compares Clean with a brute-force statement of
// the rule on random series: steps, noise, quantised values (ties, MAD = 0),
// irregular and duplicate timestamps, outliers and random filters.
func TestCleanMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 13))
	states := []string{"ok", "", "bad"}
	totalRemoved := 0
	for trial := range 300 {
		n := 1 + r.IntN(400)
		pts := make([]core.Point, n)
		ts := int64(r.IntN(2000)) - 1000
		level := r.NormFloat64() * 100
		sigma := []float64{0, 0.01, 1, 10}[r.IntN(4)]
		quant := []float64{0, 0, 1, 0.5}[r.IntN(4)]
		for i := range pts {
			ts += int64(r.IntN(2500)) // 0: duplicate timestamp
			if r.IntN(40) == 0 {
				level += r.NormFloat64() * 50
			}
			v := level + sigma*r.NormFloat64()
			if r.IntN(25) == 0 {
				v += r.NormFloat64() * 100
			}
			if quant > 0 {
				v = math.Round(v/quant) * quant
			}
			st := states[0]
			if r.IntN(10) == 0 {
				st = states[r.IntN(3)]
			}
			pts[i] = core.Point{TsUs: ts, Value: v, State: st}
		}
		cfg := CleanConfig{
			StateFilter:     r.IntN(2) == 0,
			HampelWindowUs:  int64(r.IntN(12000)),
			HampelThreshold: []float64{3, 2, 1, 0.5, 5}[r.IntN(5)],
		}
		if r.IntN(3) == 0 {
			cfg.Min, cfg.Max = ctPtr(level-200), ctPtr(level+200)
		}
		kept, c := Clean(pts, cfg)
		ctCheck(t, pts, kept, c)

		// reference
		var sts []int64
		var sxs []float64
		var sp []core.Point
		for _, p := range pts {
			if cfg.StateFilter && p.State == "bad" {
				continue
			}
			if (cfg.Min != nil && p.Value < *cfg.Min) || (cfg.Max != nil && p.Value > *cfg.Max) {
				continue
			}
			sts, sxs, sp = append(sts, p.TsUs), append(sxs, p.Value), append(sp, p)
		}
		var want []core.Point
		if cfg.HampelWindowUs > 0 {
			out := ctRefHampel(sts, sxs, cfg.HampelWindowUs, cfg.HampelThreshold)
			for i, p := range sp {
				if !out[i] {
					want = append(want, p)
				}
			}
		} else {
			want = sp
		}
		if !slices.Equal(kept, want) {
			t.Fatalf("trial %d (n=%d cfg=%+v): Clean kept %d points, reference %d", trial, n, cfg, len(kept), len(want))
		}
		totalRemoved += c.Hampel
	}
	if totalRemoved == 0 {
		t.Fatalf("reference comparison never exercised a removal")
	}
}

// TestCleanProperty: random series with steps and random outliers injected
// away from steps: the outliers are removed, step edges kept, kept ⊆ input
// in order, counts consistent; and with random filters the structural
// properties hold.
func TestCleanProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 23))
	const w = 5000
	for trial := range 200 {
		n := 200 + r.IntN(1500)
		sigma := 0.01 + r.Float64()
		// step positions, at least 20 samples apart
		isEdge := make([]bool, n)
		stepAt := map[int]bool{}
		for i := 20 + r.IntN(20); i < n-20; i += 20 + r.IntN(100) {
			stepAt[i] = true
		}
		pts := make([]core.Point, n)
		level := r.NormFloat64() * 1000
		ts := int64(r.IntN(100000))
		for i := range pts {
			ts += 500 + int64(r.IntN(1000)) // 0.5 .. 1.5 s: >= 3 points per side
			if stepAt[i] {
				step := (10 + 50*r.Float64()) * sigma
				if r.IntN(2) == 0 {
					step = -step
				}
				level += step
				// the edge samples are exactly at their level
				isEdge[i], isEdge[i-1] = true, true
				pts[i-1].Value = level - step
			}
			pts[i] = core.Point{TsUs: ts, Value: level + sigma*r.NormFloat64()}
			if isEdge[i] {
				pts[i].Value = level
			}
		}
		// outliers at least 12 samples (> W) away from steps and each other
		isOut := make([]bool, n)
		var outs []int
		for i := 12; i < n-12; i++ {
			if r.IntN(30) != 0 {
				continue
			}
			ok := true
			for j := i - 12; j <= i+12; j++ {
				if stepAt[j] || isOut[j] {
					ok = false
				}
			}
			if ok {
				isOut[i] = true
				outs = append(outs, i)
				d := (30 + 100*r.Float64()) * sigma
				if r.IntN(2) == 0 {
					d = -d
				}
				pts[i].Value += d
			}
		}
		kept, c := Clean(pts, CleanConfig{HampelWindowUs: w, HampelThreshold: 3})
		ctCheck(t, pts, kept, c)
		removed := ctRemoved(pts, kept)
		rm := map[int64]bool{}
		for _, ts := range removed {
			rm[ts] = true
		}
		other := 0
		for i, p := range pts {
			switch {
			case isOut[i] && !rm[p.TsUs]:
				t.Errorf("trial %d: outlier at index %d kept", trial, i)
			case isEdge[i] && rm[p.TsUs]:
				t.Errorf("trial %d: step edge at index %d removed", trial, i)
			case !isOut[i] && rm[p.TsUs]:
				other++
			}
		}
		if other > n/50 {
			t.Errorf("trial %d: %d non-outliers removed out of %d", trial, other, n)
		}
		if c.Hampel != len(removed) || len(outs) > c.Hampel {
			t.Errorf("trial %d: counts %+v, %d outliers, %d removed", trial, c, len(outs), len(removed))
		}

		// structural properties with random filters and states
		for i := range pts {
			if r.IntN(8) == 0 {
				pts[i].State = "bad"
			}
		}
		lo := pts[0].Value - 100*sigma
		kept2, c2 := Clean(pts, CleanConfig{StateFilter: r.IntN(2) == 0, Min: ctPtr(lo), HampelWindowUs: w, HampelThreshold: 3})
		ctCheck(t, pts, kept2, c2)
	}
}

func TestCleanUnsortedAndDuplicates(t *testing.T) {
	v := ctConst(30, 7)
	v[15] = 70
	sorted := ctSeries(0, 1000, v...)
	shuffled := slices.Clone(sorted)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) {
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	})
	orig := slices.Clone(shuffled)
	k1, c1 := Clean(sorted, ctHampel)
	k2, c2 := Clean(shuffled, ctHampel)
	if !slices.Equal(k1, k2) || c1 != c2 {
		t.Errorf("unsorted input: got %v %+v, want %v %+v", k2, c2, k1, c1)
	}
	if !slices.Equal(shuffled, orig) {
		t.Errorf("unsorted input was modified")
	}
	if c1.Hampel != 1 {
		t.Errorf("spike not removed: %+v", c1)
	}
	// Duplicate timestamps: points sharing the spike's timestamp are not
	// its neighbours; the result must be panic-free and in time order.
	dup := ctSeries(0, 1000, v...)
	dup = slices.Insert(dup, 16, core.Point{TsUs: 15000, Value: 7})
	k3, c3 := Clean(dup, ctHampel)
	ctCheck(t, dup, k3, c3)
	if c3.Hampel != 1 || slices.ContainsFunc(k3, func(p core.Point) bool { return p.Value == 70 }) {
		t.Errorf("duplicates: %+v", c3)
	}
}

func TestCleanMedianSelect(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	gens := map[string]func(i, n int) float64{
		"random":     func(i, n int) float64 { return r.NormFloat64() },
		"ties":       func(i, n int) float64 { return float64(r.IntN(3)) },
		"sorted":     func(i, n int) float64 { return float64(i) },
		"reversed":   func(i, n int) float64 { return float64(n - i) },
		"organ pipe": func(i, n int) float64 { return float64(min(i, n-i)) },
		"constant":   func(i, n int) float64 { return 1 },
	}
	for name, gen := range gens {
		for _, n := range []int{1, 2, 3, 4, 5, 10, 13, 14, 31, 100, 101, 1000, 4096} {
			a := make([]float64, n)
			for i := range a {
				a[i] = gen(i, n)
			}
			s := slices.Clone(a)
			slices.Sort(s)
			want := s[n/2]
			if n%2 == 0 {
				want = cleanMid(s[n/2-1], s[n/2])
			}
			b := slices.Clone(a)
			if got := cleanMedian(b); got != want {
				t.Errorf("%s n=%d: median %v, want %v", name, n, got, want)
			}
			for _, k := range []int{0, n / 3, n / 2, n - 1} {
				b := slices.Clone(a)
				if got := cleanSelect(b, k); got != s[k] {
					t.Errorf("%s n=%d: select(%d) = %v, want %v", name, n, k, got, s[k])
				}
				for i := range b {
					if (i < k && b[i] > b[k]) || (i > k && b[i] < b[k]) {
						t.Fatalf("%s n=%d k=%d: not partitioned at %d", name, n, k, i)
					}
				}
			}
		}
	}
	if cleanMedian(nil) != 0 {
		t.Errorf("median of empty")
	}
	if m := cleanMid(math.MaxFloat64, math.MaxFloat64); m != math.MaxFloat64 {
		t.Errorf("cleanMid overflow: %v", m)
	}
	if m := cleanMid(-math.MaxFloat64, math.MaxFloat64); m != 0 {
		t.Errorf("cleanMid: %v", m)
	}
}

// ---- Align ----

func ctNaNEq(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool {
		return x == y || (math.IsNaN(x) && math.IsNaN(y))
	})
}

func TestAlign(t *testing.T) {
	nan := math.NaN()
	P := func(ts int64, v float64) core.Point { return core.Point{TsUs: ts, Value: v, State: core.StateOK} }
	cases := []struct {
		name     string
		pts      []core.Point
		from, to int64
		cfg      AlignConfig
		start    int64
		vals     []float64
		obs      []bool
		counts   AlignCounts
	}{
		{
			name: "bucket means",
			pts: []core.Point{P(0, 1), P(250, 2), P(999, 3), P(1000, 5),
				P(2000, 0.1), P(2001, 0.1), P(2002, 0.1), P(3000, -1), P(3500, 2)},
			from: 0, to: 3999, cfg: AlignConfig{BeatUs: 1000},
			start: 0, vals: []float64{2, 5, 0.1, 0.5}, obs: []bool{true, true, true, true},
			counts: AlignCounts{Buckets: 4, Observed: 4},
		},
		{
			name: "negative, non-multiple fromMs; points outside [from,to] ignored",
			pts: []core.Point{P(-2600, 100), P(-2500, 1), P(-1001, 2), P(-1000, 3), P(-1, 5),
				P(0, 7), P(1200, 9), P(1201, 100)},
			from: -2500, to: 1200, cfg: AlignConfig{BeatUs: 1000},
			start: -3000, vals: []float64{1, 2, 4, 7, 9}, obs: []bool{true, true, true, true, true},
			counts: AlignCounts{Buckets: 5, Observed: 5},
		},
		{
			name: "negative beat boundaries and missing",
			pts:  []core.Point{P(-7, 1), P(-6, 2), P(-5, 3), P(-1, 3)},
			from: -9, to: 0, cfg: AlignConfig{BeatUs: 5},
			start: -10, vals: []float64{1.5, 3, nan}, obs: []bool{true, true, false},
			counts: AlignCounts{Buckets: 3, Observed: 2, Missing: 1},
		},
		{
			name: "gap == limit filled exactly; no extrapolation",
			pts:  []core.Point{P(2000, 0), P(6000, 4), P(7000, 10)},
			from: 0, to: 9000, cfg: AlignConfig{BeatUs: 1000, MaxInterpUs: 3000},
			start: 0, vals: []float64{nan, nan, 0, 1, 2, 3, 4, 10, nan, nan},
			obs:    []bool{false, false, true, false, false, false, true, true, false, false},
			counts: AlignCounts{Buckets: 10, Observed: 3, Interpolated: 3, Missing: 4},
		},
		{
			name: "gap > limit left entirely NaN, shorter gap filled",
			pts:  []core.Point{P(0, 0), P(5000, 5), P(8000, 2)},
			from: 0, to: 8999, cfg: AlignConfig{BeatUs: 1000, MaxInterpUs: 3999},
			start: 0, vals: []float64{0, nan, nan, nan, nan, 5, 4, 3, 2},
			obs:    []bool{true, false, false, false, false, true, false, false, true},
			counts: AlignCounts{Buckets: 9, Observed: 3, Interpolated: 2, Missing: 4},
		},
		{
			name: "one-beat gap not filled when limit < beat",
			pts:  []core.Point{P(0, 0), P(2000, 2)},
			from: 0, to: 2000, cfg: AlignConfig{BeatUs: 1000, MaxInterpUs: 999},
			start: 0, vals: []float64{0, nan, 2}, obs: []bool{true, false, true},
			counts: AlignCounts{Buckets: 3, Observed: 2, Missing: 1},
		},
		{
			name: "MaxInterpUs 0 never interpolates",
			pts:  []core.Point{P(0, 0), P(2000, 2)},
			from: 0, to: 2000, cfg: AlignConfig{BeatUs: 1000},
			start: 0, vals: []float64{0, nan, 2}, obs: []bool{true, false, true},
			counts: AlignCounts{Buckets: 3, Observed: 2, Missing: 1},
		},
		{
			name: "interpolation with non-trivial fractions",
			pts:  []core.Point{P(0, 1), P(300, 2)},
			from: 0, to: 300, cfg: AlignConfig{BeatUs: 100, MaxInterpUs: 200},
			start: 0, vals: []float64{1, 4.0 / 3, 5.0 / 3, 2}, obs: []bool{true, false, false, true},
			counts: AlignCounts{Buckets: 4, Observed: 2, Interpolated: 2},
		},
		{
			name: "non-finite values ignored",
			pts:  []core.Point{P(0, nan), P(1, 4), P(2, math.Inf(1)), P(1000, math.Inf(-1))},
			from: 0, to: 1999, cfg: AlignConfig{BeatUs: 1000, MaxInterpUs: 10000},
			start: 0, vals: []float64{4, nan}, obs: []bool{true, false},
			counts: AlignCounts{Buckets: 2, Observed: 1, Missing: 1},
		},
		{
			name: "no points",
			pts:  nil, from: 10, to: 30, cfg: AlignConfig{BeatUs: 10, MaxInterpUs: 100},
			start: 10, vals: []float64{nan, nan, nan}, obs: []bool{false, false, false},
			counts: AlignCounts{Buckets: 3, Missing: 3},
		},
		{
			name: "single instant range",
			pts:  []core.Point{P(15, 3)}, from: 15, to: 15, cfg: AlignConfig{BeatUs: 10},
			start: 10, vals: []float64{3}, obs: []bool{true},
			counts: AlignCounts{Buckets: 1, Observed: 1},
		},
		{
			name: "toMs < fromMs: empty",
			pts:  []core.Point{P(15, 3)}, from: 20, to: 10, cfg: AlignConfig{BeatUs: 10},
			start: 0, vals: []float64{}, obs: []bool{},
		},
		{
			name: "BeatUs 0: empty",
			pts:  []core.Point{P(15, 3)}, from: 0, to: 100, cfg: AlignConfig{BeatUs: 0},
			start: 0, vals: []float64{}, obs: []bool{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, c := Align(tc.pts, tc.from, tc.to, tc.cfg)
			if g.StartUs != tc.start || g.BeatUs != tc.cfg.BeatUs {
				t.Errorf("start %d beat %d, want %d %d", g.StartUs, g.BeatUs, tc.start, tc.cfg.BeatUs)
			}
			if !ctNaNEq(g.Values, tc.vals) {
				t.Errorf("values %v, want %v", g.Values, tc.vals)
			}
			if !slices.Equal(g.Observed, tc.obs) {
				t.Errorf("observed %v, want %v", g.Observed, tc.obs)
			}
			if c != tc.counts {
				t.Errorf("counts %+v, want %+v", c, tc.counts)
			}
			if c.Buckets != c.Observed+c.Interpolated+c.Missing || c.Buckets != len(g.Values) {
				t.Errorf("inconsistent counts %+v for %d values", c, len(g.Values))
			}
			nanCount := 0
			for _, v := range g.Values {
				if math.IsNaN(v) {
					nanCount++
				}
			}
			if nanCount != c.Missing {
				t.Errorf("%d NaN values, Missing %d", nanCount, c.Missing)
			}
			// bucket k covers [StartUs+k·Beat, StartUs+(k+1)·Beat) and is epoch-aligned
			if tc.cfg.BeatUs > 0 && len(g.Values) > 0 {
				if g.StartUs%tc.cfg.BeatUs != 0 || g.StartUs > tc.from || g.StartUs+tc.cfg.BeatUs <= tc.from {
					t.Errorf("start %d not the aligned bucket of %d", g.StartUs, tc.from)
				}
				end := g.StartUs + int64(len(g.Values))*tc.cfg.BeatUs
				if end <= tc.to || end-tc.cfg.BeatUs > tc.to {
					t.Errorf("grid end %d does not cover to=%d exactly", end, tc.to)
				}
			}
		})
	}
}

func TestAlignMeanNumerics(t *testing.T) {
	// A bucket of equal values has exactly that value (naive sum/n: 0.1*3/3 != 0.1).
	pts := ctSeries(0, 1, ctConst(10, 0.1)...)
	g, _ := Align(pts, 0, 9, AlignConfig{BeatUs: 10})
	if g.Values[0] != 0.1 {
		t.Errorf("mean of ten 0.1 = %v", g.Values[0])
	}
	// Large offset: mean of 1e9+{0.1,0.2,0.3} is 1e9+0.2 to the last ulp.
	pts = ctSeries(0, 1, 1e9+0.1, 1e9+0.2, 1e9+0.3)
	g, _ = Align(pts, 0, 2, AlignConfig{BeatUs: 10})
	if want := 1e9 + 0.2; math.Abs(g.Values[0]-want) > math.Nextafter(want, math.Inf(1))-want {
		t.Errorf("mean = %.10f, want %.10f", g.Values[0], want)
	}
	// Huge values do not overflow.
	pts = ctSeries(0, 1, math.MaxFloat64, math.MaxFloat64, math.MaxFloat64/2)
	g, _ = Align(pts, 0, 2, AlignConfig{BeatUs: 10})
	if want := math.MaxFloat64 / 6 * 5; math.IsInf(g.Values[0], 0) || math.Abs(g.Values[0]-want)/want > 1e-15 {
		t.Errorf("mean of huge = %v, want %v", g.Values[0], want)
	}
	// Cancellation: 1e16, 1, -1e16, 1 in one bucket -> mean 0.5.
	pts = ctSeries(0, 1, 1e16, 1, -1e16, 1)
	g, _ = Align(pts, 0, 3, AlignConfig{BeatUs: 10})
	if g.Values[0] != 0.5 {
		t.Errorf("compensated mean = %v, want 0.5", g.Values[0])
	}
}

func TestAlignUnsorted(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	var pts []core.Point
	for i := range 2000 {
		pts = append(pts, core.Point{TsUs: int64(i*37) - 30000, Value: float64(r.IntN(1000)) / 8})
	}
	cfg := AlignConfig{BeatUs: 250, MaxInterpUs: 1000}
	g1, c1 := Align(pts, -20000, 30000, cfg)
	sh := slices.Clone(pts)
	r.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
	g2, c2 := Align(sh, -20000, 30000, cfg)
	if c1 != c2 || !slices.Equal(g1.Observed, g2.Observed) {
		t.Fatalf("unsorted: %+v vs %+v", c1, c2)
	}
	for k := range g1.Values {
		if d := math.Abs(g1.Values[k] - g2.Values[k]); d > 1e-12 || math.IsNaN(g1.Values[k]) != math.IsNaN(g2.Values[k]) {
			t.Fatalf("bucket %d: %v vs %v", k, g1.Values[k], g2.Values[k])
		}
	}
	if c1.Observed == 0 || c1.Buckets != 201 {
		t.Errorf("counts %+v", c1)
	}
}

// ---- CommonRange ----

func TestCommonRange(t *testing.T) {
	nan := math.NaN()
	G := func(start, beat int64, vals ...float64) Grid {
		obs := make([]bool, len(vals))
		for i, v := range vals {
			obs[i] = !math.IsNaN(v)
		}
		return Grid{StartUs: start, BeatUs: beat, Values: vals, Observed: obs}
	}
	cases := []struct {
		name    string
		grids   []Grid
		lo, hi  int
		wantErr bool
	}{
		{"no grids", nil, 0, 0, false},
		{"single full", []Grid{G(0, 10, 1, 2, 3)}, 0, 3, false},
		{"staggered", []Grid{
			G(0, 10, nan, 1, 2, 3, 4, 5, nan, nan),
			G(0, 10, nan, nan, nan, 1, 2, 3, 4, 5),
			G(0, 10, 1, 2, 3, 4, 5, 6, 7, nan),
		}, 3, 6, false},
		{"interior NaN does not shrink", []Grid{
			G(0, 10, 1, nan, nan, 4),
			G(0, 10, nan, 2, 3, 4),
		}, 1, 4, false},
		{"disjoint spans", []Grid{
			G(0, 10, 1, 2, nan, nan),
			G(0, 10, nan, nan, 3, 4),
		}, 0, 0, false},
		{"all-NaN grid", []Grid{G(0, 10, 1, 2, 3), G(0, 10, nan, nan, nan)}, 0, 0, false},
		{"empty grids", []Grid{G(0, 10), G(0, 10)}, 0, 0, false},
		{"mismatched start", []Grid{G(0, 10, 1, 2), G(10, 10, 1, 2)}, 0, 0, true},
		{"mismatched beat", []Grid{G(0, 10, 1, 2), G(0, 20, 1, 2)}, 0, 0, true},
		{"mismatched length", []Grid{G(0, 10, 1, 2), G(0, 10, 1, 2, 3)}, 0, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi, err := CommonRange(tc.grids)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if lo != tc.lo || hi != tc.hi {
				t.Errorf("range [%d,%d), want [%d,%d)", lo, hi, tc.lo, tc.hi)
			}
			for _, g := range tc.grids {
				_ = g.Values[lo:hi] // always safe to slice
			}
		})
	}
	// Grids from Align: three staggered nodes over the same run.
	cfg := AlignConfig{BeatUs: 1000}
	a, _ := Align(ctSeries(3000, 1000, ctConst(5, 1)...), 0, 9999, cfg)
	b, _ := Align(ctSeries(1000, 1000, ctConst(5, 1)...), 0, 9999, cfg)
	c, _ := Align(ctSeries(4000, 1000, ctConst(6, 1)...), 0, 9999, cfg)
	lo, hi, err := CommonRange([]Grid{a, b, c})
	if err != nil || lo != 4 || hi != 6 {
		t.Errorf("aligned grids: [%d,%d) %v, want [4,6)", lo, hi, err)
	}
}

// ---- benchmarks ----

func ctBenchSeries(n int) []core.Point {
	r := rand.New(rand.NewPCG(1, 1))
	pts := make([]core.Point, n)
	level := 50.0
	for i := range pts {
		if i%600 == 0 {
			level += 10 * r.NormFloat64()
		}
		v := level + 0.1*r.NormFloat64()
		if r.IntN(200) == 0 {
			v += 5
		}
		pts[i] = core.Point{TsUs: int64(i) * 1000, Value: v, State: core.StateOK}
	}
	return pts
}

func BenchmarkClean(b *testing.B) {
	pts := ctBenchSeries(100_000)
	cfg := CleanConfig{StateFilter: true, Min: ctPtr(-1e6), Max: ctPtr(1e6), HampelWindowUs: 5000, HampelThreshold: 3}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Clean(pts, cfg)
	}
	b.ReportMetric(float64(len(pts))*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

func BenchmarkAlign(b *testing.B) {
	pts := ctBenchSeries(100_000)
	cfg := AlignConfig{BeatUs: 500, MaxInterpUs: 2000}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Align(pts, 0, int64(len(pts))*1000, cfg)
	}
	b.ReportMetric(float64(len(pts))*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// The build's cleaner (rules 1–2 fused into the extracting pass, Hampel
// and bucket means over reused arrays) gives exactly Align(Clean(p)) of
// the delay-shifted points: same grid bits, same counts, over random
// series with bad states, NaN/Inf, out-of-range values, spikes, gaps,
// duplicate and unsorted times, and one cleaner reused across all trials
// (buffers from a longer series must not leak into a shorter one).
func TestCleanerMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var cl cleaner
	var vals []float64
	var obs []bool
	for trial := range 400 {
		n := r.IntN(300)
		pts := make([]core.Point, 0, n)
		ts := int64(r.IntN(5000)) - 2500
		level := 10 * r.NormFloat64()
		for range n {
			ts += int64(1 + r.IntN(1500))
			if r.IntN(40) == 0 {
				ts += int64(r.IntN(20000)) // a gap
			}
			v := level + r.NormFloat64()
			switch r.IntN(30) {
			case 0:
				v += 50 // spike
			case 1:
				v = math.NaN()
			case 2:
				v = math.Inf(1)
			case 3:
				v = 1e9 // out of range
			}
			st := core.StateOK
			switch r.IntN(12) {
			case 0:
				st = "bad"
			case 1:
				st = ""
			}
			pts = append(pts, core.Point{TsUs: ts, Value: v, State: st})
			if r.IntN(25) == 0 { // duplicate time
				pts = append(pts, core.Point{TsUs: ts, Value: level, State: core.StateOK})
			}
		}
		if trial%10 == 9 && len(pts) > 2 { // not sorted
			pts[0], pts[len(pts)-1] = pts[len(pts)-1], pts[0]
		}
		cfg := CleanConfig{StateFilter: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			cfg.Min, cfg.Max = ctPtr(-1e6), ctPtr(1e6)
		}
		if r.IntN(4) != 0 {
			cfg.HampelWindowUs, cfg.HampelThreshold = int64(1000+r.IntN(8000)), 3
		}
		shift := int64(r.IntN(3000)) - 1000
		acfg := AlignConfig{BeatUs: int64(100 + r.IntN(2000)), MaxInterpUs: int64(r.IntN(6000))}
		from := int64(-3000 + r.IntN(4000))
		to := from + int64(r.IntN(400_000))
		orig := slices.Clone(pts)

		shifted := slices.Clone(pts)
		for i := range shifted {
			shifted[i].TsUs -= shift
		}
		kept, wantCC := Clean(shifted, cfg)
		want, wantAC := Align(kept, from, to, acfg)

		got, cc, ac := cl.cleanAlign(pts, shift, cfg, from, to, acfg, vals, obs)
		vals, obs = got.Values, got.Observed
		if cc != wantCC || ac != wantAC || got.StartUs != want.StartUs || got.BeatUs != want.BeatUs {
			t.Fatalf("trial %d: counts %+v %+v start %d, want %+v %+v start %d", trial, cc, ac, got.StartUs, wantCC, wantAC, want.StartUs)
		}
		if !slices.EqualFunc(got.Values, want.Values, func(a, b float64) bool {
			return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
		}) ||
			!slices.Equal(got.Observed, want.Observed) {
			t.Fatalf("trial %d: grid differs\n got %v\nwant %v", trial, got.Values, want.Values)
		}
		if !slices.EqualFunc(pts, orig, func(a, b core.Point) bool {
			return a.TsUs == b.TsUs && a.State == b.State && math.Float64bits(a.Value) == math.Float64bits(b.Value)
		}) {
			t.Fatalf("trial %d: input modified", trial)
		}
	}
}

// BenchmarkCleanAlign is one node's cleaning and alignment as the build
// does it (cleaner, buffers reused) beside Clean then Align (allocating
// the kept points and the grid every time) on the same series.
func BenchmarkCleanAlign(b *testing.B) {
	pts := ctBenchSeries(7200)
	cfg := CleanConfig{StateFilter: true, Min: ctPtr(-1e6), Max: ctPtr(1e6), HampelWindowUs: 5000, HampelThreshold: 3}
	acfg := AlignConfig{BeatUs: 1_000_000, MaxInterpUs: 3_000_000}
	to := int64(len(pts)) * 1000
	b.Run("cleaner", func(b *testing.B) {
		var cl cleaner
		var g Grid
		b.ReportAllocs()
		for b.Loop() {
			g, _, _ = cl.cleanAlign(pts, 0, cfg, 0, to, acfg, g.Values, g.Observed)
		}
	})
	b.Run("CleanThenAlign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			kept, _ := Clean(pts, cfg)
			Align(kept, 0, to, acfg)
		}
	})
}

// cleanAgreesSmall (sorted stack copy) gives cleanAgrees' general path's
// verdict (selection in scratch) for every small side: 2 to smallSide
// values, distinct, tied, of few levels and with signed zeros, with x on,
// near and far from the median.
func TestCleanAgreesSmall(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	general := func(x float64, side []float64, k, floor, kFloor float64) bool {
		s := slices.Clone(side)
		med := cleanMedian(s)
		d := math.Abs(x - med)
		if d <= kFloor {
			return true
		}
		for j, v := range s {
			s[j] = math.Abs(v - med)
		}
		return d <= k*max(1.4826*cleanMedian(s), floor)
	}
	checked := [2]int{}
	for trial := range 200_000 {
		n := 2 + r.IntN(smallSide-1)
		side := make([]float64, n)
		for i := range side {
			switch trial % 4 {
			case 0:
				side[i] = r.NormFloat64()
			case 1:
				side[i] = float64(r.IntN(3))
			case 2:
				side[i] = []float64{0, math.Copysign(0, -1), 1e-300, -1}[r.IntN(4)]
			default:
				side[i] = 1e6 + r.NormFloat64()*1e-3
			}
		}
		x := side[r.IntN(n)] + r.NormFloat64()*math.Pow(10, float64(r.IntN(9)-6))
		floor := math.Pow(10, float64(r.IntN(12)-10))
		k := 3.0
		want := general(x, side, k, floor, k*floor)
		if got := cleanAgreesSmall(x, side, k, floor, k*floor); got != want {
			t.Fatalf("x %v side %v floor %v: small %v, general %v", x, side, floor, got, want)
		}
		if want {
			checked[1]++
		} else {
			checked[0]++
		}
	}
	if checked[0] < 1000 || checked[1] < 1000 {
		t.Fatalf("verdicts not varied: %v", checked)
	}
}

// On a constant series (noise 0) the Hampel floor is 1e-9 of its level:
// at 1e6 a deviation of 2e-3 (under k·floor = 3e-3) is kept and one of
// 5e-3 removed; at level 0 the floor is 1e-9, so 2e-3 is removed.
func TestHampelFloorFromLevel(t *testing.T) {
	for _, c := range []struct {
		level, dev float64
		removed    int
	}{{1e6, 2e-3, 0}, {1e6, 5e-3, 1}, {0, 2e-3, 1}, {-1e6, 2e-3, 0}} {
		v := ctConst(21, c.level)
		v[10] += c.dev
		_, cnt := Clean(ctSeries(0, 1000, v...), ctHampel)
		if cnt.Hampel != c.removed {
			t.Errorf("level %g deviation %g: %d removed, want %d", c.level, c.dev, cnt.Hampel, c.removed)
		}
	}
}
