package process

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// Auto in Options.Structures of Select marks an input whose structure is
// chosen.
const Auto Structure = "auto"

// SelectMargin is the share by which a candidate must lower the
// validation error to replace the current choice.
const SelectMargin = 0.01

// Candidate is one structure combination Select scored.
type Candidate struct {
	Structures []Structure
	ValRMSE    float64 // free-run RMSE on the validation records (+Inf on error)
	Err        error
}

// String is like "fopdt,ipdt".
func (c Candidate) String() string {
	s := make([]string, len(c.Structures))
	for i, v := range c.Structures {
		s[i] = string(v)
	}
	return strings.Join(s, ",")
}

// FreeRunRMSE is the RMSE of m's free run over the records, each
// initialised with its first nInit rows (Model.Simulate) and scored on
// the rest.
func FreeRunRMSE(m *Model, ys [][]float64, us [][][]float64, nInit int) float64 {
	sse, n := 0.0, 0
	for s, y := range ys {
		sim := m.Simulate(us[s], y, min(nInit, len(y)))
		for k := nInit; k < len(y); k++ {
			e := y[k] - sim[k]
			sse += e * e
			n++
		}
	}
	if n == 0 {
		return math.Inf(1)
	}
	return math.Sqrt(sse / float64(n))
}

// Select fits opts.Structures on the train records, choosing every Auto
// input's structure by the free-run RMSE on the validation records
// (FreeRunRMSE with nInit), greedily: all Auto inputs start as FOPDT,
// then each in turn tries SOPDT and IPDT, and a candidate replaces the
// current choice when it lowers the validation RMSE by more than
// SelectMargin (so the simpler FOPDT stays on a near tie). It returns the
// chosen fit (on the train records) and every candidate scored in order.
// Without an Auto input it only fits.
func Select(ctx context.Context, trainY [][]float64, trainU [][][]float64, valY [][]float64, valU [][][]float64, dt float64, opts Options, nInit int,
	progress func(done, total int)) (*Result, []Candidate, error) {
	st := append([]Structure(nil), opts.Structures...)
	var auto []int
	for i, s := range st {
		if s == Auto {
			auto = append(auto, i)
			st[i] = FOPDT
		}
	}
	fit := func(s []Structure) (*Result, error) {
		o := opts
		o.Structures = s
		return Fit(ctx, trainY, trainU, dt, o)
	}
	if len(auto) == 0 {
		r, err := fit(st)
		return r, nil, err
	}
	total := 1 + 2*len(auto)
	var cands []Candidate
	score := func(s []Structure) (*Result, float64, error) {
		r, err := fit(s)
		c := Candidate{Structures: append([]Structure(nil), s...), ValRMSE: math.Inf(1), Err: err}
		if err == nil {
			c.ValRMSE = FreeRunRMSE(r.Model, valY, valU, nInit)
		}
		cands = append(cands, c)
		if progress != nil {
			progress(len(cands), total)
		}
		return r, c.ValRMSE, err
	}
	best, bestScore, err := score(st)
	if err != nil && ctx.Err() != nil {
		return nil, cands, err
	}
	for _, i := range auto {
		for _, alt := range []Structure{SOPDT, IPDT} {
			try := append([]Structure(nil), st...)
			try[i] = alt
			r, v, err := score(try)
			if err != nil {
				if ctx.Err() != nil {
					return nil, cands, ctx.Err()
				}
				continue
			}
			if v < bestScore*(1-SelectMargin) {
				best, bestScore, st = r, v, try
			}
		}
	}
	if best == nil {
		return nil, cands, fmt.Errorf("process: no structure could be fitted: %w", err)
	}
	return best, cands, nil
}
