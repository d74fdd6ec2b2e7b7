package polynomial

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/ident/analysis"
)

// bjRecord simulates y = (0.5 q⁻¹ + 0.3 q⁻²)/(1 − 0.7 q⁻¹) u + 0.5 +
// (1 + 0.4 q⁻¹)/(1 − 0.9 q⁻¹) e with a random binary input and
// e ~ N(0, 0.2²): coloured noise, independent of the dynamics.
func bjRecord(seed uint64, T int) (y []float64, u [][]float64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	y, u = make([]float64, T), make([][]float64, T)
	w, v, e := make([]float64, T), make([]float64, T), make([]float64, T)
	s := 1.0
	for k := 0; k < T; k++ {
		if rng.Float64() < 0.1 {
			s = -s
		}
		u[k] = []float64{s}
		e[k] = 0.2 * rng.NormFloat64()
		if k >= 2 {
			w[k] = 0.7*w[k-1] + 0.5*u[k-1][0] + 0.3*u[k-2][0]
			v[k] = 0.9*v[k-1] + e[k] + 0.4*e[k-1]
		}
		y[k] = w[k] + 0.5 + v[k]
	}
	return y, u
}

func whiteness(t *testing.T, y, pred []float64, u [][]float64) analysis.OutputResiduals {
	t.Helper()
	e := make([][]float64, len(y))
	for k := range e {
		e[k] = []float64{y[k] - pred[k]}
	}
	rep, err := analysis.ResidualAnalysis(e, u, 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Outputs[0]
}

func rmseFrom(y, pred []float64, from int) float64 {
	s := 0.0
	for k := from; k < len(y); k++ {
		s += (y[k] - pred[k]) * (y[k] - pred[k])
	}
	return math.Sqrt(s / float64(len(y)-from))
}

// On a Box–Jenkins process (coloured noise through its own C/D) the BJ fit
// recovers B, F, C and D within their stated uncertainty and leaves white
// one-step residuals, where the output-error fit (right dynamics, no noise
// model) leaves coloured ones; BJ's one-step prediction beats OE's (whose
// one-step prediction is its simulation) on a fresh record.
func TestBJRecoversColouredNoise(t *testing.T) {
	ctx := context.Background()
	o := OEOrders{NF: 1, NB: 2, NK: []int{1}}
	y, u := bjRecord(1, 4000)
	m, err := FitBJ(ctx, [][]float64{y[:2000], y[2000:]}, [][][]float64{u[:2000], u[2000:]}, o, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	est := []float64{m.F[0], m.B[0][0], m.B[0][1], m.C[0], m.D[0], m.Offset}
	for i, c := range []struct {
		name string
		want float64
		tol  float64 // largest standard error accepted
	}{{"f1", -0.7, 0.05}, {"b0", 0.5, 0.05}, {"b1", 0.3, 0.05}, {"c1", 0.4, 0.05}, {"d1", -0.9, 0.05}, {"offset", 0.5, 0.5}} {
		if sd := math.Sqrt(m.Cov.At(i, i)); math.Abs(est[i]-c.want) > 4*sd || sd > c.tol {
			t.Errorf("%s: %.4f ± %.4f, truth %v", c.name, est[i], sd, c.want)
		}
	}
	if !(m.Cost < m.StartCost) || !(m.CMaxRoot < 1) || !(m.DMaxRoot < 1) || !(m.SpectralRadius < 1) {
		t.Errorf("cost %v from %v; roots F %v C %v D %v", m.Cost, m.StartCost, m.SpectralRadius, m.CMaxRoot, m.DMaxRoot)
	}
	oe, err := FitOE(ctx, [][]float64{y[:2000], y[2000:]}, [][][]float64{u[:2000], u[2000:]}, o)
	if err != nil {
		t.Fatal(err)
	}
	yv, uv := bjRecord(2, 2000)
	const from = 20
	bj1 := m.PredictOneStep(yv, uv)
	oe1 := oe.Predict(yv[:2], uv)
	for k := 0; k < from; k++ {
		bj1[k], oe1[k] = math.NaN(), math.NaN()
	}
	if w := whiteness(t, yv, bj1, uv); w.Verdict != analysis.White {
		t.Errorf("BJ residuals %s (%.0f %% of lags outside)", w.Verdict, 100*w.Auto.Outside)
	}
	if w := whiteness(t, yv, oe1, uv); w.Verdict != analysis.NotWhite {
		t.Errorf("OE residuals on coloured noise %s", w.Verdict)
	}
	rb, ro := rmseFrom(yv, bj1, from), rmseFrom(yv, oe1, from)
	if !(rb < 0.25) || !(rb < 0.5*ro) {
		t.Errorf("one-step RMSE: BJ %.4f, OE %.4f (noise σ 0.2)", rb, ro)
	}
	// Predict over one step from a measured history is PredictOneStep
	k := 500
	if p := m.Predict(yv[:k], uv[:k+1]); math.Abs(p[k]-bj1[k]) > 1e-12 {
		t.Errorf("Predict one step %v, PredictOneStep %v", p[k], bj1[k])
	}
	t.Logf("BJ f %.3f b %.3f c %.3f d %.3f offset %.3f; one-step RMSE BJ %.4f OE %.4f", m.F, m.B, m.C, m.D, m.Offset, rb, ro)
	if _, err := FitBJ(ctx, [][]float64{y}, [][][]float64{u}, o, 1, 0); err == nil {
		t.Error("nd 0 accepted")
	}
}

// ARMAX's Predict over one step is its one-step predictor, and with no
// measured row beyond the start its free run.
func TestARMAXPredict(t *testing.T) {
	y, u := armaxRecord(3, 1500)
	m, err := FitARMAX(context.Background(), [][]float64{y}, [][][]float64{u}, 2, 1, 1, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	one := m.PredictOneStep(y, u)
	for _, k := range []int{10, 400, 1499} {
		if p := m.Predict(y[:k], u[:k+1]); math.Abs(p[k]-one[k]) > 1e-9 {
			t.Errorf("step %d: Predict %v, PredictOneStep %v", k, p[k], one[k])
		}
	}
	free := m.Simulate(u, y[:2])
	if r1, rf := rmseFrom(y, one, 2), rmseFrom(y, free, 2); !(r1 < rf) {
		t.Errorf("one-step RMSE %.4f not below the free run's %.4f", r1, rf)
	}
}
