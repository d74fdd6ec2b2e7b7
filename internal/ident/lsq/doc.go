// Package lsq is the dense linear least-squares solver shared by every
// identification trainer that solves a least-squares problem (through
// internal/ident/linear: ARX and ridge ARX, the subspace shift equation and
// B, D, x0 refit, the initial-state estimates, and so the OE and ARMAX
// starts of internal/ident/polynomial and the linear trainers) and the
// ridge-polynomial path of internal/ident/static (Factor, then the SVD of
// the small R instead of the tall design).
//
// # Algorithm
//
// Solve computes only the triangular factor R of the Householder QR of the
// augmented matrix [A B] (A r×c, B r×k, w = c+k columns): its leading c×c
// block is R of A, the block beside it is QᵀB, so X = R11⁻¹ (QᵀB)₁ by back
// substitution and Q is never formed. R comes from a tall-skinny QR
// (TSQR):
//
//   - the rows are cut into chunks of 4096 rows; every chunk is reduced to
//     its own w×w R by folding panels of 128 rows into a running R: the
//     Householder QR of the stacked [R; panel], whose reflector for column
//     j touches only row j of R (the rows below it are zero in column j)
//     and the 128 panel rows. A panel is copied column-major once, so every
//     reflector works on contiguous columns that stay in the L1 cache;
//   - chunks run in parallel on runtime.GOMAXPROCS(0) goroutines;
//   - the chunk factors are then folded, in chunk order, into the first.
//
// Every step is a product of Householder reflections, so the factorisation
// is backward stable like LAPACK's Dgeqrf (the solution agrees with gonum's
// mat.QR to a small multiple of cond(A)·ε, see the tests); the normal
// equations, which would be cheaper, square the condition number and are
// not used. The row partition depends on r only, never on the number of
// cores, and the chunk factors are combined in a fixed order, so the result
// is bit-for-bit the same on 1 or 64 cores.
//
// Rank deficiency is handled as the trainers always did: when the 1-norm
// condition estimate of R11 (LAPACK Dtrcon, the estimate mat.QR.Cond
// gives) exceeds CondLimit = 1e12, or A has fewer rows than columns, the
// problem is solved by the truncated SVD of A (singular values below
// 1e-12·σ_max dropped: the minimum-norm solution), SolveSVD.
//
// # Why a hand-written kernel
//
// gonum's mat.QR (Dgeqrf with a blocked Dlarfb over the whole r×c matrix)
// streams the full matrix through memory for every block of columns and
// uses one core; on the 200 000 × 41 ARX problem (BenchmarkLstsq in
// internal/ident/linear, both in the same run) it takes 6–12× as long as
// Solve. Most of that is cache blocking and the second core. The
// reflector kernels — two dot products of a reflector with two columns, and
// the two column updates (kernel.go) — are also written in AVX2 assembly
// for amd64 (kernel_amd64.s), because BenchmarkFactor (200 000 × 42, one
// core, CPU time per factorisation, interleaved runs) measured 67–73 ms
// with it against 125–132 ms for the earlier two-accumulator Go loop and
// 139–143 ms for the Go form of the same arithmetic; four columns per pass
// in Go measured no faster than two. The flop count is that of Householder
// QR, 2·r·w².
//
// The assembly and the Go form compute the same bits: a dot product keeps
// eight partial sums (term i to sum i mod 8), each product and sum is
// rounded on its own (no fused multiply-add: the Go code converts every
// product with float64(·), which forbids fusion on any architecture), and
// Go adds the partial sums and the tail in one fixed order; the Householder
// scalars use a plain-Go hypot. So R, and the solution on the QR path, are
// the same on amd64 with or without AVX2 and on other architectures
// (checked on amd64 and 386). Not covered: the rare scaled norm of
// tiny or huge columns (gonum's Nrm2) and the SVD fallback (gonum).
package lsq
