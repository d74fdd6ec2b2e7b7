package model

import (
	"context"
	"fmt"
	"math"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

var sprintf = fmt.Sprintf

// LinearWindow is the aml.linear-window/1 model.json:
//
//	{"format":"aml.linear-window/1","history":H,"horizon":F,
//	 "xCols":nAll,"uCols":nCtrl,"yCols":nTgt,"normalized":true,
//	 "norm":{"x":{"mean":[nAll],"std":[nAll]},"u":{...[nCtrl]},"y":{...[nTgt]}},
//	 "weights":[ F·nTgt rows of H·nAll + F·nCtrl + 1 values ]}
//
// Prediction of one window: feats = concat(x' flattened C-order [H][xCols],
// u' flattened [F][uCols], 1) where x' = (x − x.mean)/x.std and
// u' = (u − u.mean)/u.std when normalized, the raw values otherwise;
// yn[f,k] = weights[f·nTgt+k] · feats; y[f,k] = yn[f,k]·y.std[k] + y.mean[k]
// when normalized, yn otherwise.
//
// Fit to a dataset: history = H, horizon = F, xCols = nAll (all columns),
// yCols = number of targets. uCols is the number of controls; a dataset
// without controls has one all-zero u column, which the model either uses
// (uCols 1) or ignores (uCols 0). Static datasets: history 1 (0 is accepted
// and means the same), horizon 1, xCols = number of inputs, uCols 0.
type LinearWindow struct {
	Format     string      `json:"format"`
	History    *int        `json:"history"`
	Horizon    *int        `json:"horizon"`
	XCols      *int        `json:"xCols"`
	UCols      *int        `json:"uCols"`
	YCols      *int        `json:"yCols"`
	Normalized *bool       `json:"normalized"`
	Norm       *LinearNorm `json:"norm,omitempty"`
	Weights    [][]float64 `json:"weights"`
}

// LinearNorm is the normalisation a linear-window model was trained with.
type LinearNorm struct {
	X *dataset.Stats `json:"x"`
	U *dataset.Stats `json:"u"`
	Y *dataset.Stats `json:"y"`
}

type linear struct {
	d          dataset.Dims // the dataset's dimensions (strides of x, u)
	uCols      int          // u columns the model uses (≤ d.UCols)
	normalized bool
	xm, xs     []float64
	um, us     []float64
	ym, ys     []float64
	w          [][]float64
	nFeat      int
}

func loadLinear(b []byte, d dataset.Dims) (Predictor, error) {
	var lw LinearWindow
	if err := decode(b, &lw); err != nil {
		return nil, err
	}
	var ps problems
	req := func(name string, v *int) int {
		if v == nil {
			ps.add(name, "required")
			return -1
		}
		if *v < 0 {
			ps.add(name, "must not be negative, got %d", *v)
			return -1
		}
		return *v
	}
	H, F := req("history", lw.History), req("horizon", lw.Horizon)
	xc, uc, yc := req("xCols", lw.XCols), req("uCols", lw.UCols), req("yCols", lw.YCols)
	kind := "dataset"
	if d.Static {
		kind = "static dataset"
		if H == 0 {
			H = 1
		}
	}
	if H >= 0 && H != d.H {
		if d.Static {
			ps.add("history", "%d, but a static dataset has one input row per sample (history 1)", H)
		} else {
			ps.add("history", "%d steps, the dataset has %d", H, d.H)
		}
	}
	if F >= 0 && F != d.F {
		ps.add("horizon", "%d steps, the %s has %d", F, kind, d.F)
	}
	if xc >= 0 && xc != d.XCols {
		ps.add("xCols", "%d columns, the %s's x has %d", xc, kind, d.XCols)
	}
	if uc >= 0 {
		switch {
		case d.Static && uc != 0:
			ps.add("uCols", "%d, but a static dataset has no u array (uCols must be 0)", uc)
		case !d.Static && d.NCtrl == 0 && uc > 1:
			ps.add("uCols", "%d, the dataset has no controls (uCols 0, or 1 for its zero column)", uc)
		case !d.Static && d.NCtrl > 0 && uc != d.NCtrl:
			ps.add("uCols", "%d columns, the dataset has %d control(s)", uc, d.NCtrl)
		}
	}
	if yc >= 0 && yc != d.YCols {
		ps.add("yCols", "%d targets, the %s has %d", yc, kind, d.YCols)
	}
	if lw.Normalized == nil {
		ps.add("normalized", "required (true or false)")
	}
	if len(ps) > 0 {
		return nil, ps.err(FileName + " (" + FormatLinearWindow + ") does not fit the dataset")
	}
	p := &linear{d: d, uCols: uc, normalized: *lw.Normalized, w: lw.Weights}
	p.nFeat = H*xc + F*uc + 1
	if len(lw.Weights) != F*yc {
		ps.add("weights", "%d rows, need horizon·yCols = %d", len(lw.Weights), F*yc)
	}
	for r, row := range lw.Weights {
		if len(row) != p.nFeat {
			ps.add(sprintf("weights[%d]", r), "%d values, need history·xCols + horizon·uCols + 1 = %d", len(row), p.nFeat)
			if len(ps) > 20 {
				break
			}
			continue
		}
		for c, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				ps.add(sprintf("weights[%d][%d]", r, c), "not finite")
				break
			}
		}
	}
	if p.normalized {
		if lw.Norm == nil {
			ps.add("norm", "required when normalized is true")
		} else {
			p.xm, p.xs = checkStats(&ps, "norm.x", lw.Norm.X, xc)
			if uc > 0 || (lw.Norm.U != nil && len(lw.Norm.U.Mean)+len(lw.Norm.U.Std) > 0) {
				p.um, p.us = checkStats(&ps, "norm.u", lw.Norm.U, uc)
			}
			p.ym, p.ys = checkStats(&ps, "norm.y", lw.Norm.Y, yc)
		}
	}
	if len(ps) > 0 {
		return nil, ps.err(FileName + " (" + FormatLinearWindow + ") is invalid")
	}
	return p, nil
}

