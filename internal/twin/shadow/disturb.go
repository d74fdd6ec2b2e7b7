package shadow

import (
	"math"

	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/disturb"
)

// DriftEvidence is one target's unmeasured-disturbance estimate on a run
// (Options.Disturbances): the headline window figures of the target are
// then the disturbance-corrected ones, and the raw model's are kept here.
type DriftEvidence struct {
	ID string `json:"id"`
	// Estimate and SD are the disturbance at the run's last scored window
	// (target unit).
	Estimate Num `json:"estimate"`
	SD       Num `json:"sd"`
	// RawWindowRMSE and RawCoverage are the model's figures without the
	// correction.
	RawWindowRMSE Num `json:"rawWindowRmse"`
	RawCoverage   Num `json:"rawCoverage"`
	// Rows and Rejected count the errors the filter took and gated out.
	Rows     int `json:"rows"`
	Rejected int `json:"rejected"`
}

// correct applies the declared disturbance of target k to the run's
// window predictions, causally: window i is corrected with the filter's
// estimate from the errors of the windows whose futures ended by window
// i's start (starts[i]), carried to each of its rows, and its band widened
// by z·√(estimate variance) (z the conformal level's z-score). pred and
// truth hold the windows' F values each, in window order. It returns the
// corrected predictions, the per-value half-width additions and the
// evidence (Estimate/SD/Rows/Rejected filled).
func (l *Loaded) correct(d contract.UnmeasuredDisturbance, k int, starts []int, F int, pred, truth []float64) ([]float64, []float64, DriftEvidence) {
	zq := 1.6448536269514722
	if l.Conformal != nil && l.Conformal.Coverage > 0 && l.Conformal.Coverage < 1 {
		zq = math.Sqrt2 * math.Erfinv(l.Conformal.Coverage)
	}
	R := 0.0
	switch {
	case d.MeasurementSD != nil:
		R = *d.MeasurementSD * *d.MeasurementSD
	case l.Conformal != nil && len(l.Conformal.Widths) > 0:
		sd := l.Conformal.Widths[0][k] / zq
		R = sd * sd
	default:
		R = d.PriorSD * d.PriorSD
	}
	f := disturb.New(d.PriorSD*d.PriorSD, d.ProcessVar(), R)
	out := make([]float64, len(pred))
	add := make([]float64, len(pred))
	tpos := -1 // grid row of the filter's last step (-1: at the prior)
	fed := 0   // windows fed
	for i, s := range starts {
		for fed < i && starts[fed]+F <= s {
			for j := 0; j < F; j++ {
				row := starts[fed] + j
				if tpos >= 0 {
					f.Predict(row - tpos)
				}
				tpos = row
				v := fed*F + j
				f.Update(truth[v] - pred[v])
			}
			fed++
		}
		for j := 0; j < F; j++ {
			v := i*F + j
			ahead := 0
			if tpos >= 0 {
				ahead = s + j - tpos
			}
			out[v] = pred[v] + f.B
			add[v] = zq * math.Sqrt(f.VarAhead(ahead))
		}
	}
	return out, add, DriftEvidence{ID: d.ID, Estimate: Num(f.B), SD: Num(math.Sqrt(f.P)), Rows: f.Used, Rejected: f.Rejected}
}
