package model

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/dataset"
)

// ExecPredictor is the aml.exec-predictor/1 model.json:
//
//	{"format":"aml.exec-predictor/1","command":["python3","predict.py"]}
//
// The command runs in the artifact directory (passed as an absolute path)
// through the caller's [ExecPredictFunc]. Optional "history", "horizon", "xCols", "uCols" and
// "yCols" are checked against the dataset when present (uCols is the u
// array's width: max(1, controls), or 0 for static datasets).
type ExecPredictor struct {
	Format  string   `json:"format"`
	Command []string `json:"command"`
	History *int     `json:"history,omitempty"`
	Horizon *int     `json:"horizon,omitempty"`
	XCols   *int     `json:"xCols,omitempty"`
	UCols   *int     `json:"uCols,omitempty"`
	YCols   *int     `json:"yCols,omitempty"`
}

type execPredictor struct {
	d       dataset.Dims
	dir     string
	command []string
	run     ExecPredictFunc
	timeout time.Duration
}

func loadExec(b []byte, dir string, d dataset.Dims, opts LoadOptions) (Predictor, error) {
	var ej ExecPredictor
	if err := decode(b, &ej); err != nil {
		return nil, err
	}
	var ps problems
	if len(ej.Command) == 0 {
		ps.add("command", "required: the program and its arguments, e.g. [\"python3\", \"predict.py\"]")
	}
	for i, a := range ej.Command {
		if strings.TrimSpace(a) == "" || strings.ContainsRune(a, 0) {
			ps.add(sprintf("command[%d]", i), "empty or contains NUL")
		}
	}
	opt := func(name string, v *int, want int) {
		if v != nil && *v != want {
			ps.add(name, "%d, the dataset has %d", *v, want)
		}
	}
	opt("history", ej.History, d.H)
	opt("horizon", ej.Horizon, d.F)
	opt("xCols", ej.XCols, d.XCols)
	opt("uCols", ej.UCols, d.UCols)
	opt("yCols", ej.YCols, d.YCols)
	if len(ps) > 0 {
		return nil, ps.err(FileName + " (" + FormatExecPredictor + ") is invalid")
	}
	if opts.ExecPredict == nil {
		return nil, invalid(FileName+": format", "%s artifacts cannot be run here (no executable runner configured)", FormatExecPredictor)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, invalid("artifact", "cannot resolve %s: %v", dir, err)
	}
	t := opts.ExecTimeout
	if t <= 0 {
		t = DefaultExecTimeout
	}
	return &execPredictor{d: d, dir: abs, command: append([]string(nil), ej.Command...), run: opts.ExecPredict, timeout: t}, nil
}

func (p *execPredictor) Format() string { return FormatExecPredictor }
func (p *execPredictor) Horizon() int   { return p.d.F }

func (p *execPredictor) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	if err := checkBatch(p.d, x, u, n); err != nil {
		return nil, err
	}
	if n == 0 {
		return []float32{}, nil
	}
	d := p.d
	out, err := p.run(ctx, p.command, p.dir, x, u, n, d.H, d.F, d.XCols, d.UCols, d.YCols, p.timeout)
	if err != nil {
		return nil, err
	}
	if len(out) != n*d.YLen() {
		return nil, invalid("prediction", "the executable predictor returned %d values for %d windows, need %d ([n,F,nTgt] = [%d,%d,%d])",
			len(out), n, n*d.YLen(), n, d.F, d.YCols)
	}
	return out, nil
}
