// Package process identifies the low-order transfer models plant engineers
// read and tune controllers from: per input of one output a
// first-order-plus-dead-time (FOPDT: gain K, time constant τ, dead time θ),
// second-order-plus-dead-time (SOPDT: K, τ1 ≥ τ2, θ) or
// integrating-plus-dead-time (IPDT: K, θ) response. With several inputs the
// output is the sum of the per-input responses plus an offset.
//
// # Model
//
// Times are in seconds, dt is the sampling period. Inputs enter as
// deviations from a reference ū (the training means). With the input
// delayed by θ = (m + f)·dt (m whole steps, 0 ≤ f < 1) by linear
// interpolation,
//
//	v(k) = (1−f)·u(k−m) + f·u(k−m−1) − ū,
//
// the per-input responses are, with a = exp(−dt/τ),
//
//	FOPDT  x(k) = a·x(k−1) + (1−a)·K·v(k)
//	SOPDT  x1(k) = a1·x1(k−1) + (1−a1)·K·v(k),  x(k) = a2·x2(k−1) + (1−a2)·x1(k)
//	IPDT   x(k) = x(k−1) + dt·K·v(k)
//
// and y(k) = c + d·dt·k + Σ_i x_i(k), where c is the offset and d a drift
// (a rate, only with an IPDT input: it stands for the unknown balance
// point of the integrator). A sample's input acts within its own sampling
// period — the convention of historian exports, where the logged setpoint
// of step k already drove the level logged at step k — so a step logged at
// step k first moves the output at step k + θ/dt. Before the first step of
// a record the inputs are held at their first value.
//
// # Initial conditions
//
// A record does not start at rest in general. For every record (segment)
// the offset c and the initial deviations δ of the filter states from rest
// (one per FOPDT state, two per SOPDT input; an IPDT state is the offset)
// are linear in the output and are estimated by least squares for given
// dynamics (variable projection): the nonlinear fit only sees the dynamic
// parameters, and the offset is per record. In prediction (Simulate with
// nInit measured rows) the same estimate is made from the measured rows
// as a MAP estimate with Gaussian priors — δ ~ N(0, yStd²) (the training
// output's spread) and c ~ N(mean training offset, (2·spread of the
// records' offsets)²) against the noise variance σ² — so that a short
// history moves the decaying initial state rather than the persistent
// offset and cannot produce a wild transient; with nInit = 0 the model
// starts at rest with the training offset.
//
// # Fit
//
// Fit minimises the simulation (output) error over all records with the
// Levenberg–Marquardt solver of package lm (central-difference Jacobian).
// Starting values come from a grid search: per input in turn (two sweeps)
// over a logarithmic grid of time constants (SOPDT: also the ratio τ2/τ1)
// and the dead time in whole sampling steps, the gains and offsets solved
// by least squares; LM then refines all parameters jointly with a
// continuous dead time (the interpolated fractional delay makes the output
// smooth in θ between whole steps). τ is bounded to [dt/20, MaxTau], θ to
// [0, MaxDeadTime].
//
// The parameter covariance is σ²(JᵀJ)⁻¹ with J the Jacobian of the
// projected residuals at the optimum and σ² = SSE/(N − p − q) (p dynamic
// parameters, q per-record linear ones); the 95 % confidence intervals are
// ±1.96 standard errors (normal approximation, valid for white output
// noise and enough data).
package process
