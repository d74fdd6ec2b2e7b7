// Package static fits static response models to cycle-level process data:
// one row per moulded part, machine settings (inputs) → quality figures
// (outputs). Two model families are offered, a ridge-regularised polynomial
// response surface and a Gaussian process, and the choice between them and
// of their complexity is made by k-fold cross-validation on the training
// rows only.
//
//	m, sel, err := static.Fit(X, Y, static.DefaultOptions())
//	yhat := m.Predict(Xnew)
//	res, err := static.CrossValidate(X, Y, static.ModFolds(len(X), 5), opt)
//
// # Standardisation
//
// Fit standardises every input and every output with the training rows'
// mean and population standard deviation (divisor n); a constant column
// gets std 1. Polynomial terms are built from the standardised inputs z, the
// ridge penalty and all coefficients and GP hyperparameters are in these
// standardised units, and Model keeps the statistics (InMean, InStd,
// OutMean, OutStd) so Predict works in original units. For plain least
// squares (λ = 0) standardising changes nothing in the predictions; for
// ridge and the GP it makes λ and the length scales comparable across
// inputs.
//
// # Term generation
//
// [Terms] lists exponent vectors, intercept first, then graded by total
// degree and lexicographically within a degree (d = 2, degree 2: 1, z1, z2,
// z1², z1·z2, z2²). With Options.Interactions every monomial of total degree
// ≤ D is used, C(d+D, D) terms (6 inputs: 7, 28, 84 terms for D = 1, 2, 3);
// without it only the pure powers z_i^k, k ≤ D. Model.Coef[o][t] multiplies
// term Terms[t] for output o (one coefficient vector per output; the
// standardised-output prediction is Σ_t Coef[o][t]·Π_i z_i^Terms[t][i]).
//
// # Ridge polynomial
//
// The penalty λ applies to every term but the intercept:
// min ‖y − c0 − Φβ‖² + λ‖β‖². This is solved exactly by centring the term
// columns (c0 = −mean(Φ)·β) and taking the thin SVD of the centred design,
// Φc = USVᵀ, β = V·diag(s/(s²+λ))·Uᵀy: the same solution as Cholesky on the
// normal equations (ΦcᵀΦc + λI)β = Φcᵀy, but numerically safer and one
// factorisation serves the whole λ grid. With at least as many rows as
// terms the SVD is taken of the small q×q factor R of the shared
// least-squares solver's tall-skinny QR of [Φc y] (internal/ident/lsq):
// Φc = Q·R, so the singular values and V are R's and Uᵀy = U_Rᵀ·(Qᵀy),
// without the n×q U. λ = 0 is ordinary least squares
// (minimum-norm, singular values below s_max·max(n,q)·ε dropped, when the
// design is rank deficient).
//
// # Gaussian process
//
// With Options.GP a GP candidate is also scored: zero mean on the
// standardised output, kernel σf²·exp(−½Σ_k (z_k−z'_k)²/ℓ_k²) + σn²·δ with
// one length scale per input (ARD). Each output gets its own
// hyperparameters, found by maximising the log marginal likelihood with
// gonum/optimize L-BFGS (analytic gradient) from three fixed starting points;
// the best optimum is kept, so the fit is deterministic. Soft bounds
// (ℓ ∈ [0.05, 100], σf ∈ [0.01, 30], σn ∈ [1e-4, 3], standardised units)
// keep the kernel matrix well conditioned on noise-free data. The
// prediction is the posterior mean k(z)ᵀ(K + σn²I)⁻¹y, via Cholesky. The GP
// is skipped above Options.GPMaxRows training rows (default 500).
//
// # Selection
//
// Fit splits its rows into Options.Folds inner folds (seeded shuffle, then
// position mod k). For every candidate — each degree × λ and, optionally,
// the GP — each inner fold is predicted by a model fitted, standardisation
// included, on the other inner folds. The score CVMSE is the pooled
// out-of-fold squared error divided by each output's variance (so 1 −
// CVMSE is a pooled CV R²), averaged over outputs; CVSE is its standard
// error over folds. Selection lists every candidate's score.
//
// Among the polynomials the one-standard-error rule picks the lowest degree
// whose best score is within Options.Parsimony (default 1) standard errors
// of the overall best, and within that degree the λ with the lowest score.
// The GP is kept only when its CVMSE beats every polynomial's. The winner
// is refitted on all rows given to Fit. Nothing outside those rows is seen,
// so in CrossValidate each outer fold's selection uses its training rows
// only.
//
// # R² and NRMSE conventions
//
// [Scores] follows sklearn's r2_score(y_true, y_pred): R² = 1 − SSE/SST
// with SST about the mean of the true values; NRMSE = RMSE / std(y_true)
// with the population std, so R² = 1 − NRMSE² on the same rows.
// [CrossValidate] reports both
//
//   - per fold (FoldResult, averaged in MeanR2 / MeanNRMSE): SST and std about
//     the fold's own true values;
//   - pooled (PooledR2 / PooledNRMSE / PooledRMSE): all out-of-fold
//     predictions together, SST and std about all tested rows.
//
// The in-house Lego baselines (static_baselines.json) are pooled figures:
// their cv5_R2 equals 1 − cv5_NRMSE² and cv5_NRMSE is RMSE over the std of
// the whole part. TestLegoBaselines reproduces them to the fourth decimal
// with fixed degree 1 or 2 and λ = 0.
//
// Caveat on the published Lego figure (Tercan et al., INDIN 2019; mean R²
// 0.959 over five seeds): their script calls r2_score(prediction, truth),
// arguments swapped, so SST is taken about the predictions' mean and
// normalised by the predictions' variance, not the truth's. It is also a
// single random train/validation/test split of a transfer-learned network,
// not 5-fold CV. It is comparable to our R² only approximately.
//
// # Options defaults
//
// Zero numeric fields of Options take their defaults (degrees {1,2,3}; λ
// grid 10^(−8+k/2), k = 0..20; 5 folds; Parsimony 1; GPMaxRows 500). The
// booleans Interactions and GP are used as given, so the documented
// defaults (both true) come from [DefaultOptions]; a bare Options{} fits
// pure-power polynomials without the GP.
package static
