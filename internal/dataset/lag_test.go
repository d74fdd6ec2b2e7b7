package dataset

import (
	"math"
	"math/rand/v2"
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
				for _, pair := range [][2]int{{0, 1}, {0, 2}, {3, 1}, {3, 2}, {0, 3}} {
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
// and on gappy ones (1 % of every column missing, as in the bench store's
// grids, where the masked sums run).
func BenchmarkLagSums(b *testing.B) {
	const nAll, steps = 10, 7200
	var pairs [][2]int
	for i := range 5 {
		for k := 7; k < 10; k++ {
			pairs = append(pairs, [2]int{i, k})
		}
	}
	for _, gap := range []float64{0, 0.01} {
		rng := rand.New(rand.NewPCG(1, 2))
		g := &runGrid{steps: steps, vals: make([]float32, steps*nAll)}
		for i := range g.vals {
			g.vals[i] = float32(rng.NormFloat64())
			if rng.Float64() < gap {
				g.vals[i] = float32(math.NaN())
			}
		}
		sfx := ""
		if gap > 0 {
			sfx = "-gappy"
		}
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
