package lsq

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkFactor: R of a 200 000 × 42 Gaussian [A b] (the shape of the
// ARX benchmark), the solver's kernel alone.
func BenchmarkFactor(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	a := randDense(r, 200_000, 41)
	y := randDense(r, 200_000, 1)
	for b.Loop() {
		_ = Factor(a, y)
	}
}
