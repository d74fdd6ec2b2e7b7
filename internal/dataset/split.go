package dataset

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/aml-project/aml/internal/core"
)

// Split names.
const (
	SplitTrain = "train"
	SplitVal   = "val"
	SplitTest  = "test"
)

// Splits must be reproducible forever, on every Go version and platform, and
// by other languages, so they use no library PRNG. The algorithm, exactly
// (all arithmetic on unsigned 64-bit integers, wrapping mod 2^64):
//
// PRNG — splitmix64 (Steele, Lea, Flood 2014), state initialised to seed:
//
//	next():
//	    state = state + 0x9E3779B97F4A7C15
//	    z = state
//	    z = (z XOR (z >> 30)) * 0xBF58476D1CE4E5B9
//	    z = (z XOR (z >> 27)) * 0x94D049BB133111EB
//	    return z XOR (z >> 31)
//
// Bounded draw — Lemire's multiply-shift with rejection, unbiased, for
// 1 ≤ n < 2^64; m = x·n is the full 128-bit product:
//
//	below(n):
//	    x = next(); m = x·n; lo = m mod 2^64
//	    if lo < n:
//	        t = (2^64 − n) mod n
//	        while lo < t:
//	            x = next(); m = x·n; lo = m mod 2^64
//	    return m >> 64
//
// Shuffle — Fisher–Yates from the end:
//
//	for i = len(a)−1 down to 1:
//	    j = below(i+1); swap a[i], a[j]
//
// Counts — for n items and ratios r (valRatio, testRatio):
//
//	nTest = roundHalfAwayFromZero(testRatio·n), nVal = same for valRatio
//	(the product is one IEEE-754 double multiplication, then rounded:
//	Go math.Round, C round(); in Python f = floor(x); f+1 if x−f ≥ 0.5
//	else f, exact because x−floor(x) is exact for doubles)
//	if ratio > 0 and its count is 0 and n ≥ 3: count = 1 (test, then val)
//	while nTest + nVal > n − 1: shrink nVal if > 0, else nTest
//	(train always keeps at least one item)
//
// Assignment — the shuffled sequence's first nTest items are test, the next
// nVal are val, the rest train; each list is returned sorted.
//
// A Python reference of SplitRuns (SplitRows and SplitTimeBlocks shuffle
// list(range(n)) instead of the byte-sorted IDs; SplitTimeBlocks then maps
// the three index lists to the blocks with those indices):
//
//	import math
//
//	M = 2**64 - 1
//
//	def split_counts(n, val, test):
//	    def rnd(r):
//	        x = r * n
//	        f = math.floor(x)
//	        return int(f + 1 if x - f >= 0.5 else f)
//	    n_test, n_val = rnd(test), rnd(val)
//	    if n >= 3:
//	        if test > 0 and n_test == 0: n_test = 1
//	        if val > 0 and n_val == 0: n_val = 1
//	    while n_test + n_val > n - 1 and n_test + n_val > 0:
//	        if n_val > 0: n_val -= 1
//	        else: n_test -= 1
//	    return n_test, n_val
//
//	def split_runs(ids, val, test, seed):
//	    st = seed
//	    def nxt():
//	        nonlocal st
//	        st = (st + 0x9E3779B97F4A7C15) & M
//	        z = st
//	        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
//	        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
//	        return z ^ (z >> 31)
//	    def below(n):
//	        m = nxt() * n
//	        if m & M < n:
//	            t = (2**64 - n) % n
//	            while m & M < t:
//	                m = nxt() * n
//	        return m >> 64
//	    a = sorted(ids, key=lambda s: s.encode())
//	    for i in range(len(a) - 1, 0, -1):
//	        j = below(i + 1); a[i], a[j] = a[j], a[i]
//	    n_test, n_val = split_counts(len(a), val, test)
//	    return (sorted(a[n_test + n_val:]), sorted(a[n_test:n_test + n_val]),
//	            sorted(a[:n_test]))
type splitRNG struct{ state uint64 }

