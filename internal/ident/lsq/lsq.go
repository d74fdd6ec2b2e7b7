package lsq

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// CondLimit is the condition number of R above which the QR solution is
// replaced by a truncated-SVD (minimum-norm) solution.
const CondLimit = 1e12

// SVDRankTol is the relative singular-value threshold of the SVD fallback:
// singular values below SVDRankTol·σ_max are discarded.
const SVDRankTol = 1e-12

const (
	// panelRows is the number of rows copied into one column-major panel
	// and folded into a running R at a time: 43 KB for the 42 columns of
	// the ARX benchmark, about the size of an L1 data cache; 128 was the
	// fastest of 32, 64, 128 and 256 in BenchmarkFactor.
	panelRows = 128
	// chunkRows is the number of rows one worker reduces to its own R
	// before the R factors are combined. The partition depends on the row
	// count only, never on the number of cores, so the result is the same
	// bit for bit on any number of cores (and, see kernel.go, on any CPU).
	chunkRows = 4096
)

// Solve returns X (c×k) minimising ‖A X − B‖_F for A (r×c) and B (r×k).
//
// For r ≥ c it computes the triangular factor R of the Householder QR of
// [A B] by a tall-skinny QR (see the package documentation), checks the
// condition number of R's leading c×c block (the 1-norm estimate gonum's
// mat.QR uses) and back-substitutes. For r < c, or when cond(R) > CondLimit
// (numerically rank-deficient A), it returns the truncated-SVD minimum-norm
// solution of the original problem instead, as SolveSVD.
func Solve(a, b *mat.Dense) (*mat.Dense, error) {
	r, c := a.Dims()
	br, k := b.Dims()
	if br != r {
		return nil, errors.New("lsq: A and B have different row counts")
	}
	if r < c || c == 0 {
		return SolveSVD(a, b)
	}
	x, ok := solveR(Factor(a, b), c, k)
	if !ok {
		return SolveSVD(a, b)
	}
	return x, nil
}

// Rows is a least-squares problem [A B] (A N×C, B N×K) given by its rows
// instead of as matrices, so that a caller that computes the rows (the ARX
// regressors) never stores the N×C matrix: SolveRows asks for one panel of
// rows at a time.
type Rows struct {
	N, C, K int
	// Fill writes rows i0 … i0+n−1 of [A B] into dst, row-major with C+K
	// values a row (n ≤ 128). It is called from several goroutines at once
	// for disjoint row ranges, and must write every value.
	Fill func(dst []float64, i0, n int)
}

// SolveRows is Solve for a problem given by its rows; the result is
// bit-for-bit Solve's on the same matrices. Only the SVD fallback
// (N < C or cond(R) > CondLimit) builds A and B.
func SolveRows(p Rows) (*mat.Dense, error) {
	if p.N <= 0 || p.C <= 0 || p.K <= 0 || p.Fill == nil {
		return nil, errors.New("lsq: a row problem needs rows, columns, right-hand sides and a Fill")
	}
	if p.N < p.C {
		return SolveSVD(p.dense())
	}
	w := p.C + p.K
	R := factor(p.N, w, func(panel, scratch []float64, i0, n int) {
		rows := scratch[:n*w]
		p.Fill(rows, i0, n)
		for i := 0; i < n; i++ {
			for j, v := range rows[i*w : (i+1)*w] {
				panel[j*n+i] = v
			}
		}
	})
	x, ok := solveR(R, p.C, p.K)
	if !ok {
		return SolveSVD(p.dense())
	}
	return x, nil
}

// dense builds A and B of p.
func (p Rows) dense() (a, b *mat.Dense) {
	w := p.C + p.K
	a = mat.NewDense(p.N, p.C, nil)
	b = mat.NewDense(p.N, p.K, nil)
	buf := make([]float64, panelRows*w)
	for i0 := 0; i0 < p.N; i0 += panelRows {
		n := min(panelRows, p.N-i0)
		p.Fill(buf[:n*w], i0, n)
		for i := 0; i < n; i++ {
			row := buf[i*w : (i+1)*w]
			a.SetRow(i0+i, row[:p.C])
			b.SetRow(i0+i, row[p.C:])
		}
	}
	return a, b
}

