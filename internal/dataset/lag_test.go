package dataset

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// lagSumsRef is the plain per-pair loop lagCols replaced: every lag's
// sums over mean-removed, masked columns, one lag at a time.
func lagSumsRef(g *runGrid, nAll, ci, co, maxLag int) lagSums {
	L := 2*maxLag + 1
	s := lagSums{sxy: make([]float64, L), sxx: make([]float64, L), syy: make([]float64, L), n: make([]int, L)}
	a, ma, fullA := column(g, nAll, ci)
	b, mb, fullB := column(g, nAll, co)
	T := g.steps
	for li := 0; li < L; li++ {
		lag := li - maxLag
		lo, hi := max(0, -lag), min(T, T-lag)
		if hi <= lo {
			continue
		}
		as, bs := a[lo:hi], b[lo+lag:hi+lag]
		var sxy, sxx, syy float64
		n := 0
		if fullA && fullB {
			for t := range as {
				x, y := as[t], bs[t]
				sxy += x * y
				sxx += x * x
				syy += y * y
			}
			n = len(as)
		} else {
			mas, mbs := ma[lo:hi], mb[lo+lag:hi+lag]
			cnt := 0.0
			for t := range as {
				x, y, w := as[t], bs[t], mas[t]*mbs[t]
				sxy += x * y * w
				sxx += x * x * w
				syy += y * y * w
				cnt += w
			}
			n = int(cnt)
		}
		s.sxy[li], s.sxx[li], s.syy[li], s.n[li] = sxy, sxx, syy, n
	}
	return s
}

// The shared, four-lags-at-a-time sums are bit for bit the plain loop's,
// for complete and gappy (sparse or mostly missing) columns, a gappy
// column holding +Inf (NaN sums, formed alike), runs shorter than the lag
// range and every lag count.
func TestLagSumsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const nAll = 4
	for _, steps := range []int{1, 2, 5, 29, 30, 31, 61, 62, 100, 1000} {
		for _, maxLag := range []int{0, 1, 3, 10, 30} {
			for _, c := range []struct{ nanP, infP float64 }{{0, 0}, {0.05, 0}, {0.05, 0.002}, {0.6, 0}} {
				nanP := c.nanP
				g := &runGrid{steps: steps, vals: make([]float32, steps*nAll)}
				for i := range g.vals {
					v := float32(rng.NormFloat64()*3 + 10)
					if rng.Float64() < nanP && i%nAll != 0 {
						v = float32(math.NaN())
					} else if rng.Float64() < c.infP && i%nAll == 3 {
						v = float32(math.Inf(1))
					}
					g.vals[i] = v
				}
				if c.infP > 0 {
					g.vals[steps/2*nAll+3] = float32(math.Inf(1)) // at least one, in a gappy column
				}
				lc := newLagCols(g, nAll, maxLag)
				for _, pair := range [][2]int{{0, 1}, {0, 2}, {3, 1}, {3, 2}, {0, 3}, {1, 0}, {3, 0}, {0, 0}} {
					got, want := lc.sums(pair[0], pair[1]), lagSumsRef(g, nAll, pair[0], pair[1], maxLag)
					for li := range want.sxy {
						if math.Float64bits(got.sxy[li]) != math.Float64bits(want.sxy[li]) || math.Float64bits(got.sxx[li]) != math.Float64bits(want.sxx[li]) ||
							math.Float64bits(got.syy[li]) != math.Float64bits(want.syy[li]) || got.n[li] != want.n[li] {
							t.Fatalf("steps %d maxLag %d nan %v pair %v lag %d: got %v %v %v %d, want %v %v %v %d", steps, maxLag, nanP, pair, li-maxLag,
								got.sxy[li], got.sxx[li], got.syy[li], got.n[li], want.sxy[li], want.sxx[li], want.syy[li], want.n[li])
						}
					}
				}
			}
		}
	}
}

