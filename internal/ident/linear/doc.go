// Package linear identifies linear dynamic models from sampled input/output
// data: MIMO ARX models by (ridge) least squares, and discrete-time
// state-space models by subspace identification (PO-MOESP) with stability
// enforcement, initial-state estimation and optional prediction-error
// (simulation-error) refinement. Everything runs on plain float64 data and
// gonum; every algorithm is deterministic (no random numbers are drawn).
//
// # Conventions
//
// Signals are [][]float64 with one row per sample: y is [T][NY], u is
// [T][NU]. Fit functions normalise the data with statistics of the training
// data only (Scaling: Standardize by default, CenterOnly, NoScaling) and keep
// the statistics in the model, so Predict/Simulate take and return original
// units. Metrics (RMSE, NRMSE = RMSE/std(y_true), population std) are per
// output over samples k ≥ start, the start being the number of measured
// samples that were used for initialisation.
//
// # ARX
//
//	y(k) = Σ_{i=1..NA} A_i y(k−i) + Σ_{j=NK..NK+NB−1} B_j u(k−j) + c
//
// NK = 0 gives direct feed-through. ARXOrders.NKs and NBs give per-input
// delays and orders (input a enters at lags nk_a … nk_a+nb_a−1; equal
// lists are the scalar orders, same regressor layout), and EstimateDelays
// estimates one delay per input by an ARX sweep. The regression uses the
// rows k = MaxLag … T−1, MaxLag = max(NA, nk_a+nb_a−1). For the full MIMO structure
// all outputs share one regressor matrix Φ and are solved together
// (one QR, NY right-hand sides); with Diag each output has its own regressor
// (own past only, all inputs) and its own QR.
//
// Least squares uses a Householder QR rather than the normal equations,
// which square the condition number: the shared solver internal/ident/lsq,
// a tall-skinny QR over row blocks on all cores that forms only R of
// [Φ Y] (see its package documentation); the ARX fits hand it the
// regression rows a panel at a time (lsq.SolveRows), so Φ is never stored
// as a matrix. The QR solution is replaced by a
// truncated-SVD minimum-norm solution when cond(R) > 1e12 (rank-deficient
// regressors). The ridge penalty
// λ Σ θ² on the non-intercept parameters (in scaled coordinates, summed not
// averaged data term) is solved exactly as an augmented least-squares
// problem [Φ; √λ·I] θ ≈ [Y; 0], so the same QR path is used. On a
// 200 000 × 41 problem BenchmarkLstsq compares the solver with a bare
// gonum mat.QR Factorize + SolveTo of the same matrix, and BenchmarkARXFit
// gives the whole fit (normalisation, building Φ, least squares).
//
// PredictOneStep uses measured past outputs; its first MaxLag rows are NaN.
// Simulate (free run) returns the given initial measured outputs unchanged
// and then feeds back its own predictions; values before time 0 are taken as
// the training means. Coefficients converts θ back to A_i, B_j, c in the
// original units.
//
// # Subspace identification: PO-MOESP
//
// FitSubspace identifies x(k+1) = A x(k) + B ũ(k), ỹ(k) = C x(k) + D ũ(k)
// (ũ, ỹ scaled; D = 0 unless Feedthrough) in these steps:
//
//  1. Block-Hankel matrices with i = BlockRows block rows of past and future
//     inputs and outputs, Up, Uf, Yp, Yf (j = T−2i+1 columns). Unless
//     NoOffset, the mean of every Hankel row is removed (a constant
//     instrument), so that an offset between the data means and the linear
//     operating point does not appear as a spurious integrating state.
//  2. LQ factorisation of [Uf; Up; Yp; Yf] (computed as a QR of its
//     transpose with LAPACK Dgeqrf), then the SVD of the block L32 (future
//     outputs against the past instruments, with the future inputs projected
//     out): this is past-output MOESP (Verhaegen 1994), which is consistent
//     under coloured output noise.
//  3. Order: Order > 0 is used as given; Order = 0 takes the largest gap
//     log σ_n − log σ_{n+1} for n ≤ MaxOrder. The more reliable choice is
//     SelectStateSpace, which scores a range of orders by validation free-run
//     error (all orders share one LQ/SVD).
//  4. Γ = U_n S_n^{1/2}; C is its first block row and A solves the shift
//     equation Γ↑ A = Γ↓ in the least-squares sense.
//  5. Stability: if some |λ(A)| ≥ StabilityRadius (default 0.9999), the
//     offending eigenvalues are reflected into the unit disc (λ → λ/|λ|²,
//     keeping their frequency) and clipped to the radius, and A is rebuilt
//     as Re(V Λ' V⁻¹) from its eigenvectors; for an ill-conditioned
//     eigenvector matrix (cond > 1e8, near-defective A) the whole matrix is
//     scaled to the radius instead. Stabilized reports whether this happened.
//  6. With A and C fixed, the simulated output is linear in B, D, the
//     training initial state x0 and the output offset e, so they are
//     estimated by one least-squares problem over the whole record. This is
//     the output-error-optimal B, D for the given A, C (better for free-run
//     use than the regression estimates of N4SID) and is also the refit
//     after stabilisation.
//  7. Optional (Refine) prediction-error refinement: Levenberg–Marquardt
//     (internal/ident/lm, the segments as its blocks) on the training
//     simulation error over all entries of A, B, C, D, x0, e.
//     The Jacobian is exact, from forward sensitivity recursions
//     (∂x(k+1) = A ∂x(k) + E_ij w(k), all i at once as an n×n matrix
//     recursion). The full parametrisation is redundant (similarity
//     transforms); the Marquardt term μ·diag(JᵀJ) regularises it. Trial
//     steps that would move an eigenvalue of A outside the stability radius
//     are rejected like steps that increase the cost, so the result stays
//     stable. At most RefineIters iterations; it stops when no step improves
//     or the relative improvement falls below 1e-9.
//
// The output offset e is folded into YMean after the fit, so the model has
// exactly the form above with YMean as output operating point.
//
// # Initial state
//
// EstimateX0 fits x0 to the first n measured samples (the window output is
// C A^k x0 plus the zero-state response). Because the benchmark protocols
// allow only 4–5 samples, the plain least-squares problem is under-determined
// for n·NY < order and badly conditioned for slow (near-integrating) modes.
// For a fitted model the estimate is therefore the MAP estimate under the
// Gaussian prior x0 ~ N(XMean, XCov) taken from the simulated training
// states, with the training simulation error variance as output noise; with
// enough informative samples it coincides with least squares. EstimateX0LS
// gives the plain (minimum-norm) least-squares estimate.
//
// # Selection
//
// SelectARX fits a grid of orders × ridge parameters on training data and
// ranks them by mean validation NRMSE of the free run ("simulation") or of
// one-step prediction ("one_step"), all over the same samples.
// SelectStateSpace does the same over state orders (free run with x0 from
// the first NInit validation samples). Both return models fitted on the
// training part only; refitting the chosen structure on all estimation data
// is left to the caller. SelectARXCV and SelectStateSpaceCV need no
// validation record: they score by K-fold block cross-validation of the
// estimation segments and return the winner refitted on all of them (see
// cv.go). The state-space selections skip the orders the data cannot
// support (Score.Skipped) and fail only when none is left.
//
// # Results on the shared benchmarks (see the tests)
//
// Cascaded tanks, test = validation record, RMSE in V:
//   - ARX u(k..k−8), y(k−1..k−8), train 0..699, z-scored, no intercept:
//     one-step 0.0532, free run 0.7085 (published 0.0530 / 0.685; the
//     in-house numpy reproduction gives 0.0532 / 0.7085). With an intercept
//     the free run is 0.682; trained on all 1024 samples 0.0523 / 0.609.
//   - State space (PO-MOESP i = 20 + LM refinement), order 2 chosen by
//     free-run validation on 700..1023, refitted on all 1024 estimation
//     samples: free-run RMSE 0.591 (n_init 4 or 5), NRMSE 0.28. Without
//     refinement 0.597. The order-2 model trained on 0..699 only gives 0.694.
//
// DaISy winding, est rows 0..1665, val rows 1666..2499, mean NRMSE:
//   - ARX diag na=nb=4 nk=0 (centred, no intercept): one-step 0.1915,
//     free run 0.2479 (in-house 0.248); all in-house ARX rows reproduce.
//   - State space with D (order and block rows chosen by free-run validation
//     inside the estimation data, rows 1111..1665; n=5, i=5), refitted on all
//     estimation rows, LM-refined: free run 0.2417 (y1 0.164, y2 0.319);
//     0.254 without refinement.
package linear
