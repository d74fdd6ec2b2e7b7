package trainers

import (
	"context"
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
	NF            int    `json:"nf" jsonschema:"poles (order of the shared denominator F)" param:"default=2;min=1;max=10"`
	NB            int    `json:"nb" jsonschema:"numerator coefficients per input" param:"default=2;min=1;max=20"`
	NK            []int  `json:"nk" jsonschema:"input delays in steps, one per control in the dataset's order (default 1 each)" param:"itemMin=0"`
	Detrend       string `json:"detrend" jsonschema:"trend removed from every input and output before the fit and added back at prediction: none, mean, or linear (level + slope per step of the run, estimated on the train runs)" param:"default=\"none\";enum=none|mean|linear"`
	Physics       any    `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"`
	PhysicsSha256 any    `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
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
	// Detrend, when present, is the trend removed before the fit (the
	// models are of the detrended data; predictions get it back).
	Detrend *linTrend `json:"detrend,omitempty"`
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
	c, err := linColumnsOf(tc.Dataset.Manifest, ref)
	if err != nil {
		return err
	}
	if p.NK, err = polyDelays(p.NK, c); err != nil {
		return err
	}
	o := polynomial.OEOrders{NF: p.NF, NB: p.NB, NK: p.NK}
	art := &oeArtifact{Format: FormatOE, Inputs: c.inputs, Outputs: c.outputs, NF: p.NF, NB: p.NB}
	art.Detrend, err = polyTrain(ctx, tc, c, polyLag(p.NB, p.NK, p.NF), p.Detrend, func(ctx context.Context, name string, ys [][]float64, us [][][]float64) error {
		m, err := polynomial.FitOE(ctx, ys, us, o)
		if err != nil {
			return err
		}
		art.Models = append(art.Models, oeOutputJSON{Output: name, NK: p.NK, F: m.F, B: m.B, C: m.C, Cov: polyCov(m.Cov), Sigma2: m.Sigma2,
			SpectralRadius: m.SpectralRadius, Cost: m.Cost, StartCost: m.ARXCost, Iterations: m.Iterations})
		return nil
	})
	if err != nil {
		return err
	}
	return polyWrite(tc, art)
}

func loadOE(b []byte, _ string, man *dataset.Manifest) (model.Predictor, error) {
	var a oeArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	byName := map[string]polyModel{}
	for _, m := range a.Models {
		if len(m.F) != a.NF || len(m.B) != len(a.Inputs) || len(m.NK) != len(a.Inputs) {
			return nil, model.Invalid("models", "model of %s: %d poles, %d numerators, %d delays for nf %d and %d inputs", m.Output, len(m.F), len(m.B), len(m.NK), a.NF, len(a.Inputs))
		}
		if err := polyCheckNumerators(m.Output, m.B, a.NB); err != nil {
			return nil, err
		}
		byName[m.Output] = &polynomial.OE{Orders: polynomial.OEOrders{NF: a.NF, NB: a.NB, NK: m.NK}, F: m.F, B: m.B, C: m.C}
	}
	return newPolyPredictor(FormatOE, man, a.Inputs, a.Outputs, byName, a.Detrend)
}

var oeSchema = sync.OnceValue(trainer.MustParamSchema[oeParams])

var _ trainer.Described = OutputError{}

func (OutputError) Summary() string {
	return "output-error model per target (shared denominator, per-input delays) by prediction-error minimisation from an ARX start, with parameter covariance"
}
func (OutputError) Formats() []string               { return []string{FormatOE} }
func (OutputError) ParamSchema() *jsonschema.Schema { return oeSchema() }
