package trainers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/narx"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// FormatNARX is the artifact format of narx_mlp@1.
const FormatNARX = "aml.narx/1"

// NARXMLP is narx_mlp@1: one NARX model of all targets (internal/ident/narx:
// y(t) = ARX(φ(t)) + MLP(φ(t)), φ the past na outputs and nb inputs from
// delay nk, normalised by the train statistics), the ARX skip term by
// least squares, the MLP trained one step ahead by Adam, the epoch kept
// the best by free-run NRMSE on the last valShare of every train segment
// (the ARX model alone included, so it is never worse there).
type NARXMLP struct{}

func (NARXMLP) Ref() string           { return "narx_mlp@1" }
func (NARXMLP) HasTrainingStep() bool { return true }

type narxParams struct {
	NA            int     `json:"na" jsonschema:"output lags" param:"default=10;min=1;max=100"`
	NB            int     `json:"nb" jsonschema:"input lags (every control)" param:"default=10;min=1;max=100"`
	NK            *int    `json:"nk" jsonschema:"input delay in steps (every control; 0: u(t) acts on y(t))" param:"default=1;min=0;max=100"`
	Hidden        []int   `json:"hidden" jsonschema:"hidden layer sizes (tanh)" param:"default=[32,32];itemMin=1;itemMax=1024;maxItems=8"`
	Epochs        int     `json:"epochs" jsonschema:"maximum epochs of one-step training" param:"default=100;min=1;max=100000"`
	Batch         int     `json:"batch" jsonschema:"minibatch size" param:"default=64;min=1;max=100000"`
	LR            float64 `json:"lr" jsonschema:"Adam learning rate" param:"default=0.001;min=0"`
	Patience      *int    `json:"patience" jsonschema:"stop after this many epochs without a better validation free run (0: never)" param:"default=20;min=0"`
	ValShare      float64 `json:"valShare" jsonschema:"share of the tail of every train segment held out for the epoch choice" param:"default=0.2;min=0;max=0.9"`
	FineTune      *int    `json:"fineTuneEpochs" jsonschema:"epochs of simulation-error training after the one-step epochs (truncated back-propagation through seqLen steps; with a budget the one-step epochs get half of it)" param:"default=20;min=0;max=100000"`
	SeqLen        int     `json:"seqLen" jsonschema:"steps of every simulated subsequence of the fine-tuning" param:"default=40;min=1;max=10000"`
	SeqBatch      int     `json:"seqBatch" jsonschema:"subsequences per minibatch of the fine-tuning" param:"default=16;min=1;max=100000"`
	FineTuneLR    float64 `json:"fineTuneLr" jsonschema:"Adam learning rate of the fine-tuning (0: lr)" param:"default=0;min=0"`
	Seed          *int64  `json:"seed" jsonschema:"random seed of the initialisation and the minibatch order (default: the job's seed)"`
	BudgetSeconds float64 `json:"budgetSeconds" jsonschema:"training-time budget in seconds (0: none); the training stops after the epoch that exceeds it" param:"default=0;min=0"`
	Physics       any     `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"`
	PhysicsSha256 any     `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
}

type narxLayerJSON struct {
	In  int         `json:"in"`
	Out int         `json:"out"`
	W   [][]float64 `json:"w"`
	B   []float64   `json:"b"`
}

type narxArtifact struct {
	Format   string          `json:"format"`
	Inputs   []string        `json:"inputs"`
	Outputs  []string        `json:"outputs"`
	NA       int             `json:"na"`
	NB       int             `json:"nb"`
	NK       int             `json:"nk"`
	UMean    []float64       `json:"uMean"`
	UStd     []float64       `json:"uStd"`
	YMean    []float64       `json:"yMean"`
	YStd     []float64       `json:"yStd"`
	Linear   [][]float64     `json:"linear"` // per output: θ over φ then the intercept (normalised units)
	Layers   []narxLayerJSON `json:"layers"`
	Seed     int64           `json:"seed"`
	Training *narx.Report    `json:"training"`
}

func (NARXMLP) Train(ctx context.Context, tc *trainer.TrainContext) error {
	const ref = "narx_mlp@1"
	var p narxParams
	if err := linDecodeParams(tc.Params, &p); err != nil {
		return err
	}
	cfg := narx.Config{NA: p.NA, NB: p.NB, NK: 1, Hidden: p.Hidden, Epochs: p.Epochs, Batch: p.Batch, LR: p.LR, Patience: 20, ValShare: p.ValShare,
		Budget: time.Duration(p.BudgetSeconds * float64(time.Second))}
	if cfg.NA == 0 {
		cfg.NA = 10
	}
	if cfg.NB == 0 {
		cfg.NB = 10
	}
	if p.NK != nil {
		cfg.NK = *p.NK
	}
	if cfg.Hidden == nil {
		cfg.Hidden = []int{32, 32}
	}
	if cfg.Epochs == 0 {
		cfg.Epochs = 100
	}
	cfg.FineTuneEpochs, cfg.SeqLen, cfg.SeqBatch, cfg.FineTuneLR = 20, p.SeqLen, p.SeqBatch, p.FineTuneLR
	if p.FineTune != nil {
		cfg.FineTuneEpochs = *p.FineTune
	}
	if p.Patience != nil {
		cfg.Patience = *p.Patience
	}
	seed := tc.Seed
	if p.Seed != nil {
		seed = *p.Seed
	}
	cfg.Seed = uint64(seed)
	c, err := linColumnsOf(tc.Dataset.Manifest, ref)
	if err != nil {
		return err
	}
	lag := max(cfg.NA, cfg.NK+cfg.NB-1, 1)
	if H := tc.Dataset.Manifest.HistorySteps; lag > H {
		return fmt.Errorf("params: the model needs %d past steps, the dataset's history is %d (a window could not start it)", lag, H)
	}
	linProgress(tc, 0.02, "reading runs")
	runs, err := linReadRuns(tc.Dataset, c, tc.Dataset.Manifest.Split.Train.RunIDs)
	if err != nil {
		return err
	}
	var segs linSegments
	for _, r := range runs {
		segs.add(r, 0, len(r.y), 5*lag+50)
	}
	if len(segs.y) == 0 {
		return errors.New("no NaN-free train segment is long enough")
	}
	cfg.Progress = func(ep int, loss, val float64) error {
		linProgress(tc, 0.05+0.9*min(1, float64(ep)/float64(cfg.Epochs+cfg.FineTuneEpochs)), fmt.Sprintf("epoch %d/%d: train loss %.4g, validation free-run NRMSE %.4g", ep, cfg.Epochs+cfg.FineTuneEpochs, loss, val))
		return ctx.Err()
	}
	m, rep, err := narx.Fit(ctx, segs.y, segs.u, cfg)
	if err != nil {
		return err
	}
	if tc.Log != nil {
		_, _ = fmt.Fprintf(tc.Log, "narx_mlp: %d one-step epochs (%s), %d fine-tuning epochs (%s), best %d (%s): validation free-run NRMSE %.4g (ARX %.4g)\n", rep.Epochs, rep.Stop, rep.FineTuneEpochs, rep.FineTuneStop, rep.BestEpoch, rep.BestPhase, rep.ValNRMSE, rep.ARXValNRMSE)
	}
	art := &narxArtifact{Format: FormatNARX, Inputs: c.inputs, Outputs: c.outputs, NA: m.NA, NB: m.NB, NK: m.NK,
		UMean: m.UMean, UStd: m.UStd, YMean: m.YMean, YStd: m.YStd, Linear: m.Lin, Seed: seed, Training: rep}
	for _, l := range m.Layers {
		lj := narxLayerJSON{In: l.In, Out: l.Out, B: l.B}
		for j := 0; j < l.Out; j++ {
			lj.W = append(lj.W, l.W[j*l.In:(j+1)*l.In])
		}
		art.Layers = append(art.Layers, lj)
	}
	linProgress(tc, 0.97, "writing")
	return polyWrite(tc, art)
}

func (a *narxArtifact) model() (*narx.Model, error) {
	m := &narx.Model{NA: a.NA, NB: a.NB, NK: a.NK, NY: len(a.Outputs), NU: len(a.Inputs), UMean: a.UMean, UStd: a.UStd, YMean: a.YMean, YStd: a.YStd, Lin: a.Linear}
	for i, lj := range a.Layers {
		if len(lj.W) != lj.Out {
			return nil, model.Invalid("layers", "layer %d: %d weight rows, %d outputs", i, len(lj.W), lj.Out)
		}
		l := narx.Layer{In: lj.In, Out: lj.Out, B: lj.B}
		for j, r := range lj.W {
			if len(r) != lj.In {
				return nil, model.Invalid("layers", "layer %d row %d: %d weights, %d inputs", i, j, len(r), lj.In)
			}
			l.W = append(l.W, r...)
		}
		m.Layers = append(m.Layers, l)
	}
	if err := m.Check(); err != nil {
		return nil, model.Invalid("model", "%v", err)
	}
	return m, nil
}

func loadNARX(b []byte, _ string, man *dataset.Manifest) (model.Predictor, error) {
	var a narxArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	m, err := a.model()
	if err != nil {
		return nil, err
	}
	lp, err := newLinearPredictor(FormatNARX, man, a.Inputs, a.Outputs, m.Lag(), "the NARX model's largest lag")
	if err != nil {
		return nil, err
	}
	return &narxPredictor{pooledSim: pooledSim[*narx.Model]{cols: lp, what: "a NARX model", build: func() *narx.Model { m, _ := a.model(); return m }}, a: &a, historyCols: historyCols[*narx.Start, *narx.Runner]{cols: lp, sim: m, estimator: "narx-history/1"}}, nil
}

// narxPredictor predicts windows and runs with a NARX model (the columns
// as a linear predictor's; pooledSim: a model is not safe for concurrent
// use, so calls take one from a pool).
type narxPredictor struct {
	pooledSim[*narx.Model]
	a *narxArtifact
	// the twin's view (HistoryTwin), over a model only read
	historyCols[*narx.Start, *narx.Runner]
}

func (p *narxPredictor) Format() string { return FormatNARX }

var narxSchema = sync.OnceValue(trainer.MustParamSchema[narxParams])

var _ trainer.Described = NARXMLP{}

func (NARXMLP) Summary() string {
	return "NARX model of all targets: a least-squares ARX skip term plus an MLP residual trained one step ahead by Adam, the epoch kept the best free run on a held-out tail (never worse than the ARX there)"
}
func (NARXMLP) Formats() []string               { return []string{FormatNARX} }
func (NARXMLP) ParamSchema() *jsonschema.Schema { return narxSchema() }
