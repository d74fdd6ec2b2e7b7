package trainers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/polynomial"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// FormatOE is the artifact format of output_error@1.
const FormatOE = "aml.oe/1"

// OutputError is output_error@1: one output-error model per target
// (internal/ident/polynomial: y = Σ B_i/F u_i(k − nk_i) + c + e, the
// noise at the output), fitted by prediction-error minimisation on the
// train runs' NaN-free segments. Use it when the disturbance is
// measurement noise rather than a process disturbance filtered by the
// dynamics — there ARX is biased and OE is not.
type OutputError struct{}

func (OutputError) Ref() string           { return "output_error@1" }
func (OutputError) HasTrainingStep() bool { return true }

type oeParams struct {
	NF            int   `json:"nf" jsonschema:"poles (order of the shared denominator F)" param:"default=2;min=1;max=10"`
	NB            int   `json:"nb" jsonschema:"numerator coefficients per input" param:"default=2;min=1;max=20"`
	NK            []int `json:"nk" jsonschema:"input delays in steps, one per control in the dataset's order (default 1 each)" param:"itemMin=0"`
	Physics       any   `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"`
	PhysicsSha256 any   `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
}

type oeOutputJSON struct {
	Output         string      `json:"output"`
	NK             []int       `json:"nk"`
	F              []float64   `json:"f"`
	B              [][]float64 `json:"b"`
	C              float64     `json:"c"`
	Cov            [][]float64 `json:"cov,omitempty"`
	Sigma2         float64     `json:"sigma2"`
	SpectralRadius float64     `json:"spectralRadius"`
	Cost           float64     `json:"cost"`
	StartCost      float64     `json:"arxStartCost"`
	Iterations     int         `json:"iterations"`
}

type oeArtifact struct {
	Format  string         `json:"format"`
	Inputs  []string       `json:"inputs"`
	Outputs []string       `json:"outputs"`
	NF      int            `json:"nf"`
	NB      int            `json:"nb"`
	Models  []oeOutputJSON `json:"models"`
}

func (OutputError) Train(ctx context.Context, tc *trainer.TrainContext) error {
	const ref = "output_error@1"
	var p oeParams
	if err := linDecodeParams(tc.Params, &p); err != nil {
		return err
	}
	if p.NF == 0 {
		p.NF = 2
	}
	if p.NB == 0 {
		p.NB = 2
	}
	b := tc.Dataset
	c, err := linColumnsOf(b.Manifest, ref)
	if err != nil {
		return err
	}
	if p.NK == nil {
		p.NK = make([]int, len(c.inputs))
		for i := range p.NK {
			p.NK[i] = 1
		}
	}
	if len(p.NK) != len(c.inputs) {
		return fmt.Errorf("params: nk has %d delays for %d controls (%v)", len(p.NK), len(c.inputs), c.inputs)
	}
	o := polynomial.OEOrders{NF: p.NF, NB: p.NB, NK: p.NK}
	lag := p.NF
	for _, k := range p.NK {
		lag = max(lag, k+p.NB-1)
	}
	if H := b.Manifest.HistorySteps; lag > H {
		return fmt.Errorf("params: the model needs %d past steps, the dataset's history is %d (a window could not start it)", lag, H)
	}
	linProgress(tc, 0.05, "reading runs")
	runs, err := linReadRuns(b, c, b.Manifest.Split.Train.RunIDs)
	if err != nil {
		return err
	}
	var segs linSegments
	for _, r := range runs {
		segs.add(r, 0, len(r.y), lag+10)
	}
	if len(segs.y) == 0 {
		return errors.New("no NaN-free train segment is long enough")
	}
	art := &oeArtifact{Format: FormatOE, Inputs: c.inputs, Outputs: c.outputs, NF: p.NF, NB: p.NB}
	for k, name := range c.outputs {
		linProgress(tc, 0.1+0.8*float64(k)/float64(len(c.outputs)), "fitting "+name)
		ys := make([][]float64, len(segs.y))
		for s, seg := range segs.y {
			ys[s] = make([]float64, len(seg))
			for t, row := range seg {
				ys[s][t] = row[k]
			}
		}
		m, err := polynomial.FitOE(ctx, ys, segs.u, o)
		if err != nil {
			return fmt.Errorf("output %s: %w", name, err)
		}
		oj := oeOutputJSON{Output: name, NK: p.NK, F: m.F, B: m.B, C: m.C, Sigma2: m.Sigma2, SpectralRadius: m.SpectralRadius,
			Cost: m.Cost, StartCost: m.ARXCost, Iterations: m.Iterations}
		if m.Cov != nil {
			n := m.Cov.SymmetricDim()
			for i := 0; i < n; i++ {
				row := make([]float64, n)
				for j := range row {
					row[j] = m.Cov.At(i, j)
				}
				oj.Cov = append(oj.Cov, row)
			}
		}
		art.Models = append(art.Models, oj)
	}
	linProgress(tc, 0.95, "writing")
	if err := writeJSON(filepath.Join(tc.ArtifactsDir, model.FileName), art); err != nil {
		return fmt.Errorf("write the model (non-finite parameters?): %w", err)
	}
	return nil
}

// oePredictor predicts windows and runs with one OE model per target.
type oePredictor struct {
	d      dataset.Dims
	models []*polynomial.OE // dataset target order
	xIn    []int            // AllNodes column of each input
	uIn    []int            // controls column of each input
	xOut   []int            // AllNodes column of each target
}

func loadOE(b []byte, _ string, man *dataset.Manifest) (model.Predictor, error) {
	var a oeArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	if man.Kind != dataset.KindDynamic {
		return nil, model.Invalid("format", "%s predicts windows of a dynamic dataset", FormatOE)
	}
	p := &oePredictor{d: man.Dims()}
	ctrl, all := map[string]int{}, map[string]int{}
	for i, n := range man.Controls {
		ctrl[n] = i
	}
	for j, n := range man.AllNodes {
		all[n] = j
	}
	for _, n := range a.Inputs {
		i, ok := ctrl[n]
		if !ok {
			return nil, model.Invalid("inputs", "model input %s is not a control of the dataset", n)
		}
		p.uIn, p.xIn = append(p.uIn, i), append(p.xIn, all[n])
	}
	byName := map[string]oeOutputJSON{}
	for _, m := range a.Models {
		byName[m.Output] = m
	}
	for _, t := range man.Targets {
		m, ok := byName[t]
		if !ok {
			return nil, model.Invalid("models", "no model of target %s", t)
		}
		if len(m.F) != a.NF || len(m.B) != len(a.Inputs) || len(m.NK) != len(a.Inputs) {
			return nil, model.Invalid("models", "model of %s: %d poles, %d numerators, %d delays for nf %d and %d inputs", t, len(m.F), len(m.B), len(m.NK), a.NF, len(a.Inputs))
		}
		for _, row := range m.B {
			if len(row) != a.NB {
				return nil, model.Invalid("models", "model of %s: a numerator of %d coefficients, nb %d", t, len(row), a.NB)
			}
		}
		p.models = append(p.models, &polynomial.OE{Orders: polynomial.OEOrders{NF: a.NF, NB: a.NB, NK: m.NK}, F: m.F, B: m.B, C: m.C})
		p.xOut = append(p.xOut, all[t])
	}
	return p, nil
}

func (p *oePredictor) Format() string { return FormatOE }

// Poles are every target model's poles (eval.PoleReporter: the stability
// gate G7b).
func (p *oePredictor) Poles() []complex128 {
	var out []complex128
	for _, m := range p.models {
		out = append(out, m.Poles()...)
	}
	return out
}
func (p *oePredictor) Horizon() int { return p.d.F }

// PredictBatch starts each model from the window's H measured outputs and
// simulates the F future steps with the window's controls.
func (p *oePredictor) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	if err := model.CheckBatch(p.d, x, u, n); err != nil {
		return nil, err
	}
	H, F, nAll, uc, nT := p.d.H, p.d.F, p.d.XCols, p.d.UCols, p.d.YCols
	out := make([]float32, 0, n*F*nT)
	us := make([][]float64, H+F)
	for k := range us {
		us[k] = make([]float64, len(p.xIn))
	}
	y0 := make([]float64, H)
	sims := make([][]float64, nT)
	for w := 0; w < n; w++ {
		if w%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		xw, uw := x[w*H*nAll:(w+1)*H*nAll], u[w*F*uc:(w+1)*F*uc]
		for k := 0; k < H; k++ {
			for i, j := range p.xIn {
				us[k][i] = float64(xw[k*nAll+j])
			}
		}
		for f := 0; f < F; f++ {
			for i, j := range p.uIn {
				us[H+f][i] = float64(uw[f*uc+j])
			}
		}
		for t, m := range p.models {
			for k := 0; k < H; k++ {
				y0[k] = float64(xw[k*nAll+p.xOut[t]])
			}
			sims[t] = m.Simulate(us, y0)
		}
		for f := 0; f < F; f++ {
			for t := range p.models {
				out = append(out, float32(sims[t][H+f]))
			}
		}
	}
	return out, nil
}

// SimulateRun implements eval.RunSimulator: each model started from the
// first nInit measured outputs and simulated over the run.
func (p *oePredictor) SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error) {
	if nInit < 1 {
		return nil, fmt.Errorf("SimulateRun: nInit %d: an OE model starts from at least one measured output", nInit)
	}
	tgt := make([]int, len(p.models))
	for t := range tgt {
		tgt[t] = t
	}
	u, y, err := runRows(inputs, outputs, nInit, p.d.NCtrl, p.d.YCols, p.uIn, tgt)
	if err != nil {
		return nil, err
	}
	res := make([][]float64, len(inputs))
	for k := range res {
		res[k] = make([]float64, len(p.models))
	}
	for t, m := range p.models {
		y0 := make([]float64, nInit)
		for k := range y0 {
			y0[k] = y[k][t]
		}
		for k, v := range m.Simulate(u, y0) {
			res[k][t] = v
		}
	}
	return res, nil
}

var oeSchema = sync.OnceValue(trainer.MustParamSchema[oeParams])

var _ trainer.Described = OutputError{}

func (OutputError) Summary() string {
	return "output-error model per target (shared denominator, per-input delays) by prediction-error minimisation from an ARX start, with parameter covariance"
}
func (OutputError) Formats() []string               { return []string{FormatOE} }
func (OutputError) ParamSchema() *jsonschema.Schema { return oeSchema() }
