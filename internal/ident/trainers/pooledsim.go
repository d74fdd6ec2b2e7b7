package trainers

import (
	"context"
	"fmt"
	"sync"

	"github.com/aml-project/aml/internal/model"
)

// runSimulator is a model that simulates from measured rows: given the
// controls of every step and the first measured outputs, it returns
// every step's outputs (the measured ones as given). narx.Model and
// nss.Ensemble are both.
type runSimulator interface {
	Simulate(u, y0 [][]float64) [][]float64
}

// pooledSim predicts windows and runs with a model that is not safe for
// concurrent use (it keeps scratch buffers): every call takes a model
// from a pool, built from the artifact when the pool is empty. The
// columns are a linear predictor's.
type pooledSim[M runSimulator] struct {
	cols *linearPredictor
	// build makes a model from the artifact (checked by the loader);
	// what names the model in errors ("a NARX model").
	build func() M
	what  string
	mu    sync.Mutex
	pool  []M
}

func (p *pooledSim[M]) get() M {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.pool); n > 0 {
		m := p.pool[n-1]
		p.pool = p.pool[:n-1]
		return m
	}
	return p.build()
}

func (p *pooledSim[M]) put(m M) {
	p.mu.Lock()
	p.pool = append(p.pool, m)
	p.mu.Unlock()
}

// Horizon is the dataset's F.
func (p *pooledSim[M]) Horizon() int { return p.cols.d.F }

// PredictBatch starts the model from the window's H measured rows and
// simulates the F future steps with the window's controls.
func (p *pooledSim[M]) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	c := p.cols
	if err := model.CheckBatch(c.d, x, u, n); err != nil {
		return nil, err
	}
	m := p.get()
	defer p.put(m)
	H, F, nT := c.d.H, c.d.F, c.d.YCols
	nu, ny := len(c.xIn), len(c.xOut)
	out := make([]float32, 0, n*F*nT)
	us, ys := make([][]float64, H+F), make([][]float64, H)
	for k := range us {
		us[k] = make([]float64, nu)
	}
	for k := range ys {
		ys[k] = make([]float64, ny)
	}
	for w := 0; w < n; w++ {
		if w%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		windowRows(c.d, x, u, w, c.xIn, c.xOut, c.uIn, us, ys)
		sim := m.Simulate(us, ys)
		for f := 0; f < F; f++ {
			for _, o := range c.tgtOut {
				out = append(out, float32(sim[H+f][o]))
			}
		}
	}
	return out, nil
}

// SimulateRun implements eval.RunSimulator: the first nInit outputs are
// returned as given and the rest simulated from the controls (with nInit
// below the model's history, but at least 1, the first input and output
// are held before the first step).
func (p *pooledSim[M]) SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error) {
	c := p.cols
	if nInit < 1 {
		return nil, fmt.Errorf("SimulateRun: nInit %d: %s starts from at least one measured output", nInit, p.what)
	}
	u, y, err := runRows(inputs, outputs, nInit, c.d.NCtrl, c.d.YCols, c.uIn, c.outTgt)
	if err != nil {
		return nil, err
	}
	m := p.get()
	defer p.put(m)
	sim := m.Simulate(u, y)
	res := make([][]float64, len(sim))
	for k, row := range sim {
		res[k] = make([]float64, c.d.YCols)
		for t, o := range c.tgtOut {
			res[k][t] = row[o]
		}
	}
	return res, nil
}
