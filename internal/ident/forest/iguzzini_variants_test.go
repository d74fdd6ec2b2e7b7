//go:build igexp

// The iGuzzini accuracy variants of bench/RESULTS.md ("Static ensemble:
// more variants for iGuzzini"): 5-fold CV with fold = row mod 5, seeds
// 1–3 (fold seed 1000·seed + fold), every choice fixed before the folds
// were scored, nothing fitted on a test fold. Not built by default (a few
// minutes on two cores):
//
//	go test -tags igexp -run TestIguzziniVariants -v ./internal/ident/forest
//
// ZZV=NAME runs one variant.
package forest

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
)

func loadIG(t *testing.T) ([][]float64, []float64) {
	f, err := os.Open("../../../../shared/datasets/injection_molding_iguzzini/injection_molding_iguzzini.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, _ := csv.NewReader(f).ReadAll()
	var X [][]float64
	var y []float64
	for _, r := range rows[1:] {
		x := make([]float64, 13)
		for j := 0; j < 13; j++ {
			x[j], _ = strconv.ParseFloat(r[1+j], 64)
		}
		v, _ := strconv.ParseFloat(r[14], 64)
		X, y = append(X, x), append(y, v)
	}
	return X, y
}

func clampRound(v float64) float64 { return math.Max(1, math.Min(4, math.Round(v))) }

// cut applies thresholds c (3 ascending) to a score.
func cut(v float64, c []float64) float64 {
	k := 1.0
	for _, t := range c {
		if v > t {
			k++
		}
	}
	return k
}

// fitCuts picks thresholds maximising accuracy of OOB scores s vs y
// (coordinate search around 1.5, 2.5, 3.5).
func fitCuts(s, y []float64) []float64 {
	c := []float64{1.5, 2.5, 3.5}
	acc := func(c []float64) int {
		n := 0
		for i := range s {
			if !math.IsNaN(s[i]) && cut(s[i], c) == y[i] {
				n++
			}
		}
		return n
	}
	for it := 0; it < 3; it++ {
		for j := range c {
			best, bv := acc(c), c[j]
			for v := float64(j) + 1.2; v <= float64(j)+1.8; v += 0.01 {
				c[j] = v
				if a := acc(c); a > best {
					best, bv = a, v
				}
			}
			c[j] = bv
		}
	}
	return c
}

func TestIguzziniVariants(t *testing.T) {
	X, y := loadIG(t)
	n := len(X)
	type variant struct {
		name string
		run  func(Xtr [][]float64, ytr []float64, Xte [][]float64, seed uint64) []float64
	}
	var clsC func(trees, mtry, leaf int, crit, mode string) func([][]float64, []float64, [][]float64, uint64) []float64
	reg := func(trees, mtry, leaf int, cuts bool) func([][]float64, []float64, [][]float64, uint64) []float64 {
		return func(Xtr [][]float64, ytr []float64, Xte [][]float64, seed uint64) []float64 {
			o := DefaultOptions(Regression)
			o.Trees, o.MaxFeatures, o.MinLeaf, o.Seed = trees, mtry, leaf, seed
			f, _ := Fit(Xtr, ytr, o)
			c := []float64{1.5, 2.5, 3.5}
			if cuts {
				c = fitCuts(f.OOBPredictions(), ytr)
			}
			out := make([]float64, len(Xte))
			for i, x := range Xte {
				out[i] = cut(f.Predict(x), c)
			}
			return out
		}
	}
	clsE := func(trees, mtry, leaf int, mode string) func([][]float64, []float64, [][]float64, uint64) []float64 {
		return clsC(trees, mtry, leaf, "", mode)
	}
	_ = clsE
	clsC = func(trees, mtry, leaf int, crit, mode string) func([][]float64, []float64, [][]float64, uint64) []float64 {
		return func(Xtr [][]float64, ytr []float64, Xte [][]float64, seed uint64) []float64 {
			o := DefaultOptions(Classification)
			o.Trees, o.MaxFeatures, o.MinLeaf, o.Seed, o.Criterion = trees, mtry, leaf, seed, crit
			f, _ := Fit(Xtr, ytr, o)
			out := make([]float64, len(Xte))
			p := make([]float64, 4)
			for i, x := range Xte {
				f.Proba(x, p)
				switch mode {
				case "argmax":
					out[i] = f.decide(p)
				case "mean":
					e := 0.0
					for c, v := range p {
						e += v * f.Classes[c]
					}
					out[i] = clampRound(e)
				case "median":
					cum := 0.0
					for c, v := range p {
						cum += v
						if cum >= 0.5 {
							out[i] = f.Classes[c]
							break
						}
					}
				}
			}
			return out
		}
	}
	combo := func(trees int) func([][]float64, []float64, [][]float64, uint64) []float64 {
		return func(Xtr [][]float64, ytr []float64, Xte [][]float64, seed uint64) []float64 {
			o := DefaultOptions(Regression)
			o.Trees, o.MaxFeatures, o.MinLeaf, o.Seed = trees, 3, 2, seed
			fr, _ := Fit(Xtr, ytr, o)
			oc := DefaultOptions(Classification)
			oc.Trees, oc.Seed = trees, seed+100
			fc, _ := Fit(Xtr, ytr, oc)
			out := make([]float64, len(Xte))
			p := make([]float64, 4)
			for i, x := range Xte {
				fc.Proba(x, p)
				e := 0.0
				for c, v := range p {
					e += v * fc.Classes[c]
				}
				out[i] = clampRound((e + fr.Predict(x)) / 2)
			}
			return out
		}
	}
	pcaAug := func(trees, mtry, leaf int) func([][]float64, []float64, [][]float64, uint64) []float64 {
		return func(Xtr [][]float64, ytr []float64, Xte [][]float64, seed uint64) []float64 {
			d := len(Xtr[0])
			mu, sd := make([]float64, d), make([]float64, d)
			for _, x := range Xtr {
				for j, v := range x {
					mu[j] += v
				}
			}
			for j := range mu {
				mu[j] /= float64(len(Xtr))
			}
			for _, x := range Xtr {
				for j, v := range x {
					sd[j] += (v - mu[j]) * (v - mu[j])
				}
			}
			for j := range sd {
				sd[j] = math.Sqrt(sd[j]/float64(len(Xtr))) + 1e-12
			}
			// covariance of standardised train rows, eigenvectors by Jacobi
			C := make([][]float64, d)
			for i := range C {
				C[i] = make([]float64, d)
			}
			for _, x := range Xtr {
				for i := 0; i < d; i++ {
					zi := (x[i] - mu[i]) / sd[i]
					for j := 0; j < d; j++ {
						C[i][j] += zi * (x[j] - mu[j]) / sd[j] / float64(len(Xtr))
					}
				}
			}
			V := jacobi(C)
			aug := func(x []float64) []float64 {
				out := append([]float64(nil), x...)
				for k := 0; k < d; k++ {
					s := 0.0
					for j := 0; j < d; j++ {
						s += V[j][k] * (x[j] - mu[j]) / sd[j]
					}
					out = append(out, s)
				}
				return out
			}
			var A [][]float64
			for _, x := range Xtr {
				A = append(A, aug(x))
			}
			o := DefaultOptions(Regression)
			o.Trees, o.MaxFeatures, o.MinLeaf, o.Seed = trees, mtry, leaf, seed
			f, _ := Fit(A, ytr, o)
			out := make([]float64, len(Xte))
			for i, x := range Xte {
				out[i] = clampRound(f.Predict(aug(x)))
			}
			return out
		}
	}
	// knobs chosen per outer fold by the out-of-bag accuracy of the
	// training folds' forests (an inner estimate: the test fold is not
	// seen), then refitted with 1000 trees
	oobPick := func(Xtr [][]float64, ytr []float64, Xte [][]float64, seed uint64) []float64 {
		best, bm, bl := -1, 3, 2
		for _, m := range []int{2, 3, 4, 5} {
			for _, l := range []int{1, 2, 3, 5} {
				o := DefaultOptions(Regression)
				o.Trees, o.MaxFeatures, o.MinLeaf, o.Seed = 500, m, l, seed+7
				f, _ := Fit(Xtr, ytr, o)
				right := 0
				for i, p := range f.OOBPredictions() {
					if !math.IsNaN(p) && clampRound(p) == ytr[i] {
						right++
					}
				}
				if right > best {
					best, bm, bl = right, m, l
				}
			}
		}
		return reg(1000, bm, bl, false)(Xtr, ytr, Xte, seed)
	}
	// the ordinal forest's score and gradient-boosted trees' score
	// averaged with weight wb on the boost, rounded
	blend := func(trees int, wb float64) func([][]float64, []float64, [][]float64, uint64) []float64 {
		return func(Xtr [][]float64, ytr []float64, Xte [][]float64, seed uint64) []float64 {
			o := DefaultOptions(Regression)
			o.Trees, o.MaxFeatures, o.MinLeaf, o.Seed = trees, 3, 2, seed
			fr, _ := Fit(Xtr, ytr, o)
			fb, err := Boost(Xtr, ytr, BoostOptions{Rounds: 400, LearningRate: 0.03, MaxDepth: 3, MinLeaf: 4, Subsample: 0.8, Seed: seed + 50})
			if err != nil {
				panic(err)
			}
			out := make([]float64, len(Xte))
			for i, x := range Xte {
				out[i] = clampRound((1-wb)*fr.Predict(x) + wb*fb.Predict(x))
			}
			return out
		}
	}
	sub := func(trees int, frac float64) func([][]float64, []float64, [][]float64, uint64) []float64 {
		return func(Xtr [][]float64, ytr []float64, Xte [][]float64, seed uint64) []float64 {
			o := DefaultOptions(Regression)
			o.Trees, o.MaxFeatures, o.MinLeaf, o.Seed, o.Bootstrap, o.SampleFraction = trees, 3, 2, seed, false, frac
			f, _ := Fit(Xtr, ytr, o)
			out := make([]float64, len(Xte))
			for i, x := range Xte {
				out[i] = clampRound(f.Predict(x))
			}
			return out
		}
	}
	// four differences of related process quantities appended before any
	// fold was scored: torque peak − mean, cycle − filling −
	// plasticizing time, clamping peak − closing force, injection −
	// back pressure peak
	feat := func(trees, mtry int) func([][]float64, []float64, [][]float64, uint64) []float64 {
		aug := func(x []float64) []float64 {
			return append(append([]float64(nil), x...), x[7]-x[8], x[4]-x[2]-x[3], x[6]-x[5], x[10]-x[9])
		}
		return func(Xtr [][]float64, ytr []float64, Xte [][]float64, seed uint64) []float64 {
			var A [][]float64
			for _, x := range Xtr {
				A = append(A, aug(x))
			}
			o := DefaultOptions(Regression)
			o.Trees, o.MaxFeatures, o.MinLeaf, o.Seed = trees, mtry, 2, seed
			f, _ := Fit(A, ytr, o)
			out := make([]float64, len(Xte))
			for i, x := range Xte {
				out[i] = clampRound(f.Predict(aug(x)))
			}
			return out
		}
	}
	vs := []variant{
		{"feat1000 m3", feat(1000, 3)},
		{"feat1000 m4", feat(1000, 4)},
		{"blend1000 0.3", blend(1000, 0.3)},
		{"blend1000 0.5", blend(1000, 0.5)},
		{"sub1000 0.632", sub(1000, 0.632)},
		{"sub3000 0.632", sub(3000, 0.632)},
		{"sub1000 0.8", sub(1000, 0.8)},
		{"oobpick1000", oobPick},
		{"pca1000 m5 l2", pcaAug(1000, 5, 2)},
		{"pca1000 m8 l2", pcaAug(1000, 8, 2)},
		{"reg1000 m3 l2", reg(1000, 3, 2, false)},
		{"reg1000 m3 l2 oobcuts", reg(1000, 3, 2, true)},
		{"cls1000 argmax", clsE(1000, 3, 1, "argmax")},
		{"cls1000 mean", clsE(1000, 3, 1, "mean")},
		{"cls1000 median", clsE(1000, 3, 1, "median")},
		{"combo1000", combo(1000)},
		{"reg3000 m3 l2", reg(3000, 3, 2, false)},
		{"cls1000 entropy argmax", clsC(1000, 3, 1, CriterionEntropy, "argmax")},
		{"cls1000 entropy mean", clsC(1000, 3, 1, CriterionEntropy, "mean")},
		{"cls1000 gainratio argmax", clsC(1000, 3, 1, CriterionGainRatio, "argmax")},
		{"cls1000 gainratio mean", clsC(1000, 3, 1, CriterionGainRatio, "mean")},
		{"cls1000 gainratio l2 argmax", clsC(1000, 3, 2, CriterionGainRatio, "argmax")},
		{"cls1000 gainratio m4 argmax", clsC(1000, 4, 1, CriterionGainRatio, "argmax")},
	}
	only := os.Getenv("ZZV")
	for _, v := range vs {
		if only != "" && only != v.name {
			continue
		}
		var accs []float64
		for seed := uint64(1); seed <= 3; seed++ {
			right := 0
			for fold := 0; fold < 5; fold++ {
				var Xtr, Xte [][]float64
				var ytr, yte []float64
				for i := 0; i < n; i++ {
					if i%5 == fold {
						Xte, yte = append(Xte, X[i]), append(yte, y[i])
					} else {
						Xtr, ytr = append(Xtr, X[i]), append(ytr, y[i])
					}
				}
				p := v.run(Xtr, ytr, Xte, seed*1000+uint64(fold))
				for i := range p {
					if p[i] == yte[i] {
						right++
					}
				}
			}
			accs = append(accs, float64(right)/float64(n))
		}
		m, sd := meanSD(accs)
		fmt.Printf("%-28s seeds 1-3 %v: %.2f ± %.2f %%\n", v.name, accs, 100*m, 100*sd)
	}
}

// jacobi returns the eigenvectors (columns) of symmetric a.
func jacobi(a [][]float64) [][]float64 {
	n := len(a)
	A := make([][]float64, n)
	V := make([][]float64, n)
	for i := range A {
		A[i] = append([]float64(nil), a[i]...)
		V[i] = make([]float64, n)
		V[i][i] = 1
	}
	for sweep := 0; sweep < 50; sweep++ {
		off := 0.0
		for p := 0; p < n; p++ {
			for q := p + 1; q < n; q++ {
				off += A[p][q] * A[p][q]
			}
		}
		if off < 1e-20 {
			break
		}
		for p := 0; p < n; p++ {
			for q := p + 1; q < n; q++ {
				if math.Abs(A[p][q]) < 1e-15 {
					continue
				}
				th := (A[q][q] - A[p][p]) / (2 * A[p][q])
				t := math.Copysign(1, th) / (math.Abs(th) + math.Sqrt(th*th+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := 0; k < n; k++ {
					akp, akq := A[k][p], A[k][q]
					A[k][p], A[k][q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := 0; k < n; k++ {
					apk, aqk := A[p][k], A[q][k]
					A[p][k], A[q][k] = c*apk-s*aqk, s*apk+c*aqk
				}
				for k := 0; k < n; k++ {
					vkp, vkq := V[k][p], V[k][q]
					V[k][p], V[k][q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	return V
}

func meanSD(v []float64) (float64, float64) {
	m := 0.0
	for _, x := range v {
		m += x
	}
	m /= float64(len(v))
	s := 0.0
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return m, math.Sqrt(s / float64(len(v)-1))
}
