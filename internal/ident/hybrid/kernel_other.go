//go:build !amd64

package hybrid

const useAVX2 = false

func hiddenAVX2(w, x, acc []float64) { panic("hybrid: no AVX2") }

const useTanhAVX2 = false

var tanhConst [21]float64

var tanhVec [25][4]float64

func tanhAVX2(x []float64, c *[25][4]float64) { panic("hybrid: no AVX2") }
