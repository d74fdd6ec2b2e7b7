package polynomial

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/ident/analysis"
	"github.com/aml-project/aml/internal/ident/linear"
)

// armaxRecord simulates (1 − 1.5 q⁻¹ + 0.7 q⁻²) y = q⁻¹ u + 0.3 + (1 − 0.6 q⁻¹) e
// with a random binary input and e ~ N(0, 0.3²).
func armaxRecord(seed uint64, T int) (y []float64, u [][]float64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	y, u = make([]float64, T), make([][]float64, T)
	e := make([]float64, T)
	v := 1.0
	for k := 0; k < T; k++ {
		if rng.Float64() < 0.15 {
			v = -v
		}
		u[k] = []float64{v}
		e[k] = 0.3 * rng.NormFloat64()
		if k < 2 {
			continue
		}
		y[k] = 1.5*y[k-1] - 0.7*y[k-2] + u[k-1][0] + 0.3 + e[k] - 0.6*e[k-1]
	}
	return y, u
}

// On an ARMAX process the ARMAX fit recovers A, B, C within their stated
// uncertainty and leaves white residuals, where the ARX fit of the same A
// and B orders leaves the moving-average part in its residuals (not white).
func TestARMAXWhiteResiduals(t *testing.T) {
	y, u := armaxRecord(1, 3000)
	m, err := FitARMAX(context.Background(), [][]float64{y}, [][][]float64{u}, 2, 1, 1, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	est := []float64{m.A[0], m.A[1], m.B[0][0], m.C[0], m.D}
	for i, want := range []float64{-1.5, 0.7, 1, -0.6, 0.3} {
		if sd := math.Sqrt(m.Cov.At(i, i)); math.Abs(est[i]-want) > 4*sd || sd > 0.1 {
			t.Errorf("parameter %d: %.4f ± %.4f, truth %v", i, est[i], sd, want)
		}
	}
	if !(m.Cost < m.ARXCost) {
		t.Fatalf("cost %v from the ARX start's %v", m.Cost, m.ARXCost)
	}
	white := func(pred []float64) *analysis.ResidualReport {
		e := make([][]float64, len(y))
		for k := range e {
			e[k] = []float64{y[k] - pred[k]}
		}
		rep, err := analysis.ResidualAnalysis(e, u, 20, 0)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if r := white(m.PredictOneStep(y, u)); r.Outputs[0].Verdict != analysis.White {
		t.Errorf("ARMAX residuals %s (%.0f %% of lags outside)", r.Outputs[0].Verdict, 100*r.Outputs[0].Auto.Outside)
	}
	ys := make([][]float64, len(y))
	for k, v := range y {
		ys[k] = []float64{v}
	}
	arx, err := linear.FitARXOpts(ys, u, linear.ARXOrders{NA: 2, NB: 1, NK: 1}, linear.ARXOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one := arx.PredictOneStep(ys, u)
	pred := make([]float64, len(y))
	for k := range pred {
		pred[k] = math.NaN()
		if k >= 2 && k < len(one) {
			pred[k] = one[k][0]
		}
	}
	// the moving average shows at lag 1: far outside the 99 % bound for
	// ARX, inside it for ARMAX
	lag1 := func(r *analysis.ResidualReport) float64 {
		o := r.Outputs[0]
		for i, l := range o.Auto.Lags {
			if l == 1 {
				return math.Abs(o.Auto.Values[i]) / o.Bound
			}
		}
		t.Fatal("no lag 1")
		return 0
	}
	if a, x := lag1(white(m.PredictOneStep(y, u))), lag1(white(pred)); !(x > 3) || !(a < 1) {
		t.Errorf("lag-1 residual autocorrelation in 99 %% bounds: ARMAX %.2f (want < 1), ARX %.2f (want > 3)", a, x)
	}
	if _, err := FitARMAX(context.Background(), [][]float64{y}, [][][]float64{u}, 2, 1, 0, []int{1}); err == nil {
		t.Error("nc 0 accepted (that is ARX)")
	}
}
