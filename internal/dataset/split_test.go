package dataset

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// The reference values below were computed with the Python implementation
// in split.go's documentation; a change here means splits of existing specs
// change, which must never happen.

func TestSplitmix64Reference(t *testing.T) {
	r := splitRNG{state: 0}
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		if got := r.next(); got != want {
			t.Errorf("splitmix64(0) output %d = %#x, want %#x", i, got, want)
		}
	}
	r = splitRNG{state: 1}
	var got []uint64
	for range 10 {
		got = append(got, r.below(10))
	}
	if want := []uint64{5, 7, 9, 4, 4, 7, 8, 5, 2, 7}; !slices.Equal(got, want) {
		t.Errorf("below(10) from seed 1 = %v, want %v", got, want)
	}
	// n = 2^63+1 rejects about half the draws: 8 results take 14 draws.
	r = splitRNG{state: 1}
	got = got[:0]
	for range 8 {
		got = append(got, r.below(1<<63+1))
	}
	want := []uint64{8955919645141445295, 4098490376910890117, 4097618618563484380, 7036458801432265024,
		7323326090023318475, 3727553580931688368, 5584017301749351935, 4889115802880168261}
	if !slices.Equal(got, want) {
		t.Errorf("below(2^63+1) from seed 1 = %v, want %v", got, want)
	}
	golden := uint64(0x9E3779B97F4A7C15)
	if r.state != 1+14*golden { // wraps mod 2^64 like the PRNG
		t.Errorf("below(2^63+1) ×8 did not use 14 draws")
	}
	r = splitRNG{state: 99}
	for range 1000 {
		if r.below(1) != 0 {
			t.Fatal("below(1) != 0")
		}
	}
}

func TestSplitRunsGolden(t *testing.T) {
	var ids []string
	for i := 12; i >= 1; i-- { // input order does not matter
		ids = append(ids, fmt.Sprintf("run-%02d", i))
	}
	rs, err := SplitRuns(ids, 0.17, 0.17, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := RunSplit{
		Train: []string{"run-01", "run-02", "run-03", "run-04", "run-05", "run-06", "run-07", "run-10"},
		Val:   []string{"run-11", "run-12"},
		Test:  []string{"run-08", "run-09"},
	}
	if !slices.Equal(rs.Train, want.Train) || !slices.Equal(rs.Val, want.Val) || !slices.Equal(rs.Test, want.Test) {
		t.Errorf("SplitRuns = %v, want %v", rs, want)
	}

	ids = ids[:0]
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("run-%03d", i))
	}
	rs, err = SplitRuns(ids, 0.2, 0.1, 20260105)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rs.Val, ","); got != "run-001,run-004,run-005,run-006,run-009,run-010,run-013,run-020" {
		t.Errorf("val %s", got)
	}
	if got := strings.Join(rs.Test, ","); got != "run-003,run-008,run-016,run-028" {
		t.Errorf("test %s", got)
	}
	if len(rs.Train) != 28 {
		t.Errorf("train %v", rs.Train)
	}

	tr, va, te, err := SplitRows(20, 0.2, 0.2, 42)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr, []int{0, 2, 3, 4, 5, 6, 10, 11, 13, 14, 17, 18}) || !slices.Equal(va, []int{1, 8, 12, 19}) || !slices.Equal(te, []int{7, 9, 15, 16}) {
		t.Errorf("SplitRows = %v %v %v", tr, va, te)
	}

	blocks, err := SplitTimeBlocks("r", 1000, 10, 40, 0.2, 0.1, 10)
	if err != nil {
		t.Fatal(err)
	}
	var splits []string
	for _, b := range blocks {
		splits = append(splits, b.Split[:2])
	}
	// Block indices: train 0,1,3,4,5,6,8; val 2,7; test 9.
	if got := strings.Join(splits, " "); got != "tr tr va tr tr tr tr va tr te" {
		t.Errorf("block splits %s", got)
	}
}

