package analysis

import (
	"errors"
	"fmt"
	"math"
)

// StepOptions configure StepResponses.
type StepOptions struct {
	// U0 is the steady state of the MVs (the inputs); its length is the
	// number of MVs.
	U0 []float64
	// Steps are the step sizes per MV (nil: 1 each); a response is
	// reported per unit of step.
	Steps []float64
	// Pre is the number of rows at U0 before the step (0: 1), N the rows
	// after it (required), Dt the sampling period (0: 1, times in steps).
	Pre, N int
	Dt     float64
	// DeadBand (0: 0.02) is the share of the final change the response
	// must exceed to end the dead time, SettleBand (0: 0.02) the share
	// around the final value it must stay within to have settled.
	DeadBand, SettleBand float64
}

// StepPair is the step response of one CV (output) to one MV.
type StepPair struct {
	MV, CV int
	// Response is the change of the CV per unit step, row k being k steps
	// after the step row (row 0: the step row itself).
	Response []float64
	// Gain is the final change per unit step (the last row of Response).
	Gain float64
	// DeadTime is the time (k·Dt) of the first row whose change exceeds
	// DeadBand·|Gain|; TimeConstant the time from the DeadBand crossing
	// to the 63.2 % point (both linearly interpolated between rows, so
	// that the sampling does not bias it; for a first-order response it is
	// (1 + ln(1 − DeadBand))·τ, 0.98·τ by default); SettlingTime the time
	// from which on the response stays within SettleBand·|Gain| of Gain.
	// All are NaN when the gain is zero (no response), TimeConstant also
	// when the response never reaches 63.2 %. The final value is the last
	// row: N must cover the settling, or the figures describe a truncated
	// response.
	DeadTime, TimeConstant, SettlingTime float64
}

// StepReport is the result of StepResponses.
type StepReport struct {
	// Pairs[cv][mv] is the response of CV cv to MV mv.
	Pairs [][]StepPair
	// Gains[cv][mv] is the gain matrix.
	Gains [][]float64
}

// StepResponses steps every MV in turn from U0 and reads the responses of
// all CVs. simulate returns the outputs ([T][nCV]) of a model started at
// the steady state U0 for the input rows u ([T][nMV]); it is called once
// with all inputs at U0 (the baseline, subtracted from every response)
// and once per MV with that MV stepped by Steps[mv] from row Pre on.
func StepResponses(simulate func(u [][]float64) [][]float64, opts StepOptions) (*StepReport, error) {
	nMV := len(opts.U0)
	if nMV == 0 || simulate == nil {
		return nil, errors.New("analysis: StepResponses needs U0 and a simulate function")
	}
	if opts.N < 2 {
		return nil, fmt.Errorf("analysis: N %d: at least 2 rows after the step", opts.N)
	}
	steps := opts.Steps
	if steps == nil {
		steps = make([]float64, nMV)
		for i := range steps {
			steps[i] = 1
		}
	}
	if len(steps) != nMV {
		return nil, fmt.Errorf("analysis: %d step sizes for %d MVs", len(steps), nMV)
	}
	pre, dt := opts.Pre, opts.Dt
	if pre <= 0 {
		pre = 1
	}
	if dt <= 0 {
		dt = 1
	}
	db, sb := opts.DeadBand, opts.SettleBand
	if db <= 0 {
		db = 0.02
	}
	if sb <= 0 {
		sb = 0.02
	}
	T := pre + opts.N
	input := func(mv int) [][]float64 {
		u := make([][]float64, T)
		for k := range u {
			u[k] = append([]float64(nil), opts.U0...)
			if mv >= 0 && k >= pre {
				u[k][mv] += steps[mv]
			}
		}
		return u
	}
	base := simulate(input(-1))
	if len(base) != T || len(base[0]) == 0 {
		return nil, fmt.Errorf("analysis: simulate returned %d rows for %d", len(base), T)
	}
	nCV := len(base[0])
	rep := &StepReport{Pairs: make([][]StepPair, nCV), Gains: make([][]float64, nCV)}
	for cv := range rep.Pairs {
		rep.Pairs[cv] = make([]StepPair, nMV)
		rep.Gains[cv] = make([]float64, nMV)
	}
	for mv := 0; mv < nMV; mv++ {
		if steps[mv] == 0 {
			return nil, fmt.Errorf("analysis: MV %d has a zero step", mv)
		}
		y := simulate(input(mv))
		if len(y) != T {
			return nil, fmt.Errorf("analysis: simulate returned %d rows for %d", len(y), T)
		}
		for cv := 0; cv < nCV; cv++ {
			r := make([]float64, opts.N)
			for k := range r {
				if len(y[pre+k]) != nCV {
					return nil, fmt.Errorf("analysis: simulate row %d has %d outputs, want %d", pre+k, len(y[pre+k]), nCV)
				}
				r[k] = (y[pre+k][cv] - base[pre+k][cv]) / steps[mv]
			}
			p := stepFigures(r, dt, db, sb)
			p.MV, p.CV = mv, cv
			rep.Pairs[cv][mv] = p
			rep.Gains[cv][mv] = p.Gain
		}
	}
	return rep, nil
}

// stepFigures reads gain, dead time, time constant and settling time off
// the unit-step response r.
func stepFigures(r []float64, dt, deadBand, settleBand float64) StepPair {
	nan := math.NaN()
	p := StepPair{Response: r, Gain: r[len(r)-1], DeadTime: nan, TimeConstant: nan, SettlingTime: nan}
	g := p.Gain
	peak := 0.0
	for _, v := range r {
		peak = math.Max(peak, math.Abs(v))
	}
	if g == 0 || math.IsNaN(g) || math.Abs(g) <= 1e-12*peak {
		return p
	}
	// work on the response normalised to a final value of 1
	n := make([]float64, len(r))
	for k, v := range r {
		n[k] = v / g
	}
	d := -1
	for k, v := range n {
		if math.Abs(v) > deadBand {
			d = k
			break
		}
	}
	if d < 0 {
		return p
	}
	p.DeadTime = float64(d) * dt
	// crossing is the interpolated time (in rows) at which n first reaches
	// level, searching from row d
	crossing := func(level float64) float64 {
		for k := d; k < len(n); k++ {
			if n[k] >= level {
				if k > 0 && n[k] > n[k-1] && n[k-1] < level {
					return float64(k-1) + (level-n[k-1])/(n[k]-n[k-1])
				}
				return float64(k)
			}
		}
		return nan
	}
	const f63 = 1 - 1/math.E
	if t63 := crossing(f63); !math.IsNaN(t63) {
		t0 := float64(d)
		if n[d] > 0 {
			t0 = crossing(deadBand)
		}
		p.TimeConstant = math.Max(t63-t0, 0) * dt
	}
	last := -1
	for k, v := range n {
		if math.Abs(v-1) > settleBand {
			last = k
		}
	}
	if last < len(n)-1 {
		p.SettlingTime = float64(last+1) * dt
	}
	return p
}
