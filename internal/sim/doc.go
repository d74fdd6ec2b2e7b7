// Package sim is a deterministic simulated injection-moulding line for demos,
// tests and benchmarks of AML. [GenerateInjection] turns an
// [InjectionConfig] into a data set of runs and samples held in memory;
// [Output.Write] puts it into a core.Store and [Output.WriteCSV] writes it as
// long-format CSV. [Stream] gives the same data run by run and batch by
// batch: [Stream.Write] stores (and exports) it while it is simulated, in a
// few batches of memory whatever the size (aml sim injection uses it).
//
// # The plant
//
// The process model AML identifies is the upstream grey-box, implemented by
// [Step] (physics.go): per step of dt seconds, cavity pressure follows the
// hold-pressure setpoint with time constant pressureTauSec, melt temperature
// follows its setpoint with thermalTauSec (plus the upstream's per-step
// ambient term ambient*0.0005), an unmeasured fill fraction saturates at 1,
// and part weight, flash rate and sink rate are static functions of the new
// pressure, temperature and material batch factor.
//
// The simulated machine, [TruePlant], has the same structure but
//
//   - different, "true" parameter values, [TrueParams] (pressureGain 0.12,
//     pressureTauSec 6, thermalTauSec 30, weightBase 31.5, weightTempGain
//     0.02), all inside the priors of [ParamPriors], while [NominalParams]
//     are the upstream nominal values (0.10, 5, 25, 31.8, 0.015): a working
//     calibration moves from the latter toward the former;
//   - smooth effects the grey-box does not model, for a residual model to
//     learn: a saturating hold-time effect on weight,
//     +0.4*(1-exp(-(hold_time-4)/3)) g, and a quadratic pressure effect,
//     -0.001*(pressure-70)^2 g;
//   - ambient cooling, -dt*0.0005*(ambient-23) degC per step, so the melt
//     temperature stays physical (about 0.35 degC above its setpoint); the
//     grey-box's ambient term is kept as it is. The plant integrates in
//     substeps of at most 1 s and applies the ambient term per second, so it
//     is stable and independent of the sample period; at the default 1 s
//     period its equations are exactly the grey-box's plus the effects above;
//   - an unmeasured mould-wear bias on part weight that grows by about
//     0.012 g per run (saturating at 1 g).
//
// # Signals
//
// Ten nodes: the controls hold_pressure, hold_time and
// melt_temperature_setpoint (kind dcw); the measured states melt_temperature
// and cavity_pressure; the measured disturbances ambient_temperature and
// material_batch_factor; and the observations part_weight, flash_rate and
// sink_rate (all kind daq). fill_fraction is a state but is never emitted.
//
// Each run starts at the recipe's nominal setpoints with an empty cavity;
// every 2..8 minutes one, several or all setpoints step by 10..50% of their
// recipe range. Ambient temperature is a daily sinusoid plus a random walk
// plus a slow drift across runs; the material batch factor is a new batch
// per run and changes mid-run in about a quarter of the runs.
//
// # Impairments
//
// Controls are logged at every step with state ok. Measured nodes look like
// real data acquisition:
//
//   - gaussian sensor noise ([SensorNoiseSD]: weight 0.03 g, pressure
//     0.5 bar, melt temperature 0.3 degC, ...), values rounded to the sensor
//     resolution, rates clamped at 0;
//   - ok-flagged outliers, about 0.2% of samples, 8..25 noise SDs;
//   - non-ok samples, state "bad" (value garbage: 0, frozen, twice full
//     scale or 32767) or "uncertain" (a much noisier reading), isolated and
//     in bursts of 3..15 samples, about 0.5% in all;
//   - dropouts, about 0.5% of samples missing;
//   - gaps: in about half of the runs one node or every measured node is
//     silent for 10..60 s, once or twice.
//
// # Closed loop
//
// [ClosedLine] runs the same plant step by step under a controller's
// setpoints instead of the excitation schedule (the benefit study,
// internal/benefit): the same seed and run give the same ambient
// temperature, material lots, mould wear and sensor noise whatever the
// controller does; measured values get gaussian noise at the sensor
// resolution, without the impairments above.
//
// # Determinism
//
// The output is a pure function of the configuration: every run draws from
// its own PCG streams (schedule, disturbances, noise, impairments, gaps)
// keyed by the seed and the run index, so the same config and seed give
// identical samples (runs are simulated concurrently, or streamed, without
// changing the result) and another seed gives different ones. Timestamps,
// ids and created-at times derive from the config, never from the clock.
package sim