// checkStats validates one normalisation block of n columns.
func checkStats(ps *problems, field string, s *dataset.Stats, n int) (mean, std []float64) {
	if s == nil {
		ps.add(field, "required when normalized is true")
		return nil, nil
	}
	if len(s.Mean) != n || len(s.Std) != n {
		ps.add(field, "mean has %d and std %d values, need %d each", len(s.Mean), len(s.Std), n)
		return nil, nil
	}
	for j := 0; j < n; j++ {
		if math.IsNaN(s.Mean[j]) || math.IsInf(s.Mean[j], 0) {
			ps.add(sprintf("%s.mean[%d]", field, j), "not finite")
		}
		if !(s.Std[j] > 0) || math.IsInf(s.Std[j], 0) {
			ps.add(sprintf("%s.std[%d]", field, j), "must be finite and > 0, got %v", s.Std[j])
		}
	}
	return s.Mean, s.Std
}

func (p *linear) Format() string { return FormatLinearWindow }
func (p *linear) Horizon() int   { return p.d.F }

func (p *linear) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	if err := checkBatch(p.d, x, u, n); err != nil {
		return nil, err
	}
	d := p.d
	xl, ul, yl := d.XLen(), d.ULen(), d.YLen()
	out := make([]float32, n*yl)
	feats := make([]float64, p.nFeat)
	for i := 0; i < n; i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, core.Wrap(core.CodeInternal, ctx.Err(), "prediction cancelled")
		}
		k := 0
		xw := x[i*xl : (i+1)*xl]
		for h := 0; h < d.H; h++ {
			for j := 0; j < d.XCols; j++ {
				v := float64(xw[h*d.XCols+j])
				if p.normalized {
					v = (v - p.xm[j]) / p.xs[j]
				}
				feats[k] = v
				k++
			}
		}
		if p.uCols > 0 {
			uw := u[i*ul : (i+1)*ul]
			for f := 0; f < d.F; f++ {
				for j := 0; j < p.uCols; j++ {
					v := float64(uw[f*d.UCols+j])
					if p.normalized {
						v = (v - p.um[j]) / p.us[j]
					}
					feats[k] = v
					k++
				}
			}
		}
		feats[k] = 1
		o := out[i*yl : (i+1)*yl]
		for r, row := range p.w {
			s := 0.0
			for c, w := range row {
				s += w * feats[c]
			}
			if p.normalized {
				t := r % d.YCols
				s = s*p.ys[t] + p.ym[t]
			}
			o[r] = float32(s)
		}
	}
	return out, nil
}
