package trainers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/nss"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// FormatNSS is the artifact format of neural_state_space@1.
const FormatNSS = "aml.nss/1"

// NeuralStateSpace is neural_state_space@1: a neural state-space model
// of all targets (internal/ident/nss: an encoder from the past na outputs
// and nb inputs to the state, x+ = A x + B u + f(x, u), y = C x + D u +
// h(x, u) with MLPs f, h), started from the subspace model, trained on
// the free-run error of subsequences (multiple shooting) by Adam (the
// steps of the linear part and of f scaled by lrLinear and lrTransition), the
// epoch kept the best by free-run NRMSE on the last valShare of every
// train segment (select "tail"; select "record": over every whole train
// segment from its start) — the linear start included, so it is never
// worse there;
// with ensemble > 1 the members of seeds seed, seed+1, … are trained one
// after the other and the model simulates their mean.
type NeuralStateSpace struct{}

func (NeuralStateSpace) Ref() string           { return "neural_state_space@1" }
func (NeuralStateSpace) HasTrainingStep() bool { return true }

type nssParams struct {
	Order         int      `json:"order" jsonschema:"state dimension" param:"default=4;min=1;max=64"`
	NA            int      `json:"na" jsonschema:"past outputs the encoder reads" param:"default=10;min=1;max=100"`
	NB            int      `json:"nb" jsonschema:"past inputs (every control) the encoder reads" param:"default=10;min=1;max=100"`
	Hidden        []int    `json:"hidden" jsonschema:"hidden layer sizes (tanh) of the transition, output and encoder networks" param:"default=[32,32];itemMin=1;itemMax=1024;maxItems=8"`
	Feedthrough   *bool    `json:"feedthrough" jsonschema:"the output depends on the same step's controls (D and the output network read u)" param:"default=true"`
	LinearInit    *bool    `json:"linearInit" jsonschema:"start from the subspace model of the same order (the networks at zero), so the model is never worse than it on the validation tail" param:"default=true"`
	Refine        *bool    `json:"refine" jsonschema:"refine the linear start by prediction error" param:"default=true"`
	Epochs        int      `json:"epochs" jsonschema:"maximum epochs" param:"default=100;min=0;max=100000"`
	SeqLen        int      `json:"seqLen" jsonschema:"steps of every simulated subsequence (truncated back-propagation through time)" param:"default=50;min=1;max=10000"`
	Batch         int      `json:"batch" jsonschema:"subsequences per minibatch" param:"default=16;min=1;max=4096"`
	LR            float64  `json:"lr" jsonschema:"Adam learning rate" param:"default=0.001;min=0"`
	LRLinear      *float64 `json:"lrLinear" jsonschema:"factor on the Adam step of the linear part the subspace start sets (A, B, C, D, the skip connection, and the encoder's linear map); below 1 keeps a good linear start while the networks learn" param:"default=1;exclusiveMin=0"`
	LRTransition  *float64 `json:"lrTransition" jsonschema:"factor on the Adam step of the transition network f" param:"default=1;exclusiveMin=0"`
	Patience      *int     `json:"patience" jsonschema:"stop after this many epochs without a better validation free run (0: never)" param:"default=30;min=0"`
	ValShare      float64  `json:"valShare" jsonschema:"share of the tail of every train segment held out for the epoch choice" param:"default=0.2;min=0;max=0.9"`
	Select        string   `json:"select" jsonschema:"what the epoch kept is chosen on: tail (the free run over the held-out tail of every train segment, from the encoder just before it) or record (the free run over every whole train segment, its tail included, from the encoder at its start: the long-horizon simulation error the subsequences do not see; the tail is still kept out of the gradient)" param:"default=\"tail\";enum=tail|record"`
	Ensemble      int      `json:"ensemble" jsonschema:"members trained from seeds seed, seed+1, …; the model simulates their mean (with a budget every member gets an equal share)" param:"default=1;min=1;max=32"`
	Seed          *int64   `json:"seed" jsonschema:"random seed of the initialisation and the subsequence order (default: the job's seed)"`
	BudgetSeconds float64  `json:"budgetSeconds" jsonschema:"training-time budget in seconds (0: none); the training stops after the epoch that exceeds it" param:"default=0;min=0"`
	Physics       any      `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"`
	PhysicsSha256 any      `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
}

type nssArtifact struct {
	Format      string      `json:"format"`
	Inputs      []string    `json:"inputs"`
	Outputs     []string    `json:"outputs"`
	Order       int         `json:"order"`
	NA          int         `json:"na"`
	NB          int         `json:"nb"`
	Feedthrough bool        `json:"feedthrough"`
	Hidden      []int       `json:"hidden"`
	Members     []nssMember `json:"members"` // the model simulates their mean
}

type nssMember struct {
	UMean    []float64   `json:"uMean"`
	UStd     []float64   `json:"uStd"`
	YMean    []float64   `json:"yMean"`
	YStd     []float64   `json:"yStd"`
	Params   []float64   `json:"params"` // A, B, C, D, E, e0, then the transition, output and encoder networks (internal/ident/nss layout)
	Seed     int64       `json:"seed"`
	Training *nss.Report `json:"training"`
}

func (NeuralStateSpace) Train(ctx context.Context, tc *trainer.TrainContext) error {
	const ref = "neural_state_space@1"
	var p nssParams
	if err := linDecodeParams(tc.Params, &p); err != nil {
		return err
	}
	cfg := nss.Config{Order: p.Order, NA: p.NA, NB: p.NB, Hidden: p.Hidden, Feedthrough: true, LinearInit: true, Refine: true,
		Epochs: p.Epochs, SeqLen: p.SeqLen, Batch: p.Batch, LR: p.LR, Patience: 30, ValShare: p.ValShare, Select: p.Select,
		Budget: time.Duration(p.BudgetSeconds * float64(time.Second))}
	if cfg.Order == 0 {
		cfg.Order = 4
	}
	if cfg.NA == 0 {
		cfg.NA = 10
	}
	if cfg.NB == 0 {
		cfg.NB = 10
	}
	if cfg.Hidden == nil {
		cfg.Hidden = []int{32, 32}
	}
	if p.Feedthrough != nil {
		cfg.Feedthrough = *p.Feedthrough
	}
	if p.LinearInit != nil {
		cfg.LinearInit = *p.LinearInit
	}
	if p.Refine != nil {
		cfg.Refine = *p.Refine
	}
	if p.Patience != nil {
		cfg.Patience = *p.Patience
	}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"lrLinear", p.LRLinear, &cfg.LRLinear}, {"lrTransition", p.LRTransition, &cfg.LRTransition}} {
		*f.dst = 1
		if f.v == nil {
			continue
		}
		if !(*f.v > 0) || math.IsInf(*f.v, 0) {
			return core.FieldErrorf(core.CodeInvalidArgument, "params."+f.name, "params: %s %g, want a factor > 0", f.name, *f.v)
		}
		*f.dst = *f.v
	}
	if cfg.SeqLen == 0 {
		cfg.SeqLen = 50
	}
	seed := tc.Seed
	if p.Seed != nil {
		seed = *p.Seed
	}
	K := max(p.Ensemble, 1)
	cfg.Budget /= time.Duration(K)
	c, err := linColumnsOf(tc.Dataset.Manifest, ref)
	if err != nil {
		return err
	}
	lag := max(cfg.NA, cfg.NB, 1)
	if H := tc.Dataset.Manifest.HistorySteps; lag > H {
		return fmt.Errorf("params: the encoder needs %d past steps, the dataset's history is %d (a window could not start it)", lag, H)
	}
	linProgress(tc, 0.02, "reading runs")
	runs, err := linReadRuns(tc.Dataset, c, tc.Dataset.Manifest.Split.Train.RunIDs)
	if err != nil {
		return err
	}
	var segs linSegments
	for _, r := range runs {
		segs.add(r, 0, len(r.y), 5*lag+cfg.SeqLen)
	}
	if len(segs.y) == 0 {
		return errors.New("no NaN-free train segment is long enough")
	}
	art := &nssArtifact{Format: FormatNSS, Inputs: c.inputs, Outputs: c.outputs, Order: cfg.Order, NA: cfg.NA, NB: cfg.NB, Feedthrough: cfg.Feedthrough, Hidden: cfg.Hidden}
	for k := 0; k < K; k++ {
		cfg.Seed = uint64(seed + int64(k))
		linProgress(tc, 0.04+0.92*float64(k)/float64(K), fmt.Sprintf("member %d/%d: linear initialisation", k+1, K))
		cfg.Progress = func(ep int, loss, val float64) error {
			f := (float64(k) + min(1, float64(ep)/float64(max(cfg.Epochs, 1)))) / float64(K)
			linProgress(tc, 0.05+0.9*f, fmt.Sprintf("member %d/%d, epoch %d/%d: train loss %.4g, validation free-run NRMSE %.4g", k+1, K, ep, cfg.Epochs, loss, val))
			return ctx.Err()
		}
		m, rep, err := nss.Fit(ctx, segs.y, segs.u, cfg)
		if err != nil {
			return err
		}
		if tc.Log != nil {
			_, _ = fmt.Fprintf(tc.Log, "neural_state_space: member %d (seed %d): %d epochs (%s), best %d: validation free-run NRMSE %.4g (start %.4g)\n", k+1, seed+int64(k), rep.Epochs, rep.Stop, rep.BestEpoch, rep.ValNRMSE, rep.InitValNRMSE)
		}
		art.Members = append(art.Members, nssMember{UMean: m.UMean, UStd: m.UStd, YMean: m.YMean, YStd: m.YStd, Params: m.P, Seed: seed + int64(k), Training: rep})
	}
	linProgress(tc, 0.97, "writing")
	return polyWrite(tc, art)
}

func (a *nssArtifact) model() (nss.Ensemble, error) {
	if len(a.Members) < 1 || len(a.Members) > 32 {
		return nil, model.Invalid("members", "%d members (1 to 32)", len(a.Members))
	}
	var e nss.Ensemble
	for i, mb := range a.Members {
		m := &nss.Model{N: a.Order, NA: a.NA, NB: a.NB, NY: len(a.Outputs), NU: len(a.Inputs), Feedthrough: a.Feedthrough, Hidden: a.Hidden,
			UMean: mb.UMean, UStd: mb.UStd, YMean: mb.YMean, YStd: mb.YStd, P: mb.Params}
		if err := m.Check(); err != nil {
			return nil, model.Invalid("members", "member %d: %v", i, err)
		}
		e = append(e, m)
	}
	return e, nil
}

func loadNSS(b []byte, _ string, man *dataset.Manifest) (model.Predictor, error) {
	var a nssArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	m, err := a.model()
	if err != nil {
		return nil, err
	}
	lp, err := newLinearPredictor(FormatNSS, man, a.Inputs, a.Outputs, m.Lag(), "the encoder's window")
	if err != nil {
		return nil, err
	}
	// the twin's model: its own members, only read (the pool's members
	// keep their own scratch)
	tw, err := a.model()
	if err != nil {
		return nil, err
	}
	return &nssPredictor{pooledSim: pooledSim[nss.Ensemble]{cols: lp, what: "a neural state-space model", build: func() nss.Ensemble { m, _ := a.model(); return m }}, a: &a, historyCols: historyCols[*nss.Start, *nss.Runner]{cols: lp, sim: tw, estimator: "nss-encoder/1"}}, nil
}

// nssPredictor predicts windows and runs with a neural state-space model
// (the columns as a linear predictor's; pooledSim: a model is not safe
// for concurrent use (scratch), so calls take one from a pool). The
// state starts from the encoder over the measured rows.
type nssPredictor struct {
	pooledSim[nss.Ensemble]
	a *nssArtifact
	// the twin's view (HistoryTwin), over a model only read
	historyCols[*nss.Start, *nss.Runner]
}

var _ HistoryTwin = (*nssPredictor)(nil)

// Members is the size of the model's ensemble.
func (p *nssPredictor) Members() int { return len(p.a.Members) }

func (p *nssPredictor) Format() string { return FormatNSS }

var nssSchema = sync.OnceValue(trainer.MustParamSchema[nssParams])

var _ trainer.Described = NeuralStateSpace{}

func (NeuralStateSpace) Summary() string {
	return "neural state-space model of all targets (SUBNET-style): an encoder from the past outputs and inputs to the state, linear state transition and output maps plus MLP residuals, started from the subspace model and trained on the free-run error of subsequences by Adam, the epoch kept the best free run on a held-out tail (never worse than the linear start there)"
}
func (NeuralStateSpace) Formats() []string               { return []string{FormatNSS} }
func (NeuralStateSpace) ParamSchema() *jsonschema.Schema { return nssSchema() }
