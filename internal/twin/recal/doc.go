// Package recal is the twin's recalibration scheduler: it decides from
// signals it computes itself whether a model needs recalibrating, queues
// at most one request per scene, line, recipe and policy version, and a
// worker step rebuilds the dataset with the new runs and trains a new
// candidate with the same trainer and params. Nothing it produces is
// promoted: the new model is a candidate a person reviews (shadow evidence
// and a passing twin gate are required for production, see registry).
//
// # Policy
//
// DefaultPolicy is the seed's twin-calibration-v1 (minNewRuns 3,
// minNewRows 500, cooldownSec 3600, maxConcurrentRuns 1, shadowRequired,
// approvalRequired) with the upstream thresholds made explicit:
// DriftScoreMax 0.2 and ErrorScoreMax 0.15. A request is triggered when
//
//	newRuns ≥ MinNewRuns  or  newRows ≥ MinNewRows  or
//	driftScore > DriftScoreMax  or  errorScore > ErrorScoreMax
//
// (an undefined score never triggers). Otherwise Request answers
// TRIGGER_THRESHOLD_NOT_REACHED and writes nothing.
//
// # Signals (ComputeSignals), all from the store
//
//	newRuns     ended runs of the model's line/product/recipe not in its
//	            dataset (neither used nor excluded by its build)
//	newRows     Σ over those runs of the grid steps they span at the
//	            dataset's beat: floor((ended − started)/beatMs) + 1
//	driftScore  the share of the recent windows (the windows of the most
//	            recent RecentRuns shadow runs) that the model's training
//	            envelope (eval.OOD, fitted at evaluation on the train
//	            windows, 99.5 % quantile) rejects. In distribution about
//	            0.5 % are rejected; 0.2 means one window in five lies
//	            outside everything the model was trained on.
//	errorScore  relative degradation of the recent prediction error: for
//	            each target the window RMSE pooled over those runs divided
//	            by the model's test RMSE (same windows, same horizon, from
//	            evaluation), averaged over targets, − 1, floored at 0
//	            (0.15: errors 15 % larger than measured at evaluation). A
//	            relative score, because an absolute NRMSE level depends on
//	            the target's noise (a noisy target would trigger forever, a
//	            smooth one never) and on how many runs share the std.
//
//	disturbance where a scene declares unmeasured disturbances (scene
//	            schema 2, SignalOptions.Shadow.Disturbances): the shadow
//	            predictions are disturbance-corrected (the error and drift
//	            scores are the corrected ones) and the estimated drift of
//	            the most recent shadow run is reported; the trigger
//	            "disturbance" fires when an estimate exceeds
//	            DisturbanceScoreMax (2) × the target's test RMSE.
//
// Shadow evidence is (re)computed by ComputeSignals through
// shadow.Collect, so the error and drift scores always describe the runs
// that ended after the model was made; without such runs both are
// undefined (null).
//
// # Dedup, cooldown and concurrency
//
// The dedup key is scene:line:recipe:policyVersion ("*" for no scene). A
// request is refused (ACTIVE_OR_COOLDOWN) while one with the same key is
// queued, running or cooling down; a partial unique index on
// twin_calibrations(dedup_key) refuses a second active row even under
// races between processes. Upstream set cooldown_until = created + 1 h at
// creation, so a long run had no cooldown left when it finished; here the
// cooldown starts at COMPLETION: cooldown_until = completed_at +
// cooldownSec, and the key is free after that. A failed request frees its
// key at once (nothing was produced). At most MaxConcurrentRuns requests
// run at a time: RunNext claims nothing while that many are running (the
// count and the claim are one transaction).
//
// # Worker
//
// RunNext first settles running requests whose job has ended (done →
// cooldown with the new model's id; failed or cancelled → failed), then
// claims the oldest queued request, rebuilds the dataset from the model's
// dataset spec with the new runs (RebuildSpec, dataset.Build: a spec that
// lists runIds gets the new runs appended and an upper time bound toMs is
// lifted; the split is described below; the build is deterministic), and
// submits a job with the
// model's job's trainer, params and seed (parent = that job). With
// RunOptions.RunJob the job runs in this process and the request is
// settled at once; otherwise the job system's workers run it and a later
// RunNext settles the request. Each step is audited (calibration.request,
// .start, .submit, .complete, .fail) in the same transaction as the change.
//
// # The rebuilt split
//
// The old runs keep the split they had and the new runs go to train: a
// by_run spec is rebuilt as an explicit one from the dataset's manifest
// (every old run where the manifest has it), an explicit one gets the
// new runs appended to trainRunIds, a time_blocks one (every run split
// into blocks of its own) is unchanged. Re-drawing the by_run split over
// old and new runs, as the rebuild did before, reshuffled it: on the
// benefit study's wearing line (24 history runs + 8 study runs) five of
// the twelve former train runs left train, and four former val runs and
// one former train run became test runs, so the new model was measured
// (G1) and its gate trials replayed (G6) on other runs than the model it
// replaces — mostly history runs with extreme setpoints. Keeping the
// split makes the two models' test figures and gate trials compare on
// the same runs; the regime the new runs bring (the drift) is checked on
// the runs after the new model, its shadow evidence (twin-v3's G8).
// Limits: the val split (the conformal calibration) holds no new run, so
// the band is calibrated on the old regime and only the shadow coverage
// checks it on the new one; a static (by_row) dataset's rows are re-drawn
// as before. The model gates of the new model are measured on the old
// regime only, and a model without the drift's cause as an input can lose
// accuracy there by training on the drifted runs: on TestDisturbanceSignal's
// line (12 runs, then 3 runs 60 runs older) with simulator seed 4 the
// retrained model's test one-step NRMSE on the kept test runs is 0.142
// against the replaced model's 0.058 (G1 fails), with seed 5 its test
// free run diverges in one segment (G7a); with seed 3 it improves (test
// NRMSE 0.0613 against 0.0859) and keeps every check the replaced model
// passes, which the test asserts. With the old re-drawn split seed 3
// passed every check, seed 4 passed G1 (0.084), G3 and G7a, and seed 5
// failed G1 (0.205) and G7a, each on another test split than the replaced
// model's (measured 2026-12-05).
// Tried instead: the old runs kept and the new runs split among
// themselves by the spec's ratios and seed. On the benefit study's line
// the new model passed twin-v3 as well (G1 0.0889, 5 of 17 visited points
// without a recommendation), but on TestDisturbanceSignal's line (3 new
// runs: one each to train, val and test) it failed G1 with seeds 3, 4
// and 5 (and G3, G6 or G7a): one worn run to train on is too few. Training
// on every new run is the rule kept.
package recal
