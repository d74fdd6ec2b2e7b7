package trainers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/static"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// FormatStatic is the artifact of static_response@1.
const FormatStatic = "aml.static-response/1"

// StaticResponse ("static_response@1") fits a ridge-regularised polynomial
// response surface (degree and penalty chosen by cross-validation on the
// train rows only) and keeps a Gaussian process instead if it wins on that
// cross-validation. For static_response datasets (one row per cycle).
//
// Params: degrees ([1,2,3]), lambdas (log grid), folds (5), gp (true),
// interactions (true).
type StaticResponse struct{}

func (StaticResponse) Ref() string           { return "static_response@1" }
func (StaticResponse) HasTrainingStep() bool { return true }

type staticParams struct {
	Degrees       []int     `json:"degrees" jsonschema:"candidate polynomial degrees (chosen by cross-validation)" param:"default=[1,2,3];itemMin=0;itemMax=10;maxItems=11"`
	Lambdas       []float64 `json:"lambdas" jsonschema:"candidate ridge penalties (default: a log grid)" param:"itemMin=0;maxItems=100"`
	Folds         int       `json:"folds" jsonschema:"cross-validation folds (0: the default)" param:"default=5;min=0"`
	GP            *bool     `json:"gp" jsonschema:"also fit a Gaussian process and keep it if it wins the cross-validation" param:"default=true"`
	Interactions  *bool     `json:"interactions" jsonschema:"polynomial cross terms between inputs" param:"default=true"`
	Physics       any       `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"`
	PhysicsSha256 any       `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
}

type staticArtifact struct {
	Format    string        `json:"format"`
	Inputs    []string      `json:"inputs"`
	Outputs   []string      `json:"outputs"`
	Model     *static.Model `json:"model"`
	Chosen    any           `json:"chosen,omitempty"`
	TrainRows int           `json:"trainRows"`
}

func (StaticResponse) Train(ctx context.Context, tc *trainer.TrainContext) error {
	b := tc.Dataset
	m := b.Manifest
	if m.Kind != dataset.KindStatic {
		return fmt.Errorf("static_response@1 needs a static_response dataset (one row per cycle); this one is %s", m.Kind)
	}
	var p staticParams
	if len(tc.Params) > 0 {
		if err := json.Unmarshal(tc.Params, &p); err != nil {
			return fmt.Errorf("params: %w", err)
		}
	}
	opt := static.DefaultOptions()
	opt.Seed = uint64(tc.Seed)
	if len(p.Degrees) > 0 {
		opt.Degrees = p.Degrees
	}
	if len(p.Lambdas) > 0 {
		opt.Lambdas = p.Lambdas
	}
	if p.Folds > 0 {
		opt.Folds = p.Folds
	}
	if p.GP != nil {
		opt.GP = *p.GP
	}
	if p.Interactions != nil {
		opt.Interactions = *p.Interactions
	}
	lo, hi := b.Split("train")
	d := b.Dims()
	X := make([][]float64, 0, hi-lo)
	Y := make([][]float64, 0, hi-lo)
	for n := lo; n < hi; n++ {
		x, _, y := b.Window(n)
		X, Y = append(X, f64(x)), append(Y, f64(y))
	}
	_ = d
	tc.Progress(0.1, "fitting")
	mod, sel, err := static.Fit(X, Y, opt)
	if err != nil {
		return err
	}
	tc.Progress(0.9, "writing")
	art := staticArtifact{Format: FormatStatic, Inputs: m.Inputs, Outputs: m.Targets, Model: mod, Chosen: sel.ChosenCandidate(), TrainRows: len(X)}
	return writeJSON(filepath.Join(tc.ArtifactsDir, model.FileName), art)
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

type staticPredictor struct {
	d dataset.Dims
	m *static.Model
}

func loadStatic(b []byte, dir string, man *dataset.Manifest) (model.Predictor, error) {
	var a staticArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	d := man.Dims()
	if man.Kind != dataset.KindStatic {
		return nil, model.Invalid("format", "%s predicts one row per cycle; the dataset is %s", FormatStatic, man.Kind)
	}
	if a.Model == nil || len(a.Inputs) != d.XCols || len(a.Outputs) != d.YCols {
		return nil, model.Invalid("inputs", "the model has %d inputs and %d outputs, the dataset %d and %d", len(a.Inputs), len(a.Outputs), d.XCols, d.YCols)
	}
	return &staticPredictor{d: d, m: a.Model}, nil
}

func (p *staticPredictor) Format() string { return FormatStatic }
func (p *staticPredictor) Horizon() int   { return 1 }

func (p *staticPredictor) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	if err := model.CheckBatch(p.d, x, u, n); err != nil {
		return nil, err
	}
	X := make([][]float64, n)
	for i := range X {
		X[i] = f64(x[i*p.d.XCols : (i+1)*p.d.XCols])
	}
	Y := p.m.Predict(X)
	out := make([]float32, 0, n*p.d.YCols)
	for _, row := range Y {
		for _, v := range row {
			out = append(out, float32(v))
		}
	}
	return out, nil
}
