// Package analysis holds validation numerics any identified model can use,
// as plain functions over [][]float64 (rows are time steps, columns
// channels):
//
//   - Residuals: residual analysis — the autocorrelation of every output's
//     residuals for lags 0..M and their cross-correlation with every input
//     for lags −M..M, with the 99 % confidence bounds ±2.58/√N of a white
//     sequence, and a verdict per output ("white" or "not white") from the
//     share of lags outside the bounds.
//   - StepResponses: step responses of a model given as a simulate
//     function, per MV→CV pair: gain, dead time, time constant and
//     settling time, and the gain matrix.
package analysis
