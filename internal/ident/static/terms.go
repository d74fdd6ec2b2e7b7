package static

import "fmt"

// Terms returns the exponent vectors of a polynomial in d inputs up to total
// degree degree. Row t of the result holds the exponent of every input in
// term t; the first term is always the intercept (all exponents 0).
//
// With interactions, every monomial of total degree ≤ degree is generated
// (C(d+degree, degree) terms: 28 for d = 6, degree = 2). Without
// interactions only the pure powers x_i^k, 1 ≤ k ≤ degree, are generated
// (1 + d·degree terms).
//
// Order (graded): by total degree, then, within one degree, lexicographically
// with the first input's exponent highest first, i.e. for d = 2, degree = 2:
// 1, x1, x2, x1², x1·x2, x2².
func Terms(d, degree int, interactions bool) ([][]int, error) {
	if d < 1 {
		return nil, fmt.Errorf("static: %d inputs, need at least 1", d)
	}
	if degree < 0 {
		return nil, fmt.Errorf("static: negative degree %d", degree)
	}
	terms := [][]int{make([]int, d)}
	for k := 1; k <= degree; k++ {
		if !interactions {
			for i := 0; i < d; i++ {
				e := make([]int, d)
				e[i] = k
				terms = append(terms, e)
			}
			continue
		}
		e := make([]int, d)
		var rec func(pos, left int)
		rec = func(pos, left int) {
			if pos == d-1 {
				e[pos] = left
				terms = append(terms, append([]int(nil), e...))
				e[pos] = 0
				return
			}
			for v := left; v >= 0; v-- {
				e[pos] = v
				rec(pos+1, left-v)
			}
			e[pos] = 0
		}
		rec(0, k)
	}
	return terms, nil
}

// maxDegree is the largest exponent appearing in terms.
func maxDegree(terms [][]int) int {
	m := 0
	for _, t := range terms {
		for _, e := range t {
			if e > m {
				m = e
			}
		}
	}
	return m
}

// evalTerms writes the values of terms at the (already standardised) input
// z into dst, which must have len(terms) elements. pw is scratch of at least
// len(z)·(maxDeg+1) elements.
func evalTerms(dst []float64, terms [][]int, z []float64, maxDeg int, pw []float64) {
	d := len(z)
	stride := maxDeg + 1
	for i := 0; i < d; i++ {
		p := 1.0
		pw[i*stride] = 1
		for k := 1; k <= maxDeg; k++ {
			p *= z[i]
			pw[i*stride+k] = p
		}
	}
	for t, e := range terms {
		v := 1.0
		for i, k := range e {
			if k != 0 {
				v *= pw[i*stride+k]
			}
		}
		dst[t] = v
	}
}
