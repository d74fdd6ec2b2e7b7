package lsq

// The two kernels of foldPanel: dot products of a reflector with two
// columns, and the two column updates. Each has a plain-Go form and, on
// amd64 with AVX2, an assembly form (kernel_amd64.s) that computes the
// same bits: the dot products keep eight partial sums per column (term i
// goes to sum i mod 8, in increasing i — one 4-wide register pair), every
// product and sum rounded separately (no fused multiply-add, also not in
// the Go form: the explicit float64 conversions forbid fusion), and the
// sums and the tail are added up here in Go in one fixed order. So the
// solver's result does not depend on the CPU either.

// dot2 returns (v·a, v·b); len(a), len(b) ≥ len(v).
func dot2(v, a, b []float64) (float64, float64) {
	var la, lb [8]float64
	n8 := len(v) &^ 7
	if n8 > 0 {
		if useAVX2 {
			dot2AVX2(v[:n8], a[:n8], b[:n8], &la, &lb)
		} else {
			dot2Go(v[:n8], a[:n8], b[:n8], &la, &lb)
		}
	}
	sa := ((la[0] + la[4]) + (la[1] + la[5])) + ((la[2] + la[6]) + (la[3] + la[7]))
	sb := ((lb[0] + lb[4]) + (lb[1] + lb[5])) + ((lb[2] + lb[6]) + (lb[3] + lb[7]))
	for i := n8; i < len(v); i++ {
		sa += float64(v[i] * a[i])
		sb += float64(v[i] * b[i])
	}
	return sa, sb
}

// dot2Go adds v[i]·a[i] to la[i mod 8] and v[i]·b[i] to lb[i mod 8];
// len(v) is a multiple of 8. One pass per column keeps the eight sums in
// registers.
func dot2Go(v, a, b []float64, la, lb *[8]float64) {
	dot8(v, a, la)
	dot8(v, b, lb)
}

// dot8 adds v[i]·a[i] to l[i mod 8]; len(v) is a multiple of 8.
func dot8(v, a []float64, l *[8]float64) {
	a = a[:len(v)]
	s0, s1, s2, s3, s4, s5, s6, s7 := l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7]
	for i := 0; i+7 < len(v); i += 8 {
		vv := v[i : i+8 : i+8]
		aa := a[i : i+8 : i+8]
		s0 += float64(vv[0] * aa[0])
		s1 += float64(vv[1] * aa[1])
		s2 += float64(vv[2] * aa[2])
		s3 += float64(vv[3] * aa[3])
		s4 += float64(vv[4] * aa[4])
		s5 += float64(vv[5] * aa[5])
		s6 += float64(vv[6] * aa[6])
		s7 += float64(vv[7] * aa[7])
	}
	*l = [8]float64{s0, s1, s2, s3, s4, s5, s6, s7}
}

// axpy2 does a −= sa·v, b −= sb·v; len(a), len(b) ≥ len(v).
func axpy2(v, a, b []float64, sa, sb float64) {
	n4 := len(v) &^ 3
	if useAVX2 && n4 > 0 {
		axpy2AVX2(v[:n4], a[:n4], b[:n4], sa, sb)
	} else {
		n4 = 0
	}
	a = a[:len(v)]
	b = b[:len(v)]
	for i := n4; i < len(v); i++ {
		a[i] -= float64(sa * v[i])
		b[i] -= float64(sb * v[i])
	}
}

// axpy1 does a −= s·v.
func axpy1(v, a []float64, s float64) {
	a = a[:len(v)]
	for i, vi := range v {
		a[i] -= float64(s * vi)
	}
}