// solveR back-substitutes R11 X = (QᵀB)₁ from R of [A B] (w = c+k,
// row-major); ok is false when R11 is numerically singular (condition
// estimate above CondLimit, a zero pivot or a NaN).
func solveR(R []float64, c, k int) (*mat.Dense, bool) {
	w := c + k
	// leading c×c block of R, stride w
	rt := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: c, Stride: w, Data: R}
	work := make([]float64, 3*c)
	iwork := make([]int, c)
	rc := lapack64.Trcon(mat.CondNorm, rt, work, iwork)
	if cond := 1 / rc; !(cond <= CondLimit) {
		return nil, false
	}
	x := mat.NewDense(c, k, nil)
	xd := x.RawMatrix()
	for j := 0; j < k; j++ {
		// back substitution R11 x = (Qᵀ B)_j, the top c rows of R's column c+j
		for i := c - 1; i >= 0; i-- {
			s := R[i*w+c+j]
			row := R[i*w : i*w+c]
			for l := i + 1; l < c; l++ {
				s -= float64(row[l] * xd.Data[l*xd.Stride+j])
			}
			d := row[i]
			if d == 0 || math.IsNaN(s) {
				return nil, false
			}
			xd.Data[i*xd.Stride+j] = s / d
		}
	}
	return x, true
}

// SolveSVD returns the truncated-SVD minimum-norm least-squares solution:
// singular values below SVDRankTol·σ_max are discarded; a zero matrix gives
// X = 0.
func SolveSVD(a, b *mat.Dense) (*mat.Dense, error) {
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDThin) {
		return nil, errors.New("lsq: SVD failed in least squares")
	}
	rank := svd.Rank(SVDRankTol)
	if rank == 0 {
		_, c := a.Dims()
		_, bc := b.Dims()
		return mat.NewDense(c, bc, nil), nil
	}
	var x mat.Dense
	svd.SolveTo(&x, b, rank)
	return &x, nil
}

// Factor returns the w×w upper-triangular factor R (row-major, w = c+k) of
// the Householder QR of [A B] for A r×c and B r×k (b may be nil: k = 0),
// r ≥ 1. Rows of R may differ in sign from LAPACK's Dgeqrf.
//
// The rows are cut into chunks of chunkRows; every chunk is reduced to its
// own R by folding panels of panelRows rows into it (Householder
// reflections of the stacked [R; panel], which touch one row of R and the
// panel only), chunks in parallel on up to runtime.GOMAXPROCS(0) cores;
// then the chunk factors are folded into the first one in chunk order.
func Factor(a, b *mat.Dense) []float64 {
	r, c := a.Dims()
	k := 0
	if b != nil {
		_, k = b.Dims()
	}
	return factor(r, c+k, func(panel, _ []float64, p, n int) {
		loadPanel(panel, a, b, p, n, c, k)
	})
}

// factor is Factor over r rows of w columns that load writes, column-major,
// into a panel (rows p … p+n−1; scratch is a panel-sized buffer of the
// calling goroutine).
func factor(r, w int, load func(panel, scratch []float64, p, n int)) []float64 {
	nch := (r + chunkRows - 1) / chunkRows
	if nch < 1 {
		nch = 1
	}
	rs := make([][]float64, nch)
	reduce := func(ch int, panel, scratch []float64) {
		R := make([]float64, w*w)
		lo, hi := ch*chunkRows, min(r, (ch+1)*chunkRows)
		for p := lo; p < hi; p += panelRows {
			n := min(panelRows, hi-p)
			load(panel, scratch, p, n)
			foldPanel(R, w, panel, n)
		}
		rs[ch] = R
	}
	workers := min(runtime.GOMAXPROCS(0), nch)
	if workers <= 1 {
		panel, scratch := make([]float64, w*panelRows), make([]float64, w*panelRows)
		for ch := 0; ch < nch; ch++ {
			reduce(ch, panel, scratch)
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				panel, scratch := make([]float64, w*panelRows), make([]float64, w*panelRows)
				for {
					ch := int(next.Add(1) - 1)
					if ch >= nch {
						return
					}
					reduce(ch, panel, scratch)
				}
			})
		}
		wg.Wait()
	}
	R := rs[0]
	if nch > 1 {
		panel := make([]float64, w*w)
		for ch := 1; ch < nch; ch++ {
			// the rows of chunk ch's R, column-major, as one more panel
			Rc := rs[ch]
			for i := 0; i < w; i++ {
				for j := 0; j < w; j++ {
					panel[j*w+i] = Rc[i*w+j]
				}
			}
			foldPanel(R, w, panel, w)
		}
	}
	return R
}

