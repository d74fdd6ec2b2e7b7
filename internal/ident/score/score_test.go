package score

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestNRMSE(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 500
	meas := make([][]float64, n)
	pred := make([][]float64, n)
	for i := range meas {
		meas[i] = []float64{rng.NormFloat64() * 2, 10 + rng.NormFloat64()*0.5}
		pred[i] = []float64{meas[i][0] + 0.2*rng.NormFloat64(), meas[i][1]}
	}
	a := NewNRMSE(2)
	for i := range meas {
		a.Add(pred[i], meas[i])
	}
	// by hand: output 0's RMSE over its population standard deviation,
	// output 1 exact
	var sse, sum, sum2 float64
	for i := range meas {
		e := pred[i][0] - meas[i][0]
		sse += e * e
		sum += meas[i][0]
		sum2 += meas[i][0] * meas[i][0]
	}
	mean := sum / n
	want := (math.Sqrt(sse/n)/math.Sqrt(sum2/n-mean*mean) + 0) / 2
	if got := a.Mean(); math.Abs(got-want) > 1e-12 || a.Steps() != n {
		t.Errorf("NRMSE %v (%d steps), want %v (%d)", got, a.Steps(), want, n)
	}
}

func TestNRMSEDivergedNeverWins(t *testing.T) {
	for _, c := range []struct {
		name string
		add  func(a *NRMSE)
	}{
		{"no steps", func(*NRMSE) {}},
		{"NaN prediction", func(a *NRMSE) {
			a.Add([]float64{math.NaN()}, []float64{1})
			a.Add([]float64{2}, []float64{2})
		}},
	} {
		a := NewNRMSE(1)
		c.add(a)
		if got := a.Mean(); !math.IsInf(got, 1) {
			t.Errorf("%s: NRMSE %v, want +Inf", c.name, got)
		}
	}
}
