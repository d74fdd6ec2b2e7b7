// Package shadow computes a model's shadow evidence: how its predictions
// compare with what the line actually did on runs it has never seen.
//
// Upstream's twin gate wrote its own "shadow evidence"; here the evidence
// is computed by the platform from the store only — the model's artifact,
// its dataset's spec and the runs' samples — and stored one row per model
// and run (twin_shadow). Neither a gate nor a trainer writes it; the
// registry requires at least one row before a twin model goes to
// production.
//
// # Which runs
//
// The ENDED runs of the model's dataset's line, product and recipe that
// ended after the model was created (run.EndedMs > model.CreatedAt) and are
// not part of its dataset (neither used nor excluded by its build), the
// most recent Options.MaxRuns of them (default 20), reported oldest first.
//
// # How a run is prepared
//
// dataset.BuildServeGrid cleans and aligns the whole run with the
// dataset's own spec (unit contracts, state/range/Hampel cleaning, grid
// alignment, interpolation) — the code that built the training data, so
// there is no train/serve skew.
//
// # What is measured (all in model units, per target)
//
// Windows: every position k of the grid (stride Options.WindowStride,
// default the horizon F) whose H history rows and F future rows are all
// finite gives one window, built exactly like a dataset window (x = the H
// history rows of every column, u = the F future controls, y = the F
// future targets) and predicted with the model's PredictBatch:
//
//	WindowRMSE  = sqrt(Σ e² / (W·F))
//	WindowNRMSE = WindowRMSE / population std of the true values (W·F)
//	Coverage    = share of the W·F values with |ŷ − y| ≤ Widths[f][k], the
//	              conformal half-widths the platform calibrated at
//	              evaluation (metrics "conformal"); NaN without them
//	OODRejected = share of the W windows the training envelope (metrics
//	              "ood", eval.OOD.Check) rejects; NaN without one
//
// A static model (a static_response dataset: one row per grid step) is
// scored on rows instead: every grid step with every column measured is
// one "window" with H = F = 1 — its inputs (the manifest's Inputs
// columns) predicted to its targets, against the one calibrated width,
// the OOD envelope judging the input row; it has no free run, and
// declared disturbances are not applied to it.
//
// These are the same definitions as the evaluation's test metrics (eval
// package), so a shadow run's WindowNRMSE compares directly with the
// model's test rollout NRMSE and its Coverage with the calibrated level.
//
// Free run: when the model implements eval.RunSimulator (native linear and
// hybrid models), every NaN-free segment of the run (controls and
// targets) is simulated from its controls only, the model re-initialised
// after each gap from the segment's first Options.NInit (default H)
// measured target rows; steps NInit… of each segment are scored, pooled
// over the segments: FreeRunRMSE, FreeRunNRMSE (definitions as
// eval.FreeRun, eval.FreeRunGrid). Segments not longer than NInit are
// skipped and counted; a diverging simulation is flagged (Diverged). A hybrid model also reports its ensemble's spread
// (SimulateRunSpread): MeanSpread is the mean member standard deviation
// over the scored steps and SpreadRatio = MeanSpread / the last horizon
// step's conformal half-width (1: the members disagree as much as the
// calibrated error).
//
// Unmeasured disturbances: with Options.Disturbances (a scene's declared
// disturbances, by dataset target) each such target's window predictions
// are corrected by the disturbance filter (internal/twin/disturb) causally
// — window i by the estimate from the errors of the windows whose futures
// had ended by its start, carried to each of its rows — and its band
// widened by z·√(the estimate's variance). The target's WindowRMSE,
// WindowNRMSE and Coverage are then the corrected ones; its Drift holds
// the estimate at the run's last window and the raw model's RMSE and
// coverage. Summary.Drift is the most recent scored run's estimate. The
// free-run figures are never corrected.
//
// A run's headline figures (the twin_shadow columns): NRMSE = the mean
// over targets of WindowNRMSE, Coverage = the pooled window coverage,
// Steps = the number of window values' grid steps scored (W·F). A run
// without any complete window is kept with Skipped set and NaN figures.
//
// Summary pools the scored runs: Coverage and OODRejected over all their
// windows, WindowRMSE per target over all their window values, NRMSE as
// the mean of the runs' NRMSE. A run's NRMSE is normalised by that run's
// own spread, which is smaller than the spread of a split that pools
// several runs: per-run NRMSE is larger than the test NRMSE for the same
// errors. Compare errors in RMSE (the recalibration scheduler uses the
// pooled WindowRMSE over the test RMSE) and coverage, not NRMSE levels.
package shadow
