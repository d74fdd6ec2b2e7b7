package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/eval"
)

// mahalanobisRef is the plain double loop mahalanobisInto replaced.
func mahalanobisRef(o *eval.OOD, z []float64) float64 {
	q := 0.0
	for i, row := range o.Prec {
		di := z[i] - o.Mean[i]
		s := 0.0
		for j, pv := range row {
			s += pv * (z[j] - o.Mean[j])
		}
		q += di * s
	}
	return math.Sqrt(math.Max(0, q))
}

// mahalanobisInto gives the plain loop's distance bit for bit, for every
// size (four-row blocks and the rest) and for NaN and infinite features.
func TestMahalanobisInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var dz []float64
	for n := 1; n <= 23; n++ {
		for trial := range 20 {
			o := &eval.OOD{Mean: make([]float64, n), Prec: make([][]float64, n)}
			z := make([]float64, n)
			for i := range n {
				o.Mean[i], z[i] = rng.NormFloat64()*5, rng.NormFloat64()*5
				o.Prec[i] = make([]float64, n)
				for j := range n {
					o.Prec[i][j] = rng.NormFloat64()
				}
			}
			switch trial {
			case 1:
				z[rng.IntN(n)] = math.NaN()
			case 2:
				z[rng.IntN(n)] = math.Inf(1)
			}
			got, want := mahalanobisInto(o, z, &dz), mahalanobisRef(o, z)
			if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("n %d trial %d: %v, plain loop %v", n, trial, got, want)
			}
		}
	}
}
