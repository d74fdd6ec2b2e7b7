// Package snapshot takes twin snapshots from the live store: the current
// state of a scene's line — control values, state estimate, disturbances —
// with the quality of the data it came from and the recent window a
// virtual trial starts from. [Take] builds and seals a
// contract.TwinSnapshot and a [Report]; the store keeps it
// (sqlite.PutSnapshot, immutable, audited "snapshot.create").
//
// # Binding
//
// A scene variable's node is Options.Bindings[var], else the variable's
// NodeID, else the node with the variable's id; a variable with none of
// these is unbound (reported, not counted in completeness). Every bound
// variable is checked against its node, always, with
// AML_BINDING_MISMATCH naming the variable: controls on writable (dcw)
// nodes, everything else on measured (daq) ones; same line; same unit
// (dimensionless spellings "1", "ratio", "fraction", "-" agree — the
// simulator says "ratio", scenes say "1" — no other conversion); the
// variable's range inside the node's; a control's node with a declared
// range; every control and target bound. From the nodes a
// contract.NodeBindingSnapshot is derived (epoch = the newest node
// definition, policy recommendation_only because the store knows no
// channel policy) and its hash recorded as bindingSnapshotHash; the same
// nodes give the same hash. A node without unit or line cannot be
// checked: no binding snapshot is recorded (strict mode refuses).
//
// # Reading and cleaning
//
// The run is Options.RunID, else the newest active run of the scene's line
// started by the capture time, else the newest run of any status (none:
// samples of the line). Its product and recipe must be the scene's. For
// each node the samples of the lookback (default 10 min, at least the
// window + Hampel neighbourhood + MaxAge) are cleaned exactly as a
// dataset is (dataset.Clean: state filter, the node's range, two-sided
// Hampel with the dataset defaults 5 beats / k = 3). The two-sided test
// cannot judge the newest samples (they have no right neighbours), so for
// measured nodes the newest samples are also tested against their past
// alone (the same dataset.Clean rule with the left neighbourhood
// mirrored): a disagreeing newest sample is held back as a possible spike
// (Report HeldBack) and the newest agreeing one is the current value; a
// real level change is accepted after about half a Hampel window.
// Setpoints step on purpose and are taken as logged.
//
// # Quality
//
//   - freshness: a bound variable is stale when its current value is
//     older than MaxAge (default guard.DefaultSnapshotMaxAge, 60 s), and
//     missing when it has no usable sample in the lookback; both are in
//     dataQuality.staleNodeIds and the report, and dataQuality.fresh says
//     whether every bound variable was fresh. A stale value is still the
//     last valid one and is used.
//   - completeness: the fraction of bound variables with a fresh value and
//     the fraction of window cells filled; dataQuality.completeness is the
//     smaller, the report has both.
//   - future samples: samples stamped after capture time + tolerance
//     (default 2 s) are never used and are counted per node. With
//     Options.Replay (CLI --at) the capture time is in the past and later
//     samples are simply not there yet: they are ignored, not counted.
//   - duplicates and out-of-order arrival cannot be observed: the store
//     keeps one value per node and instant (a re-sent sample replaces the
//     earlier one, so duplicates inside or across submitted batches are
//     gone after ingest) and no ingest sequence or arrival time. They are
//     reported as 0 together with Report.Unobservable saying why, rather
//     than silently claimed to be absent.
//
// Strict mode refuses with AML_SNAPSHOT_QUALITY (HTTP 422), one problem
// per stale or missing variable ("variables.<id>", message naming the
// node) and per node with future samples ("nodes.<id>"). Gaps inside the
// window are not refused (they are nulls in the window and lower the
// completeness). In every mode a control without any usable value is
// refused: a snapshot carries every control's current value.
//
// # Window and state estimate
//
// The window is on the estimator's grid (Window(): steps, beat, nodes) or,
// without one, Options.WindowSteps × BeatMs (30 × 1000 ms) for every bound
// node. Its last row is the grid instant of the newest cleaned sample
// (daqWatermark); row k holds the mean of the cleaned samples in
// [t_k, t_k + beat) (dataset.Align without interpolation), null where
// there is none: values are never invented.
//
// Measured states (a state variable with a current value) are the last
// valid observation ("last-valid/v1"). Unmeasured states come from the
// optional StateEstimator, given the window; the version is then
// "last-valid/v1+<estimator version>". Without an estimator they are
// omitted and the version is "last-valid/v1+no-model" (plain
// "last-valid/v1" when no state is unmeasured).
//
// The store records no process phase: Options.Phase, else the scene's
// phase "unknown" if it has one, else its first phase (Report.PhaseSource
// "default", with a note).
package snapshot
