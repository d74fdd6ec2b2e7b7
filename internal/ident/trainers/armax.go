package trainers

// Native polynomial trainers with a noise model: armax@1 (format
// aml.armax/1) and box_jenkins@1 (aml.bj/1), one model per target, trained
// and predicted as output_error@1 (poly.go).

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/polynomial"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// Model formats of armax@1 and box_jenkins@1.
const (
	FormatARMAX = "aml.armax/1"
	FormatBJ    = "aml.bj/1"
)

// ARMAX is armax@1: per target A(q) y = Σ_i B_i(q) u_i(k − nk_i) + d +
// C(q) e (internal/ident/polynomial), by prediction-error minimisation
// from the least-squares ARX start, C kept minimum phase. Use it when the
// disturbance enters through the dynamics but is not white (ARX's
// residuals then show a moving average). Windows are predicted k steps
// ahead (the noise estimated over the history), runs likewise from their
// first rows.
type ARMAX struct{}

func (ARMAX) Ref() string           { return "armax@1" }
func (ARMAX) HasTrainingStep() bool { return true }

type armaxParams struct {
	NA            int    `json:"na" jsonschema:"poles (order of A)" param:"default=2;min=1;max=10"`
	NB            int    `json:"nb" jsonschema:"numerator coefficients per input" param:"default=2;min=1;max=20"`
	NC            int    `json:"nc" jsonschema:"order of the noise polynomial C" param:"default=1;min=1;max=10"`
	NK            []int  `json:"nk" jsonschema:"input delays in steps, one per control in the dataset's order (default 1 each)" param:"itemMin=0"`
	Detrend       string `json:"detrend" jsonschema:"trend removed from every input and output before the fit and added back at prediction: none, mean, or linear (level + slope per step of the run, estimated on the train runs)" param:"default=\"none\";enum=none|mean|linear"`
	Physics       any    `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"`
	PhysicsSha256 any    `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
}

// polyFitJSON is what a polynomial fit reports beside its coefficients:
// every parameter with its standard error and 95 % interval, their
// covariance (rows and columns in the order of params), the variance of
// the prediction errors and the cost of the start and of the fit.
type polyFitJSON struct {
	Params     []procParamJSON `json:"params"`
	Cov        [][]float64     `json:"cov,omitempty"`
	Sigma2     float64         `json:"sigma2"`
	Cost       float64         `json:"cost"`
	StartCost  float64         `json:"startCost"`
	Iterations int             `json:"iterations"`
}

type armaxOutputJSON struct {
	Output string      `json:"output"`
	NK     []int       `json:"nk"`
	A      []float64   `json:"a"`
	B      [][]float64 `json:"b"`
	C      []float64   `json:"c"`
	Offset float64     `json:"offset"`
	polyFitJSON
}

type armaxArtifact struct {
	Format  string            `json:"format"`
	Inputs  []string          `json:"inputs"`
	Outputs []string          `json:"outputs"`
	NA      int               `json:"na"`
	NB      int               `json:"nb"`
	NC      int               `json:"nc"`
	Models  []armaxOutputJSON `json:"models"`
	Detrend *linTrend         `json:"detrend,omitempty"` // as aml.oe/1
}

// polyTheta is a parameter vector: den, the numerators row by row, rest.
func polyTheta(den []float64, b [][]float64, rest ...[]float64) []float64 {
	th := append([]float64(nil), den...)
	for _, row := range b {
		th = append(th, row...)
	}
	for _, r := range rest {
		th = append(th, r...)
	}
	return th
}

// polyWrite writes a polynomial trainer's artifact.
func polyWrite(tc *trainer.TrainContext, art any) error {
	if err := writeJSON(filepath.Join(tc.ArtifactsDir, model.FileName), art); err != nil {
		return fmt.Errorf("write the model (non-finite parameters?): %w", err)
	}
	return nil
}

// polyBNames name the numerator coefficients b[input]0 … per input.
func polyBNames(inputs []string, nb int) []string {
	var out []string
	for _, in := range inputs {
		out = append(out, polyNames("b["+in+"]", 0, nb)...)
	}
	return out
}

// polyLag is the largest lag of orders n… and nk_i + nb − 1.
func polyLag(nb int, nk []int, n ...int) int {
	lag := 1
	for _, v := range n {
		lag = max(lag, v)
	}
	for _, k := range nk {
		lag = max(lag, k+nb-1)
	}
	return lag
}

func (ARMAX) Train(ctx context.Context, tc *trainer.TrainContext) error {
	var p armaxParams
	if err := linDecodeParams(tc.Params, &p); err != nil {
		return err
	}
	for _, v := range []*int{&p.NA, &p.NB} {
		if *v == 0 {
			*v = 2
		}
	}
	if p.NC == 0 {
		p.NC = 1
	}
	if p.NA < 1 || p.NB < 1 || p.NC < 1 {
		return fmt.Errorf("params: orders na %d, nb %d, nc %d must be at least 1", p.NA, p.NB, p.NC)
	}
	c, err := linColumnsOf(tc.Dataset.Manifest, "armax@1")
	if err != nil {
		return err
	}
	if p.NK, err = polyDelays(p.NK, c); err != nil {
		return err
	}
	names := append(append(append(polyNames("a", 1, p.NA), polyBNames(c.inputs, p.NB)...), polyNames("c", 1, p.NC)...), "offset")
	art := &armaxArtifact{Format: FormatARMAX, Inputs: c.inputs, Outputs: c.outputs, NA: p.NA, NB: p.NB, NC: p.NC}
	art.Detrend, err = polyTrain(ctx, tc, c, polyLag(p.NB, p.NK, p.NA, p.NC), p.Detrend, func(ctx context.Context, name string, ys [][]float64, us [][][]float64) error {
		m, err := polynomial.FitARMAX(ctx, ys, us, p.NA, p.NB, p.NC, p.NK)
		if err != nil {
			return err
		}
		th := polyTheta(m.A, m.B, m.C, []float64{m.D})
		art.Models = append(art.Models, armaxOutputJSON{Output: name, NK: p.NK, A: m.A, B: m.B, C: m.C, Offset: m.D,
			polyFitJSON: polyFitJSON{Params: polyParams(names, th, m.Cov), Cov: polyCov(m.Cov), Sigma2: m.Sigma2, Cost: m.Cost, StartCost: m.ARXCost, Iterations: m.Iterations}})
		return nil
	})
	if err != nil {
		return err
	}
	return polyWrite(tc, art)
}

// polyCheckShape checks a loaded model's coefficient counts: got[i] must be
// want[i] (named what[i]), every numerator row nb long.
func polyCheckShape(output string, b [][]float64, nb int, what []string, got, want []int) error {
	for i := range what {
		if got[i] != want[i] {
			return model.Invalid("models", "model of %s: %d %s, want %d", output, got[i], what[i], want[i])
		}
	}
	return polyCheckNumerators(output, b, nb)
}

// polyCheckNumerators checks that every numerator of a loaded model has
// nb coefficients.
func polyCheckNumerators(output string, b [][]float64, nb int) error {
	for _, row := range b {
		if len(row) != nb {
			return model.Invalid("models", "model of %s: a numerator of %d coefficients, nb %d", output, len(row), nb)
		}
	}
	return nil
}

func loadARMAX(b []byte, _ string, man *dataset.Manifest) (model.Predictor, error) {
	var a armaxArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	byName := map[string]polyModel{}
	for _, m := range a.Models {
		if err := polyCheckShape(m.Output, m.B, a.NB, []string{"a coefficients", "numerators", "delays", "c coefficients"},
			[]int{len(m.A), len(m.B), len(m.NK), len(m.C)}, []int{a.NA, len(a.Inputs), len(a.Inputs), a.NC}); err != nil {
			return nil, err
		}
		byName[m.Output] = &polynomial.ARMAX{NA: a.NA, NB: a.NB, NC: a.NC, NK: m.NK, A: m.A, B: m.B, C: m.C, D: m.Offset}
	}
	return newPolyPredictor(FormatARMAX, man, a.Inputs, a.Outputs, byName, a.Detrend)
}

var armaxSchema = sync.OnceValue(trainer.MustParamSchema[armaxParams])

var _ trainer.Described = ARMAX{}

func (ARMAX) Summary() string {
	return "ARMAX model per target (noise through the dynamics with a moving average C, per-input delays) by prediction-error minimisation from an ARX start, with parameter covariance and intervals"
}
func (ARMAX) Formats() []string               { return []string{FormatARMAX} }
func (ARMAX) ParamSchema() *jsonschema.Schema { return armaxSchema() }

// BoxJenkins is box_jenkins@1: per target y = Σ_i B_i(q)/F(q) u_i(k −
// nk_i) + c + C(q)/D(q) e (internal/ident/polynomial), by
// prediction-error minimisation from the output-error fit and an ARMA
// model of its residuals, F stable and C, D minimum phase. Use it when the
// disturbance is coloured and independent of the dynamics (OE's residuals
// are then not white and its one-step prediction is poor).
type BoxJenkins struct{}

func (BoxJenkins) Ref() string           { return "box_jenkins@1" }
func (BoxJenkins) HasTrainingStep() bool { return true }

type bjParams struct {
	NF            int    `json:"nf" jsonschema:"poles of the dynamics (order of F)" param:"default=2;min=1;max=10"`
	NB            int    `json:"nb" jsonschema:"numerator coefficients per input" param:"default=2;min=1;max=20"`
	NC            *int   `json:"nc" jsonschema:"order of the noise numerator C" param:"default=1;min=0;max=10"`
	ND            int    `json:"nd" jsonschema:"order of the noise denominator D" param:"default=1;min=1;max=10"`
	NK            []int  `json:"nk" jsonschema:"input delays in steps, one per control in the dataset's order (default 1 each)" param:"itemMin=0"`
	Detrend       string `json:"detrend" jsonschema:"trend removed from every input and output before the fit and added back at prediction: none, mean, or linear (level + slope per step of the run, estimated on the train runs)" param:"default=\"none\";enum=none|mean|linear"`
	Physics       any    `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"`
	PhysicsSha256 any    `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
}

type bjOutputJSON struct {
	Output         string      `json:"output"`
	NK             []int       `json:"nk"`
	F              []float64   `json:"f"`
	B              [][]float64 `json:"b"`
	C              []float64   `json:"c"`
	D              []float64   `json:"d"`
	Offset         float64     `json:"offset"`
	SpectralRadius float64     `json:"spectralRadius"`
	CMaxRoot       float64     `json:"cMaxRoot"`
	DMaxRoot       float64     `json:"dMaxRoot"`
	OECost         float64     `json:"oeCost"`
	polyFitJSON
}

type bjArtifact struct {
	Format  string         `json:"format"`
	Inputs  []string       `json:"inputs"`
	Outputs []string       `json:"outputs"`
	NF      int            `json:"nf"`
	NB      int            `json:"nb"`
	NC      int            `json:"nc"`
	ND      int            `json:"nd"`
	Models  []bjOutputJSON `json:"models"`
	Detrend *linTrend      `json:"detrend,omitempty"` // as aml.oe/1
}

func (BoxJenkins) Train(ctx context.Context, tc *trainer.TrainContext) error {
	var p bjParams
	if err := linDecodeParams(tc.Params, &p); err != nil {
		return err
	}
	for _, v := range []*int{&p.NF, &p.NB} {
		if *v == 0 {
			*v = 2
		}
	}
	nc := 1
	if p.NC != nil {
		nc = *p.NC
	}
	if p.ND == 0 {
		p.ND = 1
	}
	if p.NF < 1 || p.NB < 1 || nc < 0 || p.ND < 1 {
		return fmt.Errorf("params: orders nf %d, nb %d, nd %d must be at least 1, nc %d at least 0", p.NF, p.NB, p.ND, nc)
	}
	c, err := linColumnsOf(tc.Dataset.Manifest, "box_jenkins@1")
	if err != nil {
		return err
	}
	if p.NK, err = polyDelays(p.NK, c); err != nil {
		return err
	}
	o := polynomial.OEOrders{NF: p.NF, NB: p.NB, NK: p.NK}
	names := append(append(append(append(polyNames("f", 1, p.NF), polyBNames(c.inputs, p.NB)...), polyNames("c", 1, nc)...), polyNames("d", 1, p.ND)...), "offset")
	art := &bjArtifact{Format: FormatBJ, Inputs: c.inputs, Outputs: c.outputs, NF: p.NF, NB: p.NB, NC: nc, ND: p.ND}
	art.Detrend, err = polyTrain(ctx, tc, c, polyLag(p.NB, p.NK, p.NF, nc, p.ND), p.Detrend, func(ctx context.Context, name string, ys [][]float64, us [][][]float64) error {
		m, err := polynomial.FitBJ(ctx, ys, us, o, nc, p.ND)
		if err != nil {
			return err
		}
		th := polyTheta(m.F, m.B, m.C, m.D, []float64{m.Offset})
		art.Models = append(art.Models, bjOutputJSON{Output: name, NK: p.NK, F: m.F, B: m.B, C: m.C, D: m.D, Offset: m.Offset,
			SpectralRadius: m.SpectralRadius, CMaxRoot: m.CMaxRoot, DMaxRoot: m.DMaxRoot, OECost: m.OECost,
			polyFitJSON: polyFitJSON{Params: polyParams(names, th, m.Cov), Cov: polyCov(m.Cov), Sigma2: m.Sigma2, Cost: m.Cost, StartCost: m.StartCost, Iterations: m.Iterations}})
		return nil
	})
	if err != nil {
		return err
	}
	return polyWrite(tc, art)
}

func loadBJ(b []byte, _ string, man *dataset.Manifest) (model.Predictor, error) {
	var a bjArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	byName := map[string]polyModel{}
	for _, m := range a.Models {
		if err := polyCheckShape(m.Output, m.B, a.NB, []string{"f coefficients", "numerators", "delays", "c coefficients", "d coefficients"},
			[]int{len(m.F), len(m.B), len(m.NK), len(m.C), len(m.D)}, []int{a.NF, len(a.Inputs), len(a.Inputs), a.NC, a.ND}); err != nil {
			return nil, err
		}
		byName[m.Output] = &polynomial.BJ{Orders: polynomial.OEOrders{NF: a.NF, NB: a.NB, NK: m.NK}, NC: a.NC, ND: a.ND, F: m.F, B: m.B, C: m.C, D: m.D, Offset: m.Offset}
	}
	return newPolyPredictor(FormatBJ, man, a.Inputs, a.Outputs, byName, a.Detrend)
}

var bjSchema = sync.OnceValue(trainer.MustParamSchema[bjParams])

var _ trainer.Described = BoxJenkins{}

func (BoxJenkins) Summary() string {
	return "Box–Jenkins model per target (output-error dynamics plus a C/D noise model, per-input delays) by prediction-error minimisation from an OE start, with parameter covariance and intervals"
}
func (BoxJenkins) Formats() []string               { return []string{FormatBJ} }
func (BoxJenkins) ParamSchema() *jsonschema.Schema { return bjSchema() }
