// Package lm is the Levenberg–Marquardt solver of the identification
// packages: nonlinear least squares whose parameters are shared by every
// block of residuals plus parameters of each block of its own,
//
//	minimise  C(s, l_1, …, l_B) = Σ_b ‖r_b(s, l_b)‖²
//
// (or that sum divided by the number of residuals, Settings.Mean). A block
// is typically one measured record (segment): s are the model parameters
// fitted to all records, l_b the record's initial state, and r_b the
// record's simulation error. The state-space refinement of
// internal/ident/linear (A, B, C, D and the output offset shared, x0 per
// segment) and the grey-box calibration of internal/ident/hybrid (physics
// parameters shared, unmeasured initial states per segment) both solve
// this problem with it.
//
// # Steps
//
// Every iteration evaluates the Jacobian at the current point and takes a
// damped Gauss–Newton step δ from
//
//	(JᵀJ + μ D) δ = −Jᵀr,
//
// with D diagonal (Marquardt's scaling by the curvature of every
// parameter, with a floor):
//
//   - ShiftedDiagonal: D_ii = (JᵀJ)_ii + ε·max_j (JᵀJ)_jj
//   - FlooredDiagonal: D_ii = max((JᵀJ)_ii, ε·max_j (JᵀJ)_jj + 10⁻³⁰⁰)
//
// ε is Settings.DiagonalFloor. The floor damps the directions without
// curvature too — redundant parametrisations such as the similarity
// transforms of a fully parametrised state-space model, or parameters the
// residuals do not depend on — so the damped matrix stays positive
// definite and its Cholesky factorisation (gonum's mat.Cholesky) exists.
// The trial point x+δ is mapped by Problem.Project (bounds, if any) and
// evaluated. It is accepted if the residuals are defined there
// (Problem.Residuals returns true), finite, and lower the cost; then μ is
// divided by Settings.Decrease (not below MinDamping) and the iteration
// ends. Otherwise — also when a factorisation fails or its condition
// estimate exceeds Settings.MaxCondition — μ is multiplied by
// Settings.Increase and the step recomputed from the same Jacobian, at
// most MaxTrials times per iteration and until μ exceeds MaxDamping. μ
// starts at InitialDamping and carries over from one iteration to the
// next. Accepted steps therefore never increase the cost.
//
// # Block structure
//
// Block b's residuals depend on s and l_b only, so J has one row block per
// segment with non-zero columns s and l_b, and JᵀJ is an arrow matrix:
//
//	[ Hss  Hs1  …  HsB ]
//	[ H1s  H11         ]
//	[  ⋮         ⋱     ]
//	[ HBs          HBB ]
//
// The solver asks for one block's Jacobian at a time (Problem.Jacobian)
// and accumulates Hss = Σ_b J_bsᵀ J_bs, Hsb = J_bsᵀ J_bl, Hbb = J_blᵀ J_bl
// and the gradient blocks from it, so only one block's Jacobian is held in
// memory. With several blocks every damped system is solved by
// eliminating the local blocks: with the damped diagonal blocks, the Schur
// complement Σ = Hss − Σ_b Hsb Hbb⁻¹ Hbs gives the shared step from
// Σ δs = −(gs − Σ_b Hsb Hbb⁻¹ gb), then δb = −Hbb⁻¹ (gb + Hbs δs). Time and
// memory grow linearly with the number of blocks, where the dense system
// of all parameters would grow with the cube of their total count. With a
// single block the whole system (shared parameters first) is factorised
// at once.
//
// # Stopping
//
// The solve stops (Result.Status) after MaxIterations iterations, when
// SmallSteps accepted steps in a row each lowered the cost by less than
// the share RelTol, when a projected step moves no parameter by more than
// StepTol (relative to max(1, |x_i|); 0 disables the test), when the cost
// is zero, when JᵀJ has a zero diagonal (the residuals do not depend on
// any parameter), or when no trial step of an iteration lowers the cost.
// It also stops when the context is cancelled (checked before every
// iteration; Solve then returns the context's error with the last
// accepted point).
//
// # Non-finite values
//
// A trial point with NaN or ±Inf residuals is rejected like one that
// raises the cost. At the starting point, where there is nothing to fall
// back to, it is an error (ErrNonFinite; ErrInfeasible if Residuals
// rejects the point), and so is a non-finite Jacobian or gradient, which
// stops the solve at the last accepted point. Solve never panics on such
// values.
//
// # Determinism
//
// Every sum runs in a fixed order (blocks in order, residuals in order),
// so the result does not depend on how a Problem's callbacks parallelise
// their own work.
package lm
