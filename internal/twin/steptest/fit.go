package steptest

import (
	"context"
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ident/process"
)

// PairReport is one input's fitted response next to the previous
// model's (zero when there is none).
type PairReport struct {
	Input     string  `json:"input"`
	K         float64 `json:"k"`
	TauSec    float64 `json:"tauSec"`
	ThetaSec  float64 `json:"thetaSec"`
	PrevK     float64 `json:"prevK,omitempty"`
	PrevTau   float64 `json:"prevTauSec,omitempty"`
	PrevTheta float64 `json:"prevThetaSec,omitempty"`
	// Step is the unit step response of the fitted pair at each second
	// of StepAtSec, PrevStep the previous model's.
	Step     []float64 `json:"step"`
	PrevStep []float64 `json:"prevStep,omitempty"`
	// SSK, SSDeadTimeSec and SSStep are the linear_state_space@1 model's
	// steady-state gain, dead time (its input delay plus the state
	// update's sample) and unit step response (absent when it was not
	// fitted: FitReport.StateSpaceError says why).
	SSK           float64   `json:"ssK,omitempty"`
	SSDeadTimeSec float64   `json:"ssDeadTimeSec,omitempty"`
	SSStep        []float64 `json:"ssStep,omitempty"`
}

// FitReport is the process model fitted from an executed step test.
type FitReport struct {
	TestID    string          `json:"testId"`
	Output    string          `json:"output"`
	Model     *process.Model  `json:"model"`
	RMSE      float64         `json:"rmse"`
	Params    []process.Param `json:"params"`
	Pairs     []PairReport    `json:"pairs"`
	StepAtSec []float64       `json:"stepAtSec"`
	// Previous names the previous model the pairs' Prev* fields come
	// from (Compare), PreviousError why it could not be compared.
	Previous      string `json:"previous,omitempty"`
	PreviousError string `json:"previousError,omitempty"`
	// StateSpace is linear_state_space@1 fitted from the same run.
	StateSpace      *StateSpaceFit `json:"stateSpace,omitempty"`
	StateSpaceError string         `json:"stateSpaceError,omitempty"`
}

// Fit fits process_model@1 (FOPDT per input) and linear_state_space@1
// (see StateSpaceFit; a failure of this second fit is reported in
// StateSpaceError, not returned) to output of the executed test and
// compares the curves with prev (nil: none; its inputs in the execution's
// input order).
func Fit(ctx context.Context, ex *Execution, output string, prev *process.Model) (*FitReport, error) {
	if ex == nil || len(ex.Samples) < 20 || !(ex.StepSec > 0) {
		return nil, core.Errorf(core.CodeInvalidArgument, "the step test recorded too few samples to fit a model")
	}
	y := make([]float64, len(ex.Samples))
	u := make([][]float64, len(ex.Samples))
	for t, s := range ex.Samples {
		v, ok := s.Values[output]
		if !ok {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "output", "%s was not recorded", output)
		}
		y[t] = v
		u[t] = make([]float64, len(ex.Inputs))
		for i, in := range ex.Inputs {
			u[t][i] = s.Values[in]
		}
	}
	st := make([]process.Structure, len(ex.Inputs))
	for i := range st {
		st[i] = process.FOPDT
	}
	res, err := process.Fit(ctx, [][]float64{y}, [][][]float64{u}, ex.StepSec, process.Options{Structures: st})
	if err != nil {
		return nil, core.Wrap(core.CodeInvalidArgument, err, "fit process_model@1")
	}
	r := &FitReport{TestID: ex.TestID, Output: output, Model: res.Model, RMSE: res.RMSE, Params: res.Params}
	horizon := 600.0
	for at := 0.0; at <= horizon; at += 10 {
		r.StepAtSec = append(r.StepAtSec, at)
	}
	for i, in := range ex.Inputs {
		p := res.Model.Pairs[i]
		pr := PairReport{Input: in, K: p.K, TauSec: p.Tau1, ThetaSec: p.Theta, Step: stepCurve(p, r.StepAtSec)}
		if prev != nil && i < len(prev.Pairs) {
			q := prev.Pairs[i]
			pr.PrevK, pr.PrevTau, pr.PrevTheta, pr.PrevStep = q.K, q.Tau1, q.Theta, stepCurve(q, r.StepAtSec)
		}
		r.Pairs = append(r.Pairs, pr)
	}
	theta := make([]float64, len(ex.Inputs))
	for i := range theta {
		theta[i] = res.Model.Pairs[i].Theta
	}
	ss, err := fitStateSpace(ctx, y, u, ex.StepSec, theta)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.StateSpaceError = "fit linear_state_space@1: " + err.Error()
		return r, nil
	}
	r.StateSpace = ss
	for i := range r.Pairs {
		k, err := dcGain(ss.Model, i)
		if err != nil {
			r.StateSpaceError = err.Error()
			break
		}
		r.Pairs[i].SSK, r.Pairs[i].SSDeadTimeSec = k, float64(ss.Delays[i]+1)*ex.StepSec
		r.Pairs[i].SSStep = ssStepCurve(ss.Model, ss.Delays, i, ex.StepSec, r.StepAtSec)
	}
	return r, nil
}

// Previous is a previous model to compare a fit with (a registry model
// in the application): its unit step response of the fitted output to
// one input at the given seconds after the step is written, and its
// steady-state gain (as the model gives it: its response long after the
// step).
type Previous interface {
	Name() string
	StepResponse(input string, atSec []float64) (curve []float64, gain float64, err error)
}

// Compare fills every pair's PrevK and PrevStep from prev (PrevTau and
// PrevTheta stay for a process model given to Fit). A model that cannot
// answer for some input is reported in PreviousError and leaves the
// pairs without a comparison; nothing else of the report changes.
func (r *FitReport) Compare(prev Previous) {
	r.Previous = prev.Name()
	curves := make([][]float64, len(r.Pairs))
	gains := make([]float64, len(r.Pairs))
	for i, p := range r.Pairs {
		c, g, err := prev.StepResponse(p.Input, r.StepAtSec)
		if err == nil && len(c) != len(r.StepAtSec) {
			err = fmt.Errorf("%d step response values for %d times", len(c), len(r.StepAtSec))
		}
		if err != nil {
			r.PreviousError = fmt.Sprintf("previous model %s, input %s: %v", r.Previous, p.Input, err)
			return
		}
		curves[i], gains[i] = c, g
	}
	for i := range r.Pairs {
		r.Pairs[i].PrevK, r.Pairs[i].PrevStep = gains[i], curves[i]
		r.Pairs[i].PrevTau, r.Pairs[i].PrevTheta = 0, 0
	}
}

// stepCurve is the FOPDT unit step response at the given times.
func stepCurve(p process.Pair, at []float64) []float64 {
	out := make([]float64, len(at))
	for i, t := range at {
		if t > p.Theta && p.Tau1 > 0 {
			out[i] = p.K * (1 - expNeg((t-p.Theta)/p.Tau1))
		}
	}
	return out
}

func expNeg(x float64) float64 { return math.Exp(-x) }
