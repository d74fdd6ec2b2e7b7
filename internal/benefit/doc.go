// Package benefit is the benefit study behind `aml demo --benefit`: the
// same simulated injection line (sim.ClosedLine: same seed, disturbances,
// mould wear and sensor noise in every mode) run run after run under four
// controllers, and what each achieved on the part weight.
//
//   - fixed: the recipe's nominal setpoints, no twin.
//   - per_move: the twin (a hybrid model trained on the line's history,
//     with the scene's declared mould-wear disturbance estimated from
//     each snapshot window, internal/twin/engine) recommends a move every
//     cycle; each move needs one person's approval, which the study gives
//     programmatically as a person other than the requester after
//     Options.ApprovalDelaySteps (a person does not approve at once), and
//     the scene's write policy (maxActionsPerRun per run) holds.
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
//     gate (the training job's GatePassed), not a twin gate (twin-v3
//     needs shadow evidence of runs after the model, which the study's
//     closed loop does not store).
//   - oracle: knows the simulator's true parameters, disturbances and wear
//     and sets, every cycle, the hold pressure at which the true plant
//     settles at the target (the physical limit on this line given its
//     noise; no write policy).
//
// Per mode: mean |run-mean part weight − target| over the runs (the
// measured part weight over each run), the fraction of measured samples
// inside the spec band target ± SpecHalfWidth, hard-constraint violations
// (samples whose true values leave a hard_range of the scene), approvals,
// writes and recalibrations (runs at whose end the recalibration
// scheduler's disturbance trigger, recal.DisturbanceScoreMax × the
// model's test RMSE, fires on the twin's drift estimate; the study
// counts the trigger, it does not retrain inside the loop). The noise
// floor stated with the result is the part-weight sensor's noise and what
// it leaves on a run mean.
//
// per_move is not the governed path: it writes to the simulated line
// directly after the study's own checks (scene ranges,
// maxDeltaPerAction, node and line intervals, maxActionsPerRun), without
// recommendation certificates in a store; the certificate path is tested
// in internal/twin/guard and govern.
//
// The audit chain is verified in full at every cycle (envelope.Cycle);
// the study's store is fresh (Run refuses a data dir with runs), so the
// chain holds only the study's own entries.
package benefit
