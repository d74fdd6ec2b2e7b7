package lsq

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels (same results as the Go ones).
var useAVX2 = cpu.X86.HasAVX2

// dot2AVX2 is dot2Go in AVX2; len(v) = len(a) = len(b), a multiple of 8.
//
//go:noescape
func dot2AVX2(v, a, b []float64, la, lb *[8]float64)

// axpy2AVX2 does a −= sa·v, b −= sb·v in AVX2 (a product, then a
// difference, each rounded); len(v) = len(a) = len(b), a multiple of 4.
//
//go:noescape
func axpy2AVX2(v, a, b []float64, sa, sb float64)
