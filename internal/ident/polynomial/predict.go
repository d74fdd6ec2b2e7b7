package polynomial

// k-step-ahead prediction of the models with a noise model (ARMAX, BJ):
// the predictor runs over the measured rows to estimate the noise, then
// continues with the future noise set to its mean 0. Over one step this is
// the one-step-ahead predictor ŷ(k|k−1), over a long horizon the free run.

// Predict returns the model's outputs over u ([T][inputs]) given the first
// len(y0) measured outputs: the measured rows themselves, then the
// prediction of every later row from y0 and u alone (the k-step-ahead
// predictor, k = 1, 2, …: the noise is estimated over the measured rows
// and its future values are 0). Before the record's start inputs and
// outputs are held at their first rows and the noise is 0.
func (m *ARMAX) Predict(y0 []float64, u [][]float64) []float64 {
	T := len(u)
	n0 := min(len(y0), T)
	yy, e := make([]float64, T), make([]float64, T)
	n := min(m.maxLag(), n0)
	at := func(k int) int { return max(k, 0) }
	for k := 0; k < T; k++ {
		if k < n {
			yy[k] = y0[k]
			continue
		}
		q := m.D
		for j := 1; j <= m.NA; j++ {
			q -= m.A[j-1] * yy[at(k-j)]
		}
		for i := range m.B {
			for l := 0; l < m.NB; l++ {
				q += m.B[i][l] * u[at(k-m.NK[i]-l)][i]
			}
		}
		for j := 1; j <= m.NC; j++ {
			if k-j >= 0 {
				q += m.C[j-1] * e[k-j]
			}
		}
		if k < n0 {
			yy[k], e[k] = y0[k], y0[k]-q
		} else {
			yy[k] = q
		}
	}
	return yy
}

// Simulate is the free run from the first measured outputs y0: Predict.
func (m *ARMAX) Simulate(u [][]float64, y0 []float64) []float64 { return m.Predict(y0, u) }

// Poles are the roots of z^na + a_1 z^(na−1) + … + a_na (the free run's
// dynamics).
func (m *ARMAX) Poles() []complex128 { return poles(m.A) }

// Predict is the output-error model's prediction from the first measured
// outputs y0: its free run (the noise is white at the output, so the
// measured outputs only start the dynamics).
func (m *OE) Predict(y0 []float64, u [][]float64) []float64 { return m.Simulate(u, y0) }