func TestSplitCounts(t *testing.T) {
	cases := []struct {
		n                    int
		val, test            float64
		wantTrain, wVal, wTe int
	}{
		{12, 0.17, 0.17, 8, 2, 2},
		{1, 0.2, 0.2, 1, 0, 0},
		{2, 0.2, 0.2, 2, 0, 0}, // both round to 0, n < 3
		{2, 0.5, 0.5, 1, 0, 1}, // val shrinks first
		{3, 0.1, 0.1, 1, 1, 1}, // ratio > 0 rounding to 0 takes 1 when n ≥ 3
		{3, 0.5, 0.5, 1, 0, 2}, // round(1.5) = 2 each; val shrinks to 0
		{10, 0.25, 0.25, 4, 3, 3},
		{4, 0, 0.125, 3, 0, 1}, // 0.5 rounds up
		{4, 0, 0, 4, 0, 0},
		{100, 0.8, 0, 20, 80, 0},
		{5, 0.8, 0.2, 1, 3, 1},
		{7, 0.15, 0.15, 5, 1, 1},
	}
	for _, c := range cases {
		ids := make([]string, c.n)
		for i := range ids {
			ids[i] = fmt.Sprint("r", i)
		}
		rs, err := SplitRuns(ids, c.val, c.test, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.Train) != c.wantTrain || len(rs.Val) != c.wVal || len(rs.Test) != c.wTe {
			t.Errorf("n=%d val=%v test=%v: %d/%d/%d, want %d/%d/%d", c.n, c.val, c.test,
				len(rs.Train), len(rs.Val), len(rs.Test), c.wantTrain, c.wVal, c.wTe)
		}
		tr, va, te, err := SplitRows(c.n, c.val, c.test, 3)
		if err != nil || len(tr) != c.wantTrain || len(va) != c.wVal || len(te) != c.wTe {
			t.Errorf("rows n=%d: %d/%d/%d %v", c.n, len(tr), len(va), len(te), err)
		}
	}
}

// splitWantCounts restates the counting rules for the property tests.
func splitWantCounts(n int, val, test float64) (nVal, nTest int) {
	nTest, nVal = int(math.Round(test*float64(n))), int(math.Round(val*float64(n)))
	if n >= 3 && test > 0 && nTest == 0 {
		nTest = 1
	}
	if n >= 3 && val > 0 && nVal == 0 {
		nVal = 1
	}
	for nTest+nVal >= n {
		if nVal > 0 {
			nVal--
		} else {
			nTest--
		}
	}
	return
}

var splitRatios = []float64{0, 0.01, 0.05, 0.1, 0.15, 0.17, 0.2, 0.25, 1.0 / 3, 0.4, 0.45, 0.5}

func TestSplitRunsProperties(t *testing.T) {
	r := splitRNG{state: 12345}
	for iter := range 3000 {
		n := 1 + int(r.below(60))
		val, test := splitRatios[r.below(uint64(len(splitRatios)))], splitRatios[r.below(uint64(len(splitRatios)))]
		seed := r.next()
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("run-%x-%d", r.next()%1000, i)
		}
		rs, err := SplitRuns(ids, val, test, seed)
		if err != nil {
			t.Fatal(err)
		}
		all := slices.Concat(rs.Train, rs.Val, rs.Test)
		slices.Sort(all)
		want := slices.Sorted(slices.Values(ids))
		if !slices.Equal(all, want) {
			t.Fatalf("iter %d: runs not assigned exactly once", iter)
		}
		for _, part := range [][]string{rs.Train, rs.Val, rs.Test} {
			if !slices.IsSorted(part) {
				t.Fatalf("iter %d: part not sorted: %v", iter, part)
			}
		}
		wv, wt := splitWantCounts(n, val, test)
		if len(rs.Train) < 1 || len(rs.Val) != wv || len(rs.Test) != wt {
			t.Fatalf("iter %d n=%d val=%v test=%v: %d/%d/%d, want val %d test %d", iter, n, val, test, len(rs.Train), len(rs.Val), len(rs.Test), wv, wt)
		}
		again, _ := SplitRuns(slices.Clone(ids), val, test, seed)
		if !splitRunSplitEqual(rs, again) {
			t.Fatalf("iter %d: not deterministic", iter)
		}
		if n >= 6 && (wv > 0 || wt > 0) {
			differs := false
			for other := seed + 1; other < seed+30 && !differs; other++ {
				o, _ := SplitRuns(ids, val, test, other)
				differs = !splitRunSplitEqual(rs, o)
			}
			if !differs {
				t.Fatalf("iter %d: 30 seeds give the same split", iter)
			}
		}
	}
}

func splitRunSplitEqual(a, b RunSplit) bool {
	return slices.Equal(a.Train, b.Train) && slices.Equal(a.Val, b.Val) && slices.Equal(a.Test, b.Test)
}