func (r *splitRNG) next() uint64 {
	r.state += 0x9E3779B97F4A7C15
	z := r.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// below returns a uniform integer in [0, n), n ≥ 1.
func (r *splitRNG) below(n uint64) uint64 {
	hi, lo := bits.Mul64(r.next(), n)
	if lo < n {
		t := -n % n // (2^64 − n) mod n
		for lo < t {
			hi, lo = bits.Mul64(r.next(), n)
		}
	}
	return hi
}

// splitShuffle permutes a in place (Fisher–Yates from the end).
func splitShuffle[T any](a []T, seed uint64) {
	r := splitRNG{state: seed}
	for i := len(a) - 1; i >= 1; i-- {
		j := r.below(uint64(i) + 1)
		a[i], a[j] = a[j], a[i]
	}
}

// splitRound is round half away from zero of one double product.
func splitRound(ratio float64, n int) int {
	x := float64(ratio * float64(n)) // explicit conversion: no fused operations
	return int(math.Round(x))
}

// splitCounts returns how many of n items go to test and val.
func splitCounts(n int, valRatio, testRatio float64) (nVal, nTest int, err error) {
	for _, r := range [...]struct {
		name string
		v    float64
	}{{"valRatio", valRatio}, {"testRatio", testRatio}} {
		if math.IsNaN(r.v) || r.v < 0 || r.v > 1 {
			return 0, 0, core.FieldErrorf(core.CodeInvalidArgument, "split."+r.name, "%s must be 0..1, got %v", r.name, r.v)
		}
	}
	if valRatio+testRatio > 1 {
		return 0, 0, core.FieldErrorf(core.CodeInvalidArgument, "split.testRatio", "valRatio+testRatio must be at most 1, got %v+%v", valRatio, testRatio)
	}
	nTest = splitRound(testRatio, n)
	nVal = splitRound(valRatio, n)
	if n >= 3 {
		if testRatio > 0 && nTest == 0 {
			nTest = 1
		}
		if valRatio > 0 && nVal == 0 {
			nVal = 1
		}
	}
	for nTest+nVal > n-1 && nTest+nVal > 0 {
		if nVal > 0 {
			nVal--
		} else {
			nTest--
		}
	}
	return nVal, nTest, nil
}

// RunSplit is a split of runs; each list is sorted by byte order.
type RunSplit struct{ Train, Val, Test []string }

// SplitRuns splits run IDs into train, val and test: it sorts them by byte
// order, shuffles them with seed, takes the first nTest for test, the next
// nVal for val and gives the rest to train (the exact algorithm is documented on splitRNG in split.go).
// nTest = round(testRatio·n), nVal = round(valRatio·n) (half away from
// zero); a ratio > 0 that rounds to 0 takes 1 when n ≥ 3; train keeps at
// least one run (val shrinks first, then test). No runs, a duplicate ID or a
// ratio outside 0..1 (or summing over 1) is an error.
func SplitRuns(runIDs []string, valRatio, testRatio float64, seed uint64) (RunSplit, error) {
	n := len(runIDs)
	if n == 0 {
		return RunSplit{}, core.Errorf(core.CodeDatasetEmpty, "no runs to split")
	}
	nVal, nTest, err := splitCounts(n, valRatio, testRatio)
	if err != nil {
		return RunSplit{}, err
	}
	a := slices.Clone(runIDs)
	slices.Sort(a)
	for i := 1; i < n; i++ {
		if a[i] == a[i-1] {
			return RunSplit{}, core.FieldErrorf(core.CodeInvalidArgument, "runIds", "duplicate run ID %q", a[i])
		}
	}
	splitShuffle(a, seed)
	rs := RunSplit{
		Test:  slices.Clone(a[:nTest]),
		Val:   slices.Clone(a[nTest : nTest+nVal]),
		Train: slices.Clone(a[nTest+nVal:]),
	}
	slices.Sort(rs.Train)
	slices.Sort(rs.Val)
	slices.Sort(rs.Test)
	return rs, nil
}

// SplitRows splits row indices 0..n−1 like [SplitRuns] splits run IDs (the
// shuffled sequence is 0..n−1), returning sorted index lists.
func SplitRows(n int, valRatio, testRatio float64, seed uint64) (train, val, test []int, err error) {
	if n <= 0 {
		return nil, nil, nil, core.Errorf(core.CodeDatasetEmpty, "no rows to split")
	}
	nVal, nTest, err := splitCounts(n, valRatio, testRatio)
	if err != nil {
		return nil, nil, nil, err
	}
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	splitShuffle(a, seed)
	test = slices.Clone(a[:nTest])
	val = slices.Clone(a[nTest : nTest+nVal])
	train = slices.Clone(a[nTest+nVal:])
	slices.Sort(train)
	slices.Sort(val)
	slices.Sort(test)
	return train, val, test, nil
}

// Block is a contiguous range [StartStep, EndStep) of one run's grid steps
// assigned to one split. Windows must not use the first PurgeBeforeSteps
// or the last PurgeAfterSteps steps of the block.
type Block struct {
	BlockID          string `json:"blockId"` // "<runId>#<k>", k = 0.. in time order
	RunID            string `json:"runId"`
	Split            string `json:"split"` // train | val | test
	StartStep        int    `json:"startStep"`
	EndStep          int    `json:"endStep"`
	PurgeBeforeSteps int    `json:"purgeBeforeSteps"`
	PurgeAfterSteps  int    `json:"purgeAfterSteps"`
}

// SplitTimeBlocks cuts one run of steps grid steps into nBlocks contiguous
// blocks of near-equal size (steps/nBlocks each, the first steps%nBlocks
// blocks one more) and assigns them to splits by shuffling the block
// indices 0..nBlocks−1 with seed, with the same counts as [SplitRuns]
// (train keeps at least one block). At each boundary between two blocks of
// different splits both sides purge purge steps (the caller passes H+F):
// PurgeAfterSteps on the earlier block, PurgeBeforeSteps on the later one,
// so no window can leak across. Blocks are returned in time order.
//
// The seed is used as given: callers splitting several runs should vary it
// per run, or every run gets the same pattern. It is an error if steps <
// nBlocks or a block would be at most 2·purge steps long.
func SplitTimeBlocks(runID string, steps, nBlocks, purge int, valRatio, testRatio float64, seed uint64) ([]Block, error) {
	if nBlocks < 1 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "split.blocks", "need at least 1 block, got %d", nBlocks)
	}
	if purge < 0 {
		return nil, core.Errorf(core.CodeInvalidArgument, "purge must be ≥ 0, got %d", purge)
	}
	if steps < nBlocks || (steps/nBlocks)-(steps/nBlocks)/2 <= purge { // block ≤ 2·purge, overflow-free
		// Each block needs at least 2·purge+1 steps.
		need := "2^63"
		if hi, lo := bits.Mul64(uint64(nBlocks), 2*uint64(purge)+1); hi == 0 && lo <= math.MaxInt64 {
			need = strconv.FormatUint(lo, 10)
		}
		return nil, core.FieldErrorf(core.CodeSpecInvalid, "split.blocks",
			"run %s has %d grid steps, too few for %d time blocks each longer than 2·%d purge steps (historySteps+horizonSteps): need at least %s steps; use fewer blocks or mode by_run",
			runID, steps, nBlocks, purge, need)
	}
	nVal, nTest, err := splitCounts(nBlocks, valRatio, testRatio)
	if err != nil {
		return nil, err
	}
	order := make([]int, nBlocks)
	for i := range order {
		order[i] = i
	}
	splitShuffle(order, seed)
	split := make([]string, nBlocks)
	for i, k := range order {
		switch {
		case i < nTest:
			split[k] = SplitTest
		case i < nTest+nVal:
			split[k] = SplitVal
		default:
			split[k] = SplitTrain
		}
	}
	base, rem := steps/nBlocks, steps%nBlocks
	blocks := make([]Block, nBlocks)
	start := 0
	for k := range blocks {
		size := base
		if k < rem {
			size++
		}
		blocks[k] = Block{
			BlockID: fmt.Sprintf("%s#%d", runID, k), RunID: runID, Split: split[k],
			StartStep: start, EndStep: start + size,
		}
		start += size
	}
	for k := 0; k+1 < nBlocks; k++ {
		if blocks[k].Split != blocks[k+1].Split {
			blocks[k].PurgeAfterSteps = purge
			blocks[k+1].PurgeBeforeSteps = purge
		}
	}
	return blocks, nil
}

// RunBlocks returns one block per run covering the whole run, without purge
// (by_run mode): train runs, then val runs, then test runs, each in the
// split's order. stepsOf gives a run's number of grid steps.
func RunBlocks(s RunSplit, stepsOf func(runID string) int) []Block {
	out := make([]Block, 0, len(s.Train)+len(s.Val)+len(s.Test))
	for _, part := range [...]struct {
		name string
		ids  []string
	}{{SplitTrain, s.Train}, {SplitVal, s.Val}, {SplitTest, s.Test}} {
		for _, id := range part.ids {
			out = append(out, Block{BlockID: id + "#0", RunID: id, Split: part.name, EndStep: stepsOf(id)})
		}
	}
	return out
}
