package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/cmplx"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
)

// PoleReporter is a model with linear dynamics that can list its poles:
// the eigenvalues of A for a state-space model, those of the A
// polynomial's companion matrix for an ARX model (aml.statespace/1,
// aml.arx/1). A discrete-time model is stable when every pole lies
// strictly inside the unit circle.
type PoleReporter interface {
	Poles() []complex128
}

// Stability is the evidence of the stability rules G7a (free run) and G7b
// (linear dynamics) of the v2 model gates.
type Stability struct {
	// FreeRun is the model's free run on the test split ([FreeRun], nInit
	// = the dataset's history length); nil when the model cannot simulate
	// whole runs (not a [RunSimulator]: G7a does not apply) or the free
	// run failed (FreeRunError says why: G7a fails).
	FreeRun      *FreeRunMetrics
	FreeRunError string
	// Linear says whether the model reports its poles ([PoleReporter]);
	// Poles is their number and MaxPoleModulus the largest |pole| (0 for a
	// model without autoregressive part, NaN when not Linear: G7b does
	// not apply).
	Linear         bool
	Poles          int
	MaxPoleModulus float64
}

// MeasureStability is the stability evidence of predictor p on bundle b: its
// test-split free run from nInit measured steps when p is a
// [RunSimulator] and its largest pole modulus when p is a [PoleReporter].
// An error of the free run is recorded, not returned, except a cancelled
// context.
func MeasureStability(ctx context.Context, b *dataset.Bundle, p model.Predictor, nInit int) (*Stability, error) {
	s := &Stability{MaxPoleModulus: math.NaN()}
	if pr, ok := p.(PoleReporter); ok {
		poles := pr.Poles()
		s.Linear, s.Poles, s.MaxPoleModulus = true, len(poles), 0
		for _, z := range poles {
			m := cmplx.Abs(z)
			if math.IsNaN(m) || m > s.MaxPoleModulus {
				s.MaxPoleModulus = m
			}
			if math.IsNaN(m) {
				break
			}
		}
	}
	if sim, ok := p.(RunSimulator); ok && b.Manifest.Kind == dataset.KindDynamic {
		fr, err := FreeRun(ctx, b, sim, dataset.SplitTest, nInit)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			s.FreeRunError = err.Error()
		}
		s.FreeRun = fr
	}
	return s, nil
}

type stabilityJSON struct {
	FreeRun        *FreeRunMetrics `json:"freeRun,omitempty"`
	FreeRunError   string          `json:"freeRunError,omitempty"`
	Linear         bool            `json:"linear"`
	Poles          int             `json:"poles"`
	MaxPoleModulus jf              `json:"maxPoleModulus"`
}

// MarshalJSON writes a non-finite modulus as null.
func (s Stability) MarshalJSON() ([]byte, error) {
	return json.Marshal(stabilityJSON{s.FreeRun, s.FreeRunError, s.Linear, s.Poles, jf(s.MaxPoleModulus)})
}

// UnmarshalJSON reads null as NaN.
func (s *Stability) UnmarshalJSON(b []byte) error {
	var j stabilityJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Stability{j.FreeRun, j.FreeRunError, j.Linear, j.Poles, float64(j.MaxPoleModulus)}
	return nil
}

// freeRunDivergedValue is G7a's value: 1 when the test free run diverged,
// 0 when it did not; applicable false when the model cannot simulate runs.
func freeRunDivergedValue(ev Evidence) (v float64, applicable bool, what string) {
	s := ev.Stability
	switch {
	case s == nil:
		return math.NaN(), true, "the profile requires a stability check and none was made: test free run diverged (1) or not (0)"
	case s.FreeRunError != "":
		return math.NaN(), true, "the test free run failed (" + s.FreeRunError + "): diverged (1) or not (0)"
	case s.FreeRun == nil:
		return math.NaN(), false, "not applicable: the model cannot simulate whole runs (no free run)"
	case s.FreeRun.Diverged:
		return 1, true, fmt.Sprintf("the test free run diverged (1) in %d of %d segment(s), first at %s", s.FreeRun.DivergedSegments, s.FreeRun.Segments, s.FreeRun.Divergence)
	}
	return 0, true, "the test free run did not diverge (0): " + s.FreeRun.Summary()
}

// maxPoleValue is G7b's value: the largest pole modulus; applicable false
// for a model without reported linear dynamics.
func maxPoleValue(ev Evidence) (v float64, applicable bool, what string) {
	s := ev.Stability
	switch {
	case s == nil:
		return math.NaN(), true, "the profile requires a stability check and none was made: largest |pole|"
	case !s.Linear:
		return math.NaN(), false, "not applicable: the model reports no linear dynamics (poles)"
	case s.Poles == 0:
		return 0, true, "the model has no autoregressive dynamics (no poles): largest |pole| 0"
	}
	verdict := "inside the unit circle (stable)"
	if !(s.MaxPoleModulus < 1) {
		verdict = "on or outside the unit circle: the linear dynamics are unstable"
	}
	return s.MaxPoleModulus, true, fmt.Sprintf("largest |pole| of the model's %d pole(s), %s,", s.Poles, verdict)
}