func TestSplitRowsProperties(t *testing.T) {
	r := splitRNG{state: 777}
	for iter := range 2000 {
		n := 1 + int(r.below(300))
		val, test := splitRatios[r.below(uint64(len(splitRatios)))], splitRatios[r.below(uint64(len(splitRatios)))]
		seed := r.next()
		tr, va, te, err := SplitRows(n, val, test, seed)
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]int, n)
		for _, part := range [][]int{tr, va, te} {
			if !slices.IsSorted(part) {
				t.Fatalf("iter %d: not sorted", iter)
			}
			for _, i := range part {
				seen[i]++
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("iter %d: row %d assigned %d times", iter, i, c)
			}
		}
		wv, wt := splitWantCounts(n, val, test)
		if len(tr) < 1 || len(va) != wv || len(te) != wt {
			t.Fatalf("iter %d: counts %d/%d/%d want val %d test %d", iter, len(tr), len(va), len(te), wv, wt)
		}
		tr2, va2, te2, _ := SplitRows(n, val, test, seed)
		if !slices.Equal(tr, tr2) || !slices.Equal(va, va2) || !slices.Equal(te, te2) {
			t.Fatalf("iter %d: not deterministic", iter)
		}
		if n >= 10 && wt > 0 {
			_, _, te3, _ := SplitRows(n, val, test, seed^1)
			_, _, te4, _ := SplitRows(n, val, test, seed^2)
			if slices.Equal(te, te3) && slices.Equal(te, te4) {
				t.Fatalf("iter %d: other seeds give the same test rows", iter)
			}
		}
	}
}

func TestSplitTimeBlocksProperties(t *testing.T) {
	r := splitRNG{state: 4242}
	for iter := range 3000 {
		nBlocks := 1 + int(r.below(40))
		purge := int(r.below(20))
		steps := nBlocks*(2*purge+1) + int(r.below(500))
		val, test := splitRatios[r.below(uint64(len(splitRatios)))], splitRatios[r.below(uint64(len(splitRatios)))]
		seed := r.next()
		blocks, err := SplitTimeBlocks("run-x", steps, nBlocks, purge, val, test, seed)
		if err != nil {
			t.Fatalf("iter %d steps=%d blocks=%d purge=%d: %v", iter, steps, nBlocks, purge, err)
		}
		if len(blocks) != nBlocks {
			t.Fatalf("iter %d: %d blocks", iter, len(blocks))
		}
		counts := map[string]int{}
		next := 0
		for k, b := range blocks {
			if b.StartStep != next || b.EndStep <= b.StartStep {
				t.Fatalf("iter %d: block %d [%d,%d) does not tile from %d", iter, k, b.StartStep, b.EndStep, next)
			}
			size := b.EndStep - b.StartStep
			wantSize := steps / nBlocks
			if k < steps%nBlocks {
				wantSize++
			}
			if size != wantSize || size <= 2*purge {
				t.Fatalf("iter %d: block %d has %d steps, want %d (> 2·%d)", iter, k, size, wantSize, purge)
			}
			next = b.EndStep
			if b.RunID != "run-x" || b.BlockID != fmt.Sprintf("run-x#%d", k) {
				t.Fatalf("iter %d: ids %q %q", iter, b.RunID, b.BlockID)
			}
			counts[b.Split]++
			wantBefore, wantAfter := 0, 0
			if k > 0 && blocks[k-1].Split != b.Split {
				wantBefore = purge
			}
			if k+1 < nBlocks && blocks[k+1].Split != b.Split {
				wantAfter = purge
			}
			if b.PurgeBeforeSteps != wantBefore || b.PurgeAfterSteps != wantAfter {
				t.Fatalf("iter %d: block %d purge %d/%d, want %d/%d", iter, k, b.PurgeBeforeSteps, b.PurgeAfterSteps, wantBefore, wantAfter)
			}
		}
		if next != steps {
			t.Fatalf("iter %d: blocks end at %d, want %d", iter, next, steps)
		}
		wv, wt := splitWantCounts(nBlocks, val, test)
		if counts[SplitTrain] < 1 || counts[SplitVal] != wv || counts[SplitTest] != wt || len(counts) > 3 {
			t.Fatalf("iter %d: counts %v, want val %d test %d", iter, counts, wv, wt)
		}
		again, _ := SplitTimeBlocks("run-x", steps, nBlocks, purge, val, test, seed)
		if !slices.Equal(blocks, again) {
			t.Fatalf("iter %d: not deterministic", iter)
		}
	}
}

func TestSplitTimeBlocksSeedMatters(t *testing.T) {
	a, _ := SplitTimeBlocks("r", 1000, 10, 5, 0.2, 0.2, 1)
	for seed := uint64(2); seed < 40; seed++ {
		b, _ := SplitTimeBlocks("r", 1000, 10, 5, 0.2, 0.2, seed)
		if !slices.Equal(a, b) {
			return
		}
	}
	t.Error("every seed gives the same blocks")
}

