// Package engine is the digital twin's engine: it loads a registered
// dynamic model as a [Twin] — a hybrid (aml.hybrid/1: calibrated physics +
// bounded residual ensemble, internal/ident/hybrid), a linear state-space
// model (aml.statespace/1), an ARX model (aml.arx/1), a NARX network
// (aml.narx/1, narx_mlp@1), a neural state-space model (aml.nss/1,
// neural_state_space@1) or a static quality model (aml.static-response/1,
// static_response@1; aml.static-forest/1, static_forest@1) — estimates the
// state of a line from a snapshot's recent window, runs virtual trials of candidate setpoint
// trajectories and searches for the best safe one. Nothing here writes to a
// machine: a trial's candidateExecuted is always false.
//
// # Loading
//
// [LoadFrom] reads the model row, verifies the artifact's hash and loads
// the dataset manifest through a [ModelSource] ([StoreSource] over a
// back-end's store; [Load] is the shorthand), loads the predictor, and
// takes from the model's metrics what its evaluation measured: the
// split-conformal half-widths W[f][k] (val split, coverage level q), the
// coverage measured on the test split and the OOD training envelope
// (eval.FitOOD). Any other format is refused with
// AML_TWIN_MODEL_UNSUPPORTED ([IsTwinFormat]). Every model class runs
// behind one small interface (dynamics.go: a start from a window, rollouts
// that continue from it), each along the path its PredictBatch predicts a
// dataset window — the path the conformal widths were measured on
// (TestLinearTwinMatchesPredictBatch, TestNARXTwinMatchesPredictBatch,
// TestNSSTwinMatchesPredictBatch). The
// classes:
//
//   - hybrid (trainers.HybridPredictor): physics states, outputs and guards
//     plus the residual ensemble;
//   - linear (trainers.LinearTwin): aml.statespace/1 and aml.arx/1;
//   - history-started neural (trainers.HistoryTwin): aml.narx/1 and
//     aml.nss/1. A model of this kind starts from the window's H rows
//     (its inputs and outputs) and rolls out with a roller of its own
//     buffers per goroutine; an ensemble (neural_state_space@1 with
//     ensemble > 1) predicts its members' mean and reports their spread.
//     A new neural class plugs in by implementing trainers.HistoryTwin on
//     its predictor and naming its format in [TwinFormats] and
//     registry.TwinFormats (TestRegistryKnowsTwinFormats checks they
//     agree); nothing else in the engine changes;
//   - static (static.go): aml.static-response/1 and aml.static-forest/1,
//     models of a static_response dataset (one row per beat: settings →
//     quality). Its inputs that are dataset controls are the controls,
//     its other inputs (disturbances, features) are held at their last
//     value in the window, its targets its outputs. It has no state: the
//     window is H = 1 row (estimator static-row/1, the row itself), and
//     every horizon step's targets are the model's PredictBatch of that
//     step's inputs — the path its conformal width was calibrated on, one
//     row in, one prediction out (TestStaticTwinMatchesPredictBatch) — so
//     a move shows at the step it is made (steady state: the model knows
//     no dynamics). The tube is mean ± W, the one calibrated half-width at
//     every step (no growth past F: each step is the calibrated
//     prediction); the OOD envelope is the train input rows'
//     (eval.OODFeaturesRow), judged on every step's input row. A held
//     input without a value in the window is refused
//     (AML_TWIN_WINDOW_INVALID); a static model without a control input,
//     or another format on a static dataset, AML_TWIN_MODEL_UNSUPPORTED.
//     A static model predicts its window's rows, so a declared unmeasured
//     disturbance (an output bias, say) is estimated from its one row.
//     Features that follow the controls (a measured melt temperature)
//     should not be inputs of a static twin model: held, they would hide
//     a move's effect (examples/specs/injection_quality.json leaves them
//     out).
//
// A hybrid's quantities are its physics names (trainers.HybridLayout):
// controls, disturbances, the outputs that are dataset targets, and states
// measured by a column of their own name. A linear or neural model's
// quantities are the dataset columns it uses, by node id: its inputs are
// controls, its targets its outputs; a linear model or a NARX network has
// no ensemble (the tube is the conformal width alone; a neural state-space
// ensemble adds its members' spread as the hybrid's does) and its states
// are abstract (a state-space model's x1 … xn, shown in a trial's detail,
// no scene variables; a NARX model has none beyond the window's rows, and
// a neural state-space model's encoder state is not shown).
// [Twin.DraftScene] drafts a scene from the model and [Twin.CheckScene]
// lists every way a scene does not fit it.
//
// # State estimation
//
// [Twin.Window] is the grid a snapshot must provide (H history rows at the
// dataset's beat, every dataset column). From a window the twin builds a
// start once and caches it by the window's content. A hybrid's start
// (hybrid.Model.StartFrom) is the initial state fitted to the H measured
// rows exactly as PredictBatch does for a dataset window, then propagated
// through the window; a state-space model's is its window estimate (the
// Kalman filter without process noise: the prior's MAP initial state,
// propagated; or the least-squares one, as trained); an ARX model's is the
// window's rows, a neural state-space model's (nss-encoder/1) every
// member's encoder state from the window's last max(na, nb) rows (the
// first row held before a shorter window), a NARX model's
// (narx-history/1) the window's last outputs
// and inputs, normalised as the network reads them — the start PredictBatch
// makes for a dataset window, so the twin's rollout is the model's own
// prediction to the last bit of PredictBatch's float32 output. Gaps (null
// values) hold the last valid value for inputs (the first valid one before
// it), are left out of the state fit for outputs (a linear or neural model
// reads them held), and a control or target column without any value in
// the H rows is refused (AML_TWIN_WINDOW_INVALID). [Twin.EstimateState] reports the states at the
// window's last row: a directly measured state its last valid measurement,
// every other state the model's estimate; the estimator version is
// "<estimator>:<modelID>" (hybrid-x0fit/1, statespace-kalman/1,
// statespace-x0ls/1, arx-history/1, narx-history/1, nss-encoder/1).
//
// # Virtual trials
//
// [Twin.Trial] (and the one-call [RunTrial]):
//
//  1. validation: every step sets exactly the scene's controls to finite
//     values inside the scene range ∩ the objective's trust region window,
//     within the trust region's maxDelta of the snapshot's value, moving at
//     most min(maxStep, writePolicy.maxDeltaPerAction, trust maxDelta)
//     from the previous step (the snapshot's value before step 0); moves
//     of one control at least minNodeIntervalSec apart, actions on the
//     line minLineActionIntervalSec apart, at most maxActionsPerRun of
//     them. Any finding rejects the candidate with CONTROL_SAFETY before
//     any rollout; the record names every offending field and step, its
//     constraints are marked notEvaluated, and it is still a valid record.
//  2. rollout: every candidate continues from its own copy of the cached
//     start (hybrid.Model.Roll writes only into per-goroutine buffers), so
//     no state or history leaks between rollouts; the physics runs the
//     candidate's controls with the disturbances held at their last
//     values, the residual ensemble adds its mean correction and reports
//     its members' spread.
//  3. the tube: a target the model was calibrated on gets mean ± (W + s),
//     W the conformal half-width of that horizon step and s the ensemble
//     members' standard deviation (added, not combined in quadrature: the
//     conformal width covers the model's typical error, the spread flags
//     inputs where the members disagree more than usual). Past the
//     calibrated horizon F nothing was measured, so the width grows like a
//     random walk from the largest calibrated width:
//     max_f W[f]·√((k+1)/F) at step k ≥ F. Without a calibration the width
//     is infinite. Quantities no target measures (guards such as
//     flash_rate or pressure, states) come from the calibrated physics
//     alone, have no tube (lower = mean = upper) and are listed as not
//     calibrated in the [TrialDetail]. They are judged on the physics
//     started consistently with the line's measurements, not on the
//     model's fitted state: the initial-state fit explains the targets
//     and can move a state no target observes well far from the line's
//     own measurement of it (the hybrid's melt temperature, moved
//     11–110 °C to explain the part weight), and a guard computed from
//     it (the post-step temperature) would be judged on a value the
//     measurement contradicts — refusing a safe move, or passing a line
//     that is really out of range. So every state the dataset measures (a
//     column of its name) is set to its last measurement at the window's
//     last row, the physics is stepped through that row and rolls each
//     candidate's controls alongside the model's own rollout (one more
//     physics run per candidate, no residual: these quantities are the
//     physics'), and states, obs and guards without a target come from it
//     (reported anchored). An obs or guard the dataset measures itself (a
//     column of its name, e.g. flash_rate) is reported at its last
//     measurement plus the physics' predicted change and judged on both
//     that and its physics value (lower and upper are the two, edges
//     "lower"/"upper"): a biased output map or a measured level beyond a
//     limit is not passed unseen, and a clamped rate anchored past its
//     clamp cannot pass either. The targets keep the model's own path:
//     their conformal tube was calibrated on it
//     (TestMeasuredGuardJudgedOnMeasurement, TestMeasuredOutputJudgedOnBoth).
//  4. constraints, each with the first violating step and the edge it was
//     found on: hard_range on the lower and upper edges; max_delta and
//     rate on the mean and on each edge trajectory (at step 0 against the
//     window's last value); custom conditions (internal/physics
//     ParseCondition, over the model's quantities by name) by interval
//     evaluation over the tube — the condition must hold for every value
//     in the box of the step's tube. A constraint that cannot be evaluated
//     (unknown variable, a bad expression) fails closed.
//  5. OOD: for every horizon step the H most recent rows (history then
//     predicted rows: candidate controls, predicted targets, the
//     measurement-started physics for columns named like a model
//     quantity — measured obs and guards at their anchored level —, held
//     values for the rest) are summarised like the
//     training windows and their Mahalanobis distance taken; the largest
//     must not exceed the envelope's threshold, and the ensemble
//     disagreement (member std over the calibrated half-width) must not
//     exceed [MaxDisagreement].
//  6. cost over the whole horizon: Σ_k Σ_targets weight·((mean − setpoint)²
//     + σ²) with σ² = (W/z_q)² + s², the prediction variance, so a less
//     certain candidate never looks better; plus Σ control cost·|move|.
//     The baseline holds the snapshot's controls; improvement = baseline
//     cost − candidate cost.
//
// A trial passes when every constraint holds and OOD accepts it; the
// record's rejectCode says why not (CONTROL_SAFETY, MODEL_FAILURE,
// CONSTRAINT_VIOLATION, OUT_OF_DISTRIBUTION).
//
// # Unmeasured disturbances
//
// A scene of schema 2 may declare unmeasured disturbances
// (contract.UnmeasuredDisturbance): an additive output disturbance on a
// target, a constant bias or a random walk. The plan estimates each from
// the window jointly with the class's own state estimate (disturb.go,
// internal/twin/disturb): the errors of the class's prediction of the
// window's rows, the share of an offset the state estimate absorbs
// (one more start from the targets shifted by a probe), and a Kalman
// filter's weights give the disturbance b; the rollouts then continue from
// the start estimated from the targets less b and the target's mean is
// the rollout plus b. The tube widens by z·√(P + (k+1)·q), the cost's
// variance by P + (k+1)·q, the OOD envelope sees the window with b taken
// off the target (an estimate beyond the scene's maxAbs is
// OOD_DISTURBANCE), and the trial's detail lists the estimates. A scene
// without declarations gives exactly the trials it gave before. The
// history-started neural classes (aml.narx/1, aml.nss/1) do not predict
// their window's own rows, so a scene declaring an unmeasured disturbance
// is refused for them (AML_TWIN_SCENE_MISMATCH, "does not predict its
// window's rows").
//
// # Optimiser
//
// [Twin.Optimize] moves the scene's controls only where the write policy
// allows (see its doc), starts from the seed's small-step candidates and,
// in precise_search, runs a deterministic pattern search; the lowest-cost
// passing candidate wins; when none passes, OptimizeResult.NoPass names
// why holding the baseline fails (its failed constraints with their
// values, its OOD code with the distance and threshold or the disturbance
// beyond its maxAbs). [ChooseMode] picks the mode from a twin gate
// report. 200 candidates × 5 members × 60 steps take about 28 ms of CPU
// on one core of the development machine (BenchmarkOptimize, -cpu 1; the
// residual networks run in internal/ident/hybrid's AVX2 kernels; the
// physics run from the measured states adds about 5 %), about 6.4 times
// faster than predicting each candidate from the window with
// Model.Simulate (BenchmarkOptimizeNaive), which re-estimates the initial
// state every time; BenchmarkOptimizeVsNaive measures both in one loop.
package engine
