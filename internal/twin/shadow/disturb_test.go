package shadow

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/twin/contract"
)

// The shadow correction is causal: a window is corrected only with the
// errors of windows whose futures had ended by its start. On a run whose
// predictions miss a 0.5 g bias (noise 0.03 g), the first window is not
// corrected, every later one is, the estimate converges to the bias and
// the corrected values fall inside the band.
func TestCorrectIsCausal(t *testing.T) {
	const F, W, bias, noise = 10, 40, 0.5, 0.03
	widths := make([][]float64, F)
	for f := range widths {
		widths[f] = []float64{0.1}
	}
	l := &Loaded{Conformal: &eval.Conformal{Widths: widths, Coverage: 0.9}}
	rng := rand.New(rand.NewPCG(1, 2))
	var starts []int
	pred, truth := make([]float64, W*F), make([]float64, W*F)
	for i := 0; i < W; i++ {
		starts = append(starts, 30+i*F)
		for f := 0; f < F; f++ {
			truth[i*F+f] = 32 + bias + noise*rng.NormFloat64()
			pred[i*F+f] = 32
		}
	}
	walk := 0.001
	d := contract.UnmeasuredDisturbance{ID: "wear", Target: "weight", Model: contract.DisturbanceIntegratedWhiteNoise, PriorSD: 1, ProcessSDPerStep: &walk}
	corr, add, ev := l.correct(d, 0, starts, F, pred, truth)
	for f := 0; f < F; f++ {
		if corr[f] != pred[f] {
			t.Fatalf("the first window was corrected with errors not yet known: %v", corr[:F])
		}
	}
	if math.Abs(float64(ev.Estimate)-bias) > 0.02 || ev.Rows != (W-1)*F {
		t.Fatalf("estimate %+v", ev)
	}
	inside := 0
	for v := F; v < len(corr); v++ {
		if math.Abs(corr[v]-truth[v]) <= widths[0][0]+add[v] {
			inside++
		}
		if !(add[v] > 0) {
			t.Fatalf("value %d: the band is not widened", v)
		}
	}
	if frac := float64(inside) / float64(len(corr)-F); frac < 0.95 {
		t.Fatalf("%.3f of the corrected values inside the band", frac)
	}
}