func TestSplitErrors(t *testing.T) {
	check := func(name string, err error, code, field, msg string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		if got := core.CodeOf(err); got != code {
			t.Errorf("%s: code %s, want %s (%v)", name, got, code, err)
		}
		ae := specAsError(t, err)
		if ae.Field != field || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: got field %q error %q, want field %q containing %q", name, ae.Field, err, field, msg)
		}
	}
	_, err := SplitRuns(nil, 0.1, 0.1, 1)
	check("no runs", err, core.CodeDatasetEmpty, "", "no runs")
	_, err = SplitRuns([]string{"a", "b", "a"}, 0.1, 0.1, 1)
	check("duplicate", err, core.CodeInvalidArgument, "runIds", `duplicate run ID "a"`)
	_, err = SplitRuns([]string{"a"}, math.NaN(), 0.1, 1)
	check("NaN", err, core.CodeInvalidArgument, "split.valRatio", "valRatio")
	_, err = SplitRuns([]string{"a"}, 0.1, -0.1, 1)
	check("negative", err, core.CodeInvalidArgument, "split.testRatio", "testRatio")
	_, err = SplitRuns([]string{"a"}, 0.6, 0.6, 1)
	check("sum", err, core.CodeInvalidArgument, "split.testRatio", "at most 1")
	_, _, _, err = SplitRows(0, 0.1, 0.1, 1)
	check("no rows", err, core.CodeDatasetEmpty, "", "no rows")
	_, _, _, err = SplitRows(5, math.Inf(1), 0.1, 1)
	check("rows Inf", err, core.CodeInvalidArgument, "split.valRatio", "valRatio")

	_, err = SplitTimeBlocks("r1", 9, 10, 0, 0.1, 0.1, 1)
	check("steps < blocks", err, core.CodeSpecInvalid, "split.blocks", "need at least 10 steps")
	_, err = SplitTimeBlocks("r1", 109, 10, 5, 0.1, 0.1, 1)
	check("block ≤ 2·purge", err, core.CodeSpecInvalid, "split.blocks", "run r1 has 109 grid steps, too few for 10 time blocks each longer than 2·5 purge steps (historySteps+horizonSteps): need at least 110 steps")
	if _, err := SplitTimeBlocks("r1", 110, 10, 5, 0.1, 0.1, 1); err != nil {
		t.Errorf("110 steps: %v", err)
	}
	_, err = SplitTimeBlocks("r1", 100, 0, 5, 0.1, 0.1, 1)
	check("0 blocks", err, core.CodeInvalidArgument, "split.blocks", "at least 1 block")
	_, err = SplitTimeBlocks("r1", 100, 3, -1, 0.1, 0.1, 1)
	check("negative purge", err, core.CodeInvalidArgument, "", "purge")
	_, err = SplitTimeBlocks("r1", math.MaxInt, 2, math.MaxInt, 0.1, 0.1, 1)
	check("huge purge", err, core.CodeSpecInvalid, "split.blocks", "need at least 2^63 steps")
	_, err = SplitTimeBlocks("r1", 100, 3, 5, 2, 0.1, 1)
	check("blocks bad ratio", err, core.CodeInvalidArgument, "split.valRatio", "valRatio")
}

func TestSplitTimeBlocksSingleBlock(t *testing.T) {
	b, err := SplitTimeBlocks("r", 10, 1, 4, 0.3, 0.3, 9)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1 || b[0] != (Block{BlockID: "r#0", RunID: "r", Split: SplitTrain, StartStep: 0, EndStep: 10}) {
		t.Errorf("%+v", b)
	}
}

func TestRunBlocks(t *testing.T) {
	rs := RunSplit{Train: []string{"a", "c"}, Val: []string{"b"}, Test: []string{"d"}}
	steps := map[string]int{"a": 10, "b": 20, "c": 30, "d": 40}
	got := RunBlocks(rs, func(id string) int { return steps[id] })
	want := []Block{
		{BlockID: "a#0", RunID: "a", Split: SplitTrain, EndStep: 10},
		{BlockID: "c#0", RunID: "c", Split: SplitTrain, EndStep: 30},
		{BlockID: "b#0", RunID: "b", Split: SplitVal, EndStep: 20},
		{BlockID: "d#0", RunID: "d", Split: SplitTest, EndStep: 40},
	}
	if !slices.Equal(got, want) {
		t.Errorf("RunBlocks = %+v", got)
	}
	if got := RunBlocks(RunSplit{}, nil); len(got) != 0 {
		t.Errorf("empty: %v", got)
	}
}
