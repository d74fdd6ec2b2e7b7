//go:build !amd64

package lsq

const useAVX2 = false

func dot2AVX2(v, a, b []float64, la, lb *[8]float64) { panic("lsq: no AVX2") }

func axpy2AVX2(v, a, b []float64, sa, sb float64) { panic("lsq: no AVX2") }
