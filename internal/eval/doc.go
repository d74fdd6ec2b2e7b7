// Package eval computes a model's metrics on a dataset and applies the
// acceptance gates. The platform computes every number itself from the
// dataset's arrays and the model's predictions; numbers a trainer reports
// are never used.
//
// # Metrics
//
// [Evaluate] predicts every window (row, for static datasets) of the val
// and test splits, in batches of at most [BatchSize] windows, and compares
// the predictions with the dataset's y array. All values are in model units
// (the units the dataset's arrays are in). For a split with W windows,
// horizon F (1 for static datasets) and target k, with e = prediction − true
// and ȳ_k the mean of the target's true values over the split:
//
//	RMSE          = sqrt( Σ e² / (W·F) )           over every window and step
//	OneStepRMSE   = sqrt( Σ_{f=0} e² / W )          the first future step only
//	std           = sqrt( Σ (y − ȳ_k)² / (W·F) )    population std of the true
//	                                                values, every window and step
//	NRMSE         = RMSE / std
//	OneStepNRMSE  = OneStepRMSE / std               (same std, so the two compare)
//	MAE           = Σ |e| / (W·F)
//	R2            = 1 − SSE/SST,  SSE = Σ e²,  SST = Σ (y − ȳ_k)²
//	N             = W·F values
//
// Overlapping windows count every time they cover a step, for both the
// errors and the std, so numerator and denominator weigh steps alike.
// The split's MeanNRMSE, MeanOneStepNRMSE and MeanR2 are plain means over
// its targets.
//
// Degenerate cases: when a target is constant over the split (std = 0) its
// NRMSE and OneStepNRMSE are 0 if the predictions are exact and +Inf
// otherwise, and its R2 is 1 if exact and −Inf otherwise. An empty split
// (no windows) has NaN metrics. ValTestGap = |test − val| / val of the
// splits' MeanNRMSE; it is 0 when both are 0, +Inf when only val is 0, NaN
// when either is not finite.
//
// JSON: the float fields are float64 in Go; a non-finite value (NaN, ±Inf)
// is written as null so encoding never fails, and null reads back as NaN.
// A consumer must treat null as "undefined": it never passes a gate.
//
// A prediction that is not finite, or a batch of the wrong length, fails
// the evaluation with AML_MODEL_INVALID; a model whose horizon differs from
// the dataset's likewise.
//
// TrainUniqueSteps is the number of distinct grid steps covered by the
// train windows (history and future) — not the number of windows, which
// overlap H+F-fold at stride 1. A step is identified by its run (from the
// manifest's split blocks) and its timestamp from the timestamps array;
// train windows outside any listed block are identified by timestamp
// alone. For static datasets it is the number of train rows (each row is
// one grid step). TrainRuns is the number of runs in the train split
// (manifest split.train.runIds).
//
// # Gates
//
// A [Profile] is a versioned, named list of checks; [ProfileFor] maps a
// dataset purpose to its default profile explicitly, and a job may name
// another of the dataset's purpose ([ProfileForJob], the job's
// gateProfile):
//
//	mpc_surrogate   → upstream-mpc-v2
//	quality_predict → upstream-quality-v2
//	static_response → static-v1
//
// upstream-mpc-v2 (version 2):
//
//	G1   test mean one-step NRMSE         ≤ 0.10
//	G2   test mean rollout NRMSE (all F)  ≤ 0.25
//	G3   (test − val) / val of mean NRMSE ≤ 0.20 (one-sided: a better test split passes)
//	G4a  train unique grid steps          ≥ 500
//	G4b  train runs                       ≥ 3
//	G5   model artifact present           = 1
//	G6   |measured − calibrated| coverage ≤ max(0.05, 3σ)
//	     of the conformal interval on test
//	G7a  test free run diverged (1 / 0)   = 0
//	G7b  largest |pole| of the model      < 1 (strict)
//
// G7a and G7b read [Evidence].Stability ([MeasureStability]): the model's
// test free run ([FreeRun] from H measured steps; diverged as defined by
// [DivergenceRangeFactor]) and the poles of its linear dynamics
// ([PoleReporter]: state-space eigenvalues of A, ARX roots of the A
// polynomial). A model that cannot simulate runs or has no poles passes
// the rule as not applicable (value NaN, the detail saying so); missing
// evidence fails both.
//
// G6 reads the interval calibrated on val and its coverage measured on
// test ([Evidence], [GateEvidence]); σ is [CoverageTolerance]'s standard
// error from the calibration and test window counts. A model without a
// measured coverage (calibration skipped, or fewer than 20 test windows)
// fails G6 with the reason. upstream-quality-v2 is upstream-mpc-v2
// without G2. upstream-mpc-v1 and upstream-quality-v1 (version 1) are the
// same with G3 two-sided (|test − val| / val) and without G6, G7a and
// G7b: still published and selectable by name.
//
// static-v1:
//
//	S1   test mean R²                     ≥ 0.8
//	G3   |test − val| / val of mean NRMSE ≤ 0.20
//	G4a  train rows                       ≥ 50
//	G5   model artifact present           = 1
//
// Thresholds are inclusive (a value equal to the threshold passes) except
// G7b's; an undefined (NaN) value fails unless the rule does not apply. A report passes when every check passes.
// A profile never changes once published: new thresholds are a new
// version (a new ID).
package eval
