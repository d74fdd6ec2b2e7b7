// Package hybrid identifies grey-box hybrid models: a physics model of the
// AML physics language (internal/physics), calibrated on the free-run
// simulation error of measured runs, plus a bounded neural residual
// ensemble trained on what the calibrated physics misses. The native
// trainer hybrid_residual@1 and its model format aml.hybrid/1
// (internal/ident/trainers/hybrid.go) wrap it for the platform.
//
// # Pieces
//
//   - [System]: a physics.Model, the model quantities that are measured
//     (obs, guards or states: the columns of every [Segment].Y) and the
//     step length. A state is "directly observed" when an output is the
//     state itself or an obs/guard whose expression is just the state's
//     name (obs y = x2): its initial value is taken from the first
//     measured row.
//   - [Calibrate]: bounded nonlinear least squares of the free-run
//     simulation error (see below).
//   - [Model]: the calibrated physics with its initial-state estimator and
//     an optional [Ensemble]; [Model.Simulate] is the one prediction path.
//   - [TrainResidual]: the residual ensemble ([Net], Adam, early stopping).
//
// # Calibration
//
// Every training segment (a NaN-free stretch of a run) is simulated from
// its initial state through its whole length with physics.Sim.Step; the
// residuals are the differences to the measured outputs in units of each
// output's standard deviation. A step that fails (NaN/Inf) makes every
// later residual of its segment failPenalty (10 standard deviations), so a
// failing region costs more than any fit and the optimiser backs out of
// it.
//
// Parameters stay inside their declared prior bounds by construction:
// Levenberg–Marquardt works on unconstrained coordinates z with
// v = lo + (hi−lo)·σ(z), or v = exp(log lo + (log hi − log lo)·σ(z)) for a
// positive range spanning two decades or more (rates such as the tanks'
// k in [1e-4, 1]), σ the logistic function. The Jacobian is a forward
// difference computed in parallel (one physics.Sim per worker), and the
// solver (internal/ident/lm, the segments as its blocks) eliminates the
// per-segment initial states by a Schur complement, so many segments cost
// little. Several starts (CalibOptions.Starts, default 4):
// the declared nominal values, the centre of the bounds in z (the
// geometric centre for log-scaled parameters) and points of a Halton
// sequence with a Cranley–Patterson rotation drawn from the seed — all
// deterministic. The start with the smallest cost wins; parameters the
// simulation does not depend on (zero sensitivity) are reported as
// inactive and keep their start values.
//
// Initial states of the states no output measures directly
// (CalibOptions.X0):
//
//   - segment: extra bounded parameters per segment (bounded by the state's
//     declared range; free without one) — the benchmark's own prescription
//     for the cascaded tanks, whose upper level is never measured;
//   - estimate: fitted to the segment's first NInit measured rows at every
//     evaluation, as prediction does;
//   - init: the init clauses;
//   - auto (default): segment and estimate, keeping the one whose
//     parameters give the smaller training free-run error as it is
//     measured at prediction time (initial state from NInit rows).
//
// # Prediction
//
// [Model.Simulate] is used for windows, whole runs and the residual's
// training data alike:
//
//  1. initial state: init clauses with the calibrated parameters and the
//     first inputs; directly observed states from the first measured row;
//     every other state starts at its prior — its init clause plus the
//     mean fitted offset of the training runs' starts — and, given at least
//     two measured rows, is refined by a bounded least-squares fit of the
//     first nInit rows with the prior as a penalty. The data residuals are
//     scaled by the short-horizon error level of the physics (measured on
//     training stretches), the prior by the state's spread in training,
//     and the prior's weight (X0Weight; negative: the prior alone) is
//     chosen among DefaultX0Weights by the training free-run error from
//     the runs' starts. Windows, which start anywhere in a run, use their
//     own weight (WindowX0Weight, chosen on training windows;
//     [Model.ForWindows]) — the only difference between the two paths;
//  2. free run: physics.Sim.Step over every input row (no measured output
//     is used after the first nInit rows); a step that fails holds the
//     last good row;
//  3. residual: ŷ = y_phys + OutStd · mean_i(residualScale·tanh(net_i(f))),
//     where the features f of step k are, for lags l = 0…Lags−1, the
//     simulated model outputs (obs and guards), states and controls at
//     step k − l·Stride (clamped at 0), standardised with training
//     statistics. The network never sees a measured output, so it works in
//     free run. The members' spread (Prediction.Spread) is an uncertainty
//     indication.
//
// # Residual network
//
// [Net] is written by hand on plain slices: one hidden tanh layer (32
// units by default), a bounded output Scale·tanh(·), Glorot-uniform input
// weights and a zero output layer, so a new network predicts exactly zero
// — training starts from the physics alone. Training is Adam on the mean
// squared error of the normalised residual over shuffled minibatches, with
// early stopping on the validation simulation error (the val runs, or
// without them member i's held-out i-th contiguous block of every training
// segment): each member keeps the weights of its best validation epoch,
// the zero network when training never beats the physics. Member i is
// seeded Seed+i; members train in parallel, and everything is
// deterministic for a seed.
//
// One epoch of 10 000 samples (24 inputs, 32 hidden, 1 output, batches of
// 64) takes about 13 ms on one core of the development machine
// (BenchmarkResidualEpoch); the same network and optimiser on GoMLX
// v0.26.0's pure-Go backend (simplego) took about 133 ms.
//
// # Rollout kernels
//
// A twin's rollout ([Model.Roll], 5 members × 60 steps per candidate, 200
// candidates per optimisation) spends nearly all its time in the residual
// networks' hidden layer and its tanh, so on amd64 both run in hand-written
// AVX2 assembly (kernel_amd64.s; no kept library offers a bit-exact
// vector tanh or a dense layer that keeps Go's rounding), bit for bit the
// Go code: the hidden layer reads W1 input-major (packW1) and sums 32
// units per pass over the input, each unit from its bias in input order,
// every product and sum rounded separately; tanh is math.Tanh with
// math.Exp's FMA path, eight lanes at a time (CPUs without AVX2/FMA keep
// the Go code). TestForwardPackedEqualsForward, TestTanhAVX2 and
// TestRollEqualsSimulate check the bits; BenchmarkForwardPacked against
// BenchmarkForward and BenchmarkTanhAVX2 against BenchmarkTanhGo measure
// them, and the twin's BenchmarkOptimizeVsNaive the whole optimisation
// (bench/RESULTS.md).
package hybrid