// loadPanel copies rows p … p+n−1 of [A B] column-major into panel
// (column j at panel[j·n : (j+1)·n]).
func loadPanel(panel []float64, a, b *mat.Dense, p, n, c, k int) {
	ad := a.RawMatrix()
	for i := 0; i < n; i++ {
		row := ad.Data[(p+i)*ad.Stride : (p+i)*ad.Stride+c]
		for j, v := range row {
			panel[j*n+i] = v
		}
	}
	if k == 0 {
		return
	}
	bd := b.RawMatrix()
	for i := 0; i < n; i++ {
		row := bd.Data[(p+i)*bd.Stride : (p+i)*bd.Stride+k]
		for j, v := range row {
			panel[(c+j)*n+i] = v
		}
	}
}

// foldPanel replaces the w×w upper-triangular R (row-major) by the R factor
// of the stacked [R; P], P the n×w column-major panel (overwritten).
// Column j's reflector acts on row j of R and on the n panel rows only: the
// rows of R below j are zero in column j.
func foldPanel(R []float64, w int, panel []float64, n int) {
	for j := 0; j < w; j++ {
		x := panel[j*n : (j+1)*n]
		alpha := R[j*w+j]
		xnorm := norm2(x)
		if xnorm == 0 {
			continue // H = I
		}
		beta := -math.Copysign(hypot(alpha, xnorm), alpha)
		tau := (beta - alpha) / beta
		scale := 1 / (alpha - beta)
		for i := range x {
			x[i] *= scale
		}
		R[j*w+j] = beta
		// apply H = I − τ [1; v][1; v]ᵀ to the remaining columns
		rrow := R[j*w : (j+1)*w]
		cc := j + 1
		for ; cc+1 < w; cc += 2 {
			c0 := panel[cc*n : (cc+1)*n]
			c1 := panel[(cc+1)*n : (cc+2)*n]
			s0, s1 := dot2(x, c0, c1)
			s0 = tau * (rrow[cc] + s0)
			s1 = tau * (rrow[cc+1] + s1)
			rrow[cc] -= s0
			rrow[cc+1] -= s1
			axpy2(x, c0, c1, s0, s1)
		}
		if cc < w {
			c0 := panel[cc*n : (cc+1)*n]
			s0, _ := dot2(x, c0, c0)
			s0 = tau * (rrow[cc] + s0)
			rrow[cc] -= s0
			axpy1(x, c0, s0)
		}
	}
}

// norm2 is ‖x‖₂, with the scaled computation when the plain sum of squares
// could have overflowed or underflowed.
func norm2(x []float64) float64 {
	s0, s1, s2, s3 := 0.0, 0.0, 0.0, 0.0
	i := 0
	for ; i+3 < len(x); i += 4 {
		s0 += float64(x[i] * x[i])
		s1 += float64(x[i+1] * x[i+1])
		s2 += float64(x[i+2] * x[i+2])
		s3 += float64(x[i+3] * x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i] * x[i])
	}
	s := (s0 + s1) + (s2 + s3)
	if s > 1e-280 && s < 1e280 {
		return math.Sqrt(s)
	}
	// zero, tiny (squares may have underflowed), huge, Inf or NaN: the
	// scaled norm decides
	return blas64.Nrm2(blas64.Vector{N: len(x), Inc: 1, Data: x})
}

// hypot is √(p² + q²) for finite p and q ≥ 0 without overflow, in plain
// Go with every operation rounded on its own (math.Hypot has an assembly
// form on amd64), so that R has the same bits on every architecture.
func hypot(p, q float64) float64 {
	p = math.Abs(p)
	if p < q {
		p, q = q, p
	}
	if p == 0 || math.IsInf(p, 0) || math.IsNaN(q) {
		return p + q
	}
	q /= p
	return p * math.Sqrt(1+float64(q*q))
}
