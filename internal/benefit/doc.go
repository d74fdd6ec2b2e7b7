// Package benefit is the benefit study behind `aml demo --benefit`: the
// same simulated injection line (sim.ClosedLine: same seed, disturbances,
// mould wear and sensor noise in every mode) run run after run under four
// controllers, and what each achieved on the part weight.
//
//   - fixed: the recipe's nominal setpoints, no twin.
//   - per_move: the twin (a hybrid model trained on the line's history,
//     with the scene's declared mould-wear disturbance estimated from
//     each snapshot window, internal/twin/engine) recommends a move every
//     cycle, and each move goes the governed hitl_governed path, one
//     approval per move (permove.go): the cycle's snapshot and passing
//     trial are stored and the engineer issues a recommendation
//     certificate on them (signed, audited); after
//     Options.ApprovalDelaySteps (a person does not approve at once) the
//     approver, a person other than the requester, approves it with a
//     signed approval, and it is executed through govern.Execute — the
//     signed approval and audit trail checked, the write guard (channel,
//     frozen scene, maxDeltaPerAction, node and line intervals,
//     maxActionsPerRun against the snapshot's run, expiry), guard.Execute
//     writing to the simulated line with readback, every write in the
//     write history and the audit log. The certified snapshot is then
//     older than the guard's freshness limit, so, as internal/app's
//     execute does, the study re-validates: a fresh snapshot, the
//     certified trajectory re-run from it with the same model, both
//     stored; a re-run that no longer passes or improves is denied
//     REVALIDATION_FAILED. Approvals count the signed approvals, writes
//     the certificates the guard let through, denials are counted by
//     reason (ModeResult.Denials). The requester does not ask for more
//     moves than the run's maxActionsPerRun allows, nor while a
//     certificate waits for its approval; a certificate due before the
//     next run has a full snapshot window waits for it.
//   - envelope: the twin re-optimises every cycle from a fresh snapshot
//     within an operating envelope a person approved once, on the real
//     governed path: the study's store gets the deployment key, the study
//     scene frozen and a bounded_auto channel bounded by the scene's
//     control ranges; the engineer issues an envelope certificate
//     (cert.IssueEnvelope: bounds = the scene's control ranges,
//     MaxMovesPerHour, expiry contract.EnvelopeMaxTTL) and a second person
//     approves it (internal/twin/envelope Issue and Approve, signed and
//     recorded in the hash-chained audit log); each cycle hands the best
//     passing trial to envelope.Cycle, which verifies the envelope and its
//     audit trail, has the write guard check the first step against the
//     envelope, the write policy and the channel, writes it to the
//     simulated line (guard.Execute through a guard.Writer over the
//     line's controls), reads it back and audits it. The supervisor holds
//     instead of asking for what the scene's maxActionsPerRun or the
//     envelope's rate can no longer give (those denials would stop the
//     envelope); a stop (any other denial, a failed gate, OOD, expiry)
//     revokes the envelope and the study has a person approve a new one,
//     counted in approvals and, by reason, in stops. Writes outside the
//     envelope are counted from what the guard let through: each written
//     move's target and read-back against the envelope loaded from its
//     signed trail. The gate the cycle is given is the model's evaluation
//     gate (the training job's GatePassed), not a twin gate: at the
//     study's start no run after the model exists, and twin-v3 needs
//     shadow evidence of such runs. The envelope mode stores its runs and
//     recalibrates (below).
//   - oracle: knows the simulator's true parameters, disturbances and wear
//     and sets, every cycle, the hold pressure at which the true plant
//     settles at the target (the physical limit on this line given its
//     noise; no write policy).
//
// Per mode: mean |run-mean part weight − target| over the runs (the
// measured part weight over each run), the fraction of measured samples
// inside the spec band target ± SpecHalfWidth, hard-constraint violations
// (samples whose true values leave a hard_range of the scene), approvals,
// writes, recalibration triggers (runs at whose end the recalibration
// scheduler's disturbance trigger, recal.DisturbanceScoreMax × the
// model's test RMSE, fires on the twin's drift estimate, with the
// policy's cooldown) and recalibrations carried out (retrains that made
// a new model: envelope mode only, at most Options.Retrains). The noise floor stated with the result is the
// part-weight sensor's noise and what it leaves on a run mean.
//
// Recalibration (envelope mode, recalib.go). The envelope mode stores
// every study run in the study's store as the line's connector would
// (run record under the line's next run id, all ten nodes' measured
// samples, context segment), so the runs after the model exist for the
// recalibration scheduler and the shadow evidence; the model is made an
// hour before the study's first run (the job runner's clock), and every
// record is stamped on the study's clock. When the trigger fires and the
// line has stored at least Options.RecalMinRuns study runs (a
// recalibration on one or two new runs is mostly the old data), the
// study recalibrates through the platform's scheduler: recal.ComputeSignals
// (with the scene's declared disturbances, so the shadow evidence is
// disturbance-corrected), recal.RequestAt and one worker step
// (recal.RunNext, in process: the model's dataset spec rebuilt with the
// new runs, the same trainer, params and seed; Options.RecalWindow > 0
// instead retrains on that many most recent runs). The new model is a
// candidate, not switched in (a person promotes a model). After
// Options.ShadowRuns more study runs its shadow evidence is collected
// (shadow.Collect, disturbance-corrected) and its twin gate evaluated
// (gate.Evaluate, profile twin-v3, stored), and so is the replaced
// model's, for comparison. ModeResult.RecalibrationDetails reports each:
// trigger, run, the scheduler's triggers, request, dataset, new model,
// its shadow figures and gate (profile, passed, failed checks with their
// values, trials). Options.Retrains (default 1) bounds the retrains;
// later triggers are counted only.
//
// The recalibrated model passes twin-v3 on the wearing line (seed 7, 60
// runs, the default options; measured 2026-12-05, TestBenefitWearingLine
// asserts it). The trigger fires after run 7 (drift estimate 0.447 g >
// 0.188 g); the rebuilt dataset keeps the 24 history runs in the split
// they had (12 train, 6 val, 6 test) and trains on the 8 study runs too
// (recal.RebuildSpec); 3 study runs later the new model passes every
// check: G1_SINGLE_STEP 0.0839 (the replaced model 0.0853 on the same
// test runs; test RMSE 0.092 g against 0.094 g), G6 12 trials (the gate
// plans 12, twin-v3 needs 10; 10 of the 22 visited points without a
// recommendation; the replaced model's gate also 12 and 10), shadow coverage 1.0, shadow/test
// RMSE 0.354. The study logs both gates' checks with their values.
//
// Why it failed before (same seed and options, with the engine's
// measured-state fix in place): the rebuild re-drew the by_run
// split over the 32 runs, so five former train runs left train and the
// test split became history runs 006, 008, 011, 012, 018, 022 (four of
// them former val runs, one a former train run) and study runs 027, 031.
// The new model failed G1_SINGLE_STEP 0.115 > 0.10 (test RMSE 0.128 g
// on that split) and G6 (7 trials against 10): of its 17 points without a
// recommendation 14 were on those history runs, with setpoints far from
// the study's (the part weight's tube edge beyond 31–34 g, OOD_DISTANCE
// 14.6–24.0 against 14.06 — the OOD envelope is fitted on the model's
// own train windows, and those runs were not among them — or the wear
// estimate beyond maxAbs 1.5 g), and 3 on study run 031 with the line at
// its 32 g target where only the tube's lower edge failed (30.75–30.78 g <
// 31 g). The gate was not weakened. Earlier still, 15 of 24 points were
// refused on the temperature guard's hard range 235–260 °C at 142.5–231.4
// °C while the line measured 236.2–257.2 °C: the engine judged the guard
// on the model's fitted melt-temperature state; it now judges states and
// guards no target calibrates on the physics started at the line's
// measurements (internal/twin/engine, the package doc's item 3), and no
// point is refused on the temperature (the test asserts it).
//
// Limits. The new runs only train: the val split (the conformal band's
// calibration) and the test split hold no run of the drifted regime, so
// the new model's accuracy there is checked by its shadow evidence alone
// (G8: 3 runs). The tube on a study run at target still adds the whole
// variance of the wear estimate whatever share the model's state already
// absorbs (conservative: a tube weighted by the share the disturbance
// carries would be sharper but needs a held-out coverage test first; not
// done, and not what made the gate fail). Options.RecalWindow > 0 builds a
// fresh by_run split over the most recent runs and keeps no assignment.
//
// The governed modes share the study's store and its line's write
// history, which is kept on the clock: each mode runs on its own span of
// the study's clock, whole days apart (modeBaseMs), so the history of one
// mode is never in another's future and the line's daily ambient cycle,
// and so its disturbances, stay the same in every mode. The line's channel
// is set to the mode's policy (hitl_governed, then bounded_auto) before
// the mode runs.
//
// The audit chain is verified in full at every cycle (envelope.Cycle);
// the study's store is fresh (Run refuses a data dir with runs), so the
// chain holds only the study's own entries.
package benefit