// BenchmarkLagSums: one run of the bench spec's shape (7 200 steps, 10
// nodes, 5 inputs × 3 targets, maxLag 30) — the plain per-pair loop
// ("plain") beside lagCols ("shared") in the same run, on complete columns
// on gappy ones (1 % of every column missing) and on "mixed" ones as in
// the bench store's grids (controls complete, 1 % of every other column
// missing), where the masked sums run.
func BenchmarkLagSums(b *testing.B) {
	const nAll, steps = 10, 7200
	var pairs [][2]int
	for i := range 5 {
		for k := 7; k < 10; k++ {
			pairs = append(pairs, [2]int{i, k})
		}
	}
	for _, c := range []struct {
		sfx     string
		gap     float64
		fullCol int // columns below are complete
	}{{"", 0, 0}, {"-gappy", 0.01, 0}, {"-mixed", 0.01, 3}} {
		rng := rand.New(rand.NewPCG(1, 2))
		g := &runGrid{steps: steps, vals: make([]float32, steps*nAll)}
		for i := range g.vals {
			g.vals[i] = float32(rng.NormFloat64())
			if rng.Float64() < c.gap && i%nAll >= c.fullCol {
				g.vals[i] = float32(math.NaN())
			}
		}
		sfx := c.sfx
		b.Run("plain"+sfx, func(b *testing.B) {
			for range b.N {
				for _, p := range pairs {
					lagSumsRef(g, nAll, p[0], p[1], 30)
				}
			}
		})
		b.Run("shared"+sfx, func(b *testing.B) {
			for range b.N {
				lc := newLagCols(g, nAll, 30)
				for _, p := range pairs {
					lc.sums(p[0], p[1])
				}
			}
		})
	}
}

// summarizeRef is summarize as it was: the order statistics read from a
// sorted copy.
func summarizeRef(vals []float64) Summary {
	var xs []float64
	for _, v := range vals {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			xs = append(xs, v)
		}
	}
	var s Summary
	s.Count = len(xs)
	if s.Count == 0 {
		return s
	}
	mean, m2 := 0.0, 0.0
	for i, v := range xs {
		d := v - mean
		mean += d / float64(i+1)
		m2 += d * (v - mean)
	}
	s.Mean, s.Std = mean, math.Sqrt(m2/float64(len(xs)))
	sort.Float64s(xs)
	q := func(p float64) float64 {
		pos := p * float64(len(xs)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(xs)-1)
		return xs[lo] + (pos-float64(lo))*(xs[hi]-xs[lo])
	}
	s.Min, s.Max = xs[0], xs[len(xs)-1]
	s.P05, s.P50, s.P95 = q(0.05), q(0.5), q(0.95)
	return s
}

// summarize (order statistics by selection) gives the sorted copy's
// summary bit for bit: every length from 0 to 60 and some long series,
// with repeated values, few distinct values, NaN, ±Inf and signed zeros.
func TestSummarizeMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	bits := func(s Summary) [8]uint64 {
		return [8]uint64{uint64(s.Count), math.Float64bits(s.Mean), math.Float64bits(s.Std), math.Float64bits(s.Min),
			math.Float64bits(s.Max), math.Float64bits(s.P05), math.Float64bits(s.P50), math.Float64bits(s.P95)}
	}
	lengths := []int{1000, 4097, 20000}
	for n := range 61 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for trial := range 6 {
			vals := make([]float64, n)
			for i := range vals {
				switch trial {
				case 0:
					vals[i] = rng.NormFloat64()
				case 1:
					vals[i] = float64(rng.IntN(4)) // few distinct values
				case 2:
					vals[i] = float64(float32(100 + rng.NormFloat64()))
				default:
					vals[i] = rng.NormFloat64()
					switch rng.IntN(12) {
					case 0:
						vals[i] = math.NaN()
					case 1:
						vals[i] = math.Inf(1 - 2*rng.IntN(2))
					case 2:
						vals[i] = 0
					case 3:
						if trial == 5 {
							vals[i] = math.Copysign(0, -1)
						}
					}
				}
			}
			in := slices.Clone(vals)
			if got, want := summarize(vals), summarizeRef(in); bits(got) != bits(want) {
				t.Fatalf("n %d trial %d: %+v, want %+v", n, trial, got, want)
			}
		}
	}
}
