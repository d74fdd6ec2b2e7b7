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
//     within an operating envelope a person approved once (bounds, moves
//     per hour, expiry); every write passes the study's write checks (the
//     scene's ranges, maxDeltaPerAction and node interval) and the
//     envelope ([Envelope]). The study's envelope is [StudyEnvelope];
//     the interface is where the operating-envelope certificate
//     (bounded_auto) plugs in.
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
// The study is not the governed write path: it writes to the simulated
// line directly after its own checks, without certificates in a store;
// the governed path is tested in internal/twin/guard and govern.
package benefit
