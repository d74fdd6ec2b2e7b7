package trainers

// Native process-model trainer process_model@1 and its model format
// aml.process/1: per target, the sum of one FOPDT, SOPDT or IPDT response
// per control plus an offset (package process).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/process"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// FormatProcess is the model format of process_model@1.
const FormatProcess = "aml.process/1"

// ProcessModel ("process_model@1") fits, for every target, one
// first-order-plus-dead-time (fopdt: K, τ, θ), second-order-plus-dead-time
// (sopdt: K, τ1, τ2, θ) or integrating-plus-dead-time (ipdt: K, θ)
// response per control, summed with an offset, by simulation-error
// minimisation (Levenberg–Marquardt) over the NaN-free segments of the
// train runs — the models plant engineers read and tune controllers from
// (see package process for the model, the dead-time handling and the
// statistics). Columns and data are those of the linear trainers (the top
// of linear.go): inputs are the controls, outputs the targets, each
// segment has its own offset and initial state.
//
// Params:
//
//	structure     every pair's structure: fopdt, sopdt, ipdt or auto
//	              (default): chosen by the free-run RMSE on validation data
//	              (the val runs, else the last 25 % of every train run and a
//	              refit on the whole runs), greedily per input starting
//	              from fopdt (process.Select)
//	structures    per target and control, overriding structure
//	              ({"level": {"heater_sp": "sopdt"}})
//	maxDeadTime   largest dead time (s; 0: 30 sampling steps)
//	maxTau        largest time constant (s; 0: a quarter of the longest
//	              segment, at least 20 steps)
//	maxIterations Levenberg–Marquardt iterations (0: 100)
//	physics       ignored (the key is accepted for benchmark tools)
//
// Every parameter is reported with its standard error and 95 % confidence
// interval (σ²(JᵀJ)⁻¹ at the optimum). The window predictor initialises
// every target's offset and initial state from the window's history
// (process.Model.Simulate with nInit = H) and runs free over the horizon;
// SimulateRun does the same from the first nInit rows of a run.
type ProcessModel struct{}

func (ProcessModel) Ref() string           { return "process_model@1" }
func (ProcessModel) HasTrainingStep() bool { return true }

type processParams struct {
	Structure     string                       `json:"structure" jsonschema:"structure of every control→target pair: fopdt, sopdt, ipdt, or auto (chosen by the free-run RMSE on validation data)" param:"default=\"auto\";enum=auto|fopdt|sopdt|ipdt"`
	Structures    map[string]map[string]string `json:"structures" jsonschema:"per target and control, the structure overriding structure (fopdt, sopdt, ipdt or auto)"`
	MaxDeadTime   float64                      `json:"maxDeadTime" jsonschema:"largest dead time in seconds (0: 30 sampling steps)" param:"default=0;min=0"`
	MaxTau        float64                      `json:"maxTau" jsonschema:"largest time constant in seconds (0: a quarter of the longest segment, at least 20 steps)" param:"default=0;min=0"`
	MaxIterations int                          `json:"maxIterations" jsonschema:"Levenberg–Marquardt iterations (0: the default)" param:"default=100;min=0"`
	Physics       any                          `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"` // see linDecodeParams
	PhysicsSha256 any                          `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
}

// procParamJSON is one estimated parameter.
type procParamJSON struct {
	Name    string    `json:"name"`
	Value   float64   `json:"value"`
	StdErr  linNum    `json:"stdErr"`
	CI95    [2]linNum `json:"ci95"`
	AtBound bool      `json:"atBound,omitempty"`
}

// procPairJSON is the response of a target to one control. K is in
// target units per control unit (ipdt: per control unit and second), the
// time constants and the dead time in seconds.
type procPairJSON struct {
	Input     string          `json:"input"`
	Structure string          `json:"structure"`
	K         float64         `json:"K"`
	Tau       *float64        `json:"tau,omitempty"`  // fopdt
	Tau1      *float64        `json:"tau1,omitempty"` // sopdt, the larger
	Tau2      *float64        `json:"tau2,omitempty"` // sopdt
	Theta     float64         `json:"theta"`
	Params    []procParamJSON `json:"params"`
}

// procCandidateJSON is one structure combination of the selection.
type procCandidateJSON struct {
	Structures []string `json:"structures"` // per input
	ValRMSE    linNum   `json:"valRmse"`
	Error      string   `json:"error,omitempty"`
}

// procOutputJSON is the model of one target: y = offset + drift·t +
// Σ pairs, inputs as deviations from uMean.
type procOutputJSON struct {
	Output     string          `json:"output"`
	Pairs      []procPairJSON  `json:"pairs"`
	UMean      []float64       `json:"uMean"`
	Offset     float64         `json:"offset"`
	Drift      float64         `json:"drift"`
	DriftParam *procParamJSON  `json:"driftParam,omitempty"` // with an ipdt pair
	NoiseVar   float64         `json:"noiseVar"`
	YStd       float64         `json:"yStd"`
	OffsetStd  float64         `json:"offsetStd"`  // spread of the segments' offsets (prior of a window's offset)
	ParamNames []string        `json:"paramNames"` // rows and columns of covariance
	Covariance [][]linNum      `json:"covariance"`
	Diagnostic procDiagnostics `json:"diagnostics"`
}

type procDiagnostics struct {
	SSE           linNum              `json:"sse"`
	RMSE          linNum              `json:"rmse"`
	N             int                 `json:"n"`
	Dof           int                 `json:"dof"`
	Iterations    int                 `json:"iterations"`
	Status        string              `json:"status"`
	SegmentOffset []float64           `json:"segmentOffsets"`
	Candidates    []procCandidateJSON `json:"candidates,omitempty"`
}

// procArtifact is the aml.process/1 model.json.
type procArtifact struct {
	Format   string           `json:"format"`
	Inputs   []string         `json:"inputs"`
	Outputs  []string         `json:"outputs"`
	DtSec    float64          `json:"dtSec"`
	Models   []procOutputJSON `json:"models"` // one per output
	Training *linTrainingJSON `json:"training,omitempty"`
}

func procStructure(s string) (process.Structure, error) {
	switch st := process.Structure(s); st {
	case process.FOPDT, process.SOPDT, process.IPDT, process.Auto:
		return st, nil
	case "":
		return process.Auto, nil
	}
	return "", fmt.Errorf("params: structure %q: fopdt, sopdt, ipdt or auto", s)
}

func (ProcessModel) Train(ctx context.Context, tc *trainer.TrainContext) error {
	const ref = "process_model@1"
	b := tc.Dataset
	var p processParams
	if err := linDecodeParams(tc.Params, &p); err != nil {
		return err
	}
	c, err := linColumnsOf(b.Manifest, ref)
	if err != nil {
		return err
	}
	if b.Manifest.Period() <= 0 {
		return fmt.Errorf("the dataset has no sampling period (beatMs %d)", b.Manifest.BeatMs)
	}
	dt := b.Manifest.PeriodSeconds()
	if p.MaxDeadTime < 0 || p.MaxTau < 0 || p.MaxIterations < 0 || math.IsInf(p.MaxDeadTime, 0) || math.IsInf(p.MaxTau, 0) {
		return errors.New("params: maxDeadTime, maxTau and maxIterations must be finite and not negative")
	}
	def, err := procStructure(p.Structure)
	if err != nil {
		return err
	}
	// structures per output and input
	st := make([][]process.Structure, len(c.outputs))
	auto := false
	for o := range c.outputs {
		st[o] = make([]process.Structure, len(c.inputs))
		for i := range st[o] {
			st[o][i] = def
		}
	}
	for tgt, m := range p.Structures {
		o := slices.Index(c.outputs, tgt)
		if o < 0 {
			return fmt.Errorf("params: structures: %s is not a target of the dataset (%v)", tgt, c.outputs)
		}
		for in, s := range m {
			i := slices.Index(c.inputs, in)
			if i < 0 {
				return fmt.Errorf("params: structures.%s: %s is not a control of the dataset (%v)", tgt, in, c.inputs)
			}
			if st[o][i], err = procStructure(s); err != nil {
				return fmt.Errorf("params: structures.%s.%s: %w", tgt, in, err)
			}
		}
	}
	for _, row := range st {
		for _, s := range row {
			auto = auto || s == process.Auto
		}
	}
	maxTheta := p.MaxDeadTime
	if maxTheta == 0 {
		maxTheta = 30 * dt
	}
	minSeg := int(math.Ceil(maxTheta/dt)) + 1 + 2*(1+2*len(c.inputs)) + 10
	H := b.Manifest.HistorySteps
	linProgress(tc, 0.02, "reading runs")
	d, err := linPrepareData(b, c, minSeg, H+1, auto, detrendNone)
	if err != nil {
		return err
	}
	d.refit = d.refit && auto
	opts := process.Options{MaxDeadTime: p.MaxDeadTime, MaxTau: p.MaxTau, MaxIterations: p.MaxIterations}
	art := &procArtifact{Format: FormatProcess, Inputs: c.inputs, Outputs: c.outputs, DtSec: dt}
	col := func(seg linSegments, o int) [][]float64 {
		out := make([][]float64, len(seg.y))
		for s, y := range seg.y {
			out[s] = make([]float64, len(y))
			for k, row := range y {
				out[s][k] = row[o]
			}
		}
		return out
	}
	for o := range c.outputs {
		lo, hi := 0.05+0.9*float64(o)/float64(len(c.outputs)), 0.05+0.9*float64(o+1)/float64(len(c.outputs))
		linProgress(tc, lo, "fitting "+c.outputs[o])
		opts.Structures = st[o]
		var res *process.Result
		var cands []process.Candidate
		if slices.Contains(st[o], process.Auto) {
			res, cands, err = process.Select(ctx, col(d.selTrain, o), d.selTrain.u, col(d.val, o), d.val.u, dt, opts, H, func(done, total int) {
				linProgress(tc, lo+(hi-lo)*0.9*float64(done)/float64(total), fmt.Sprintf("selecting the structure of %s %d/%d", c.outputs[o], done, total))
			})
			if err == nil && d.refit {
				o2 := opts
				o2.Structures = nil
				for _, pr := range res.Model.Pairs {
					o2.Structures = append(o2.Structures, pr.Structure)
				}
				res, err = process.Fit(ctx, col(d.train, o), d.train.u, dt, o2)
			}
		} else {
			res, err = process.Fit(ctx, col(d.train, o), d.train.u, dt, opts)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.outputs[o], err)
		}
		art.Models = append(art.Models, procOutputOf(res, cands, c.inputs, c.outputs[o]))
	}
	linProgress(tc, 0.97, "writing")
	art.Training = linTrainingInfo(tc, d, nil)
	if err := writeJSON(filepath.Join(tc.ArtifactsDir, model.FileName), art); err != nil {
		return fmt.Errorf("write the model (non-finite parameters?): %w", err)
	}
	return nil
}

func procStrings(st []process.Structure) []string {
	out := make([]string, len(st))
	for i, s := range st {
		out[i] = string(s)
	}
	return out
}

func procParamOf(p process.Param) procParamJSON {
	return procParamJSON{Name: p.Name, Value: p.Value, StdErr: linNum(p.StdErr), CI95: [2]linNum{linNum(p.CI95[0]), linNum(p.CI95[1])}, AtBound: p.AtBound}
}

func procOutputOf(r *process.Result, cands []process.Candidate, inputs []string, output string) procOutputJSON {
	m := r.Model
	j := procOutputJSON{Output: output, UMean: m.UMean, Offset: m.Offset, Drift: m.Drift, NoiseVar: m.NoiseVar, YStd: m.YStd, OffsetStd: m.OffsetStd,
		Diagnostic: procDiagnostics{SSE: linNum(r.SSE), RMSE: linNum(r.RMSE), N: r.N, Dof: r.Dof, Iterations: r.Iterations, Status: r.Status, SegmentOffset: r.Offsets}}
	for i, pr := range m.Pairs {
		pj := procPairJSON{Input: inputs[i], Structure: string(pr.Structure), K: pr.K, Theta: pr.Theta}
		switch pr.Structure {
		case process.FOPDT:
			pj.Tau = &pr.Tau1
		case process.SOPDT:
			pj.Tau1, pj.Tau2 = &pr.Tau1, &pr.Tau2
		}
		for _, p := range r.Params {
			if p.Input == i {
				pj.Params = append(pj.Params, procParamOf(p))
			}
		}
		j.Pairs = append(j.Pairs, pj)
	}
	for _, p := range r.Params {
		name := p.Name
		if p.Input >= 0 {
			name = inputs[p.Input] + "." + p.Name
		} else {
			dp := procParamOf(p)
			j.DriftParam = &dp
		}
		j.ParamNames = append(j.ParamNames, name)
	}
	for _, row := range r.Cov {
		j.Covariance = append(j.Covariance, linNums(row))
	}
	for _, c := range cands {
		cj := procCandidateJSON{Structures: procStrings(c.Structures), ValRMSE: linNum(c.ValRMSE)}
		if c.Err != nil {
			cj.Error = c.Err.Error()
		}
		j.Diagnostic.Candidates = append(j.Diagnostic.Candidates, cj)
	}
	return j
}

// models rebuilds the process models in output order.
func (a *procArtifact) models() ([]*process.Model, error) {
	if len(a.Models) != len(a.Outputs) {
		return nil, model.Invalid("models", "%d models for %d outputs", len(a.Models), len(a.Outputs))
	}
	var out []*process.Model
	for o, mj := range a.Models {
		if mj.Output != a.Outputs[o] {
			return nil, model.Invalid("models", "model %d is of %s, output %d is %s", o, mj.Output, o, a.Outputs[o])
		}
		if len(mj.Pairs) != len(a.Inputs) {
			return nil, model.Invalid("models", "%s: %d pairs for %d inputs", mj.Output, len(mj.Pairs), len(a.Inputs))
		}
		m := &process.Model{Dt: a.DtSec, UMean: mj.UMean, Offset: mj.Offset, Drift: mj.Drift, NoiseVar: mj.NoiseVar, YStd: mj.YStd, OffsetStd: mj.OffsetStd}
		for i, pj := range mj.Pairs {
			if pj.Input != a.Inputs[i] {
				return nil, model.Invalid("models", "%s: pair %d is of %s, input %d is %s", mj.Output, i, pj.Input, i, a.Inputs[i])
			}
			pr := process.Pair{Structure: process.Structure(pj.Structure), K: pj.K, Theta: pj.Theta}
			get := func(v *float64) float64 {
				if v == nil {
					return math.NaN()
				}
				return *v
			}
			switch pr.Structure {
			case process.FOPDT:
				pr.Tau1 = get(pj.Tau)
			case process.SOPDT:
				pr.Tau1, pr.Tau2 = get(pj.Tau1), get(pj.Tau2)
			}
			m.Pairs = append(m.Pairs, pr)
		}
		if err := m.Validate(); err != nil {
			return nil, model.Invalid("models", "%s: %v", mj.Output, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func loadProcess(b []byte, dir string, man *dataset.Manifest) (model.Predictor, error) {
	var a procArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	ms, err := a.models()
	if err != nil {
		return nil, err
	}
	lp, err := newLinearPredictor(FormatProcess, man, a.Inputs, a.Outputs, 1, "one step")
	if err != nil {
		return nil, err
	}
	return &processPredictor{cols: lp, models: ms}, nil
}

// processPredictor predicts dataset windows with process models (one per
// output) and simulates whole runs (eval.RunSimulator); cols maps the
// model's inputs and outputs to the dataset's columns.
type processPredictor struct {
	cols   *linearPredictor
	models []*process.Model
}

func (p *processPredictor) Format() string { return FormatProcess }
func (p *processPredictor) Horizon() int   { return p.cols.d.F }

// simulate runs every output's model over u (model input order),
// initialised with the first nInit rows of y (model output order).
func (p *processPredictor) simulate(u, y [][]float64, nInit int) [][]float64 {
	out := make([][]float64, len(u))
	for k := range out {
		out[k] = make([]float64, len(p.models))
	}
	yo := make([]float64, nInit)
	for o, m := range p.models {
		for k := range yo {
			yo[k] = y[k][o]
		}
		for k, v := range m.Simulate(u, yo, nInit) {
			out[k][o] = v
		}
	}
	return out
}

// PredictBatch predicts n windows: the history (x) initialises every
// output's offset and initial state, then the model runs free over the
// window's future controls (u).
func (p *processPredictor) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	c := p.cols
	if err := model.CheckBatch(c.d, x, u, n); err != nil {
		return nil, err
	}
	H, F, nT := c.d.H, c.d.F, c.d.YCols
	nu, ny := len(c.xIn), len(c.xOut)
	out := make([]float32, 0, n*F*nT)
	us := make([][]float64, H+F)
	ys := make([][]float64, H)
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
		sim := p.simulate(us, ys, H)
		for f := 0; f < F; f++ {
			for _, o := range c.tgtOut {
				out = append(out, float32(sim[H+f][o]))
			}
		}
	}
	return out, nil
}

// SimulateRun implements eval.RunSimulator: inputs are the run's controls
// and outputs its targets in the dataset's order (the first nInit rows are
// used); every output's offset and initial state are estimated from the
// first nInit rows (nInit 0: at rest with the training offset) and the
// whole run is simulated.
func (p *processPredictor) SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error) {
	c := p.cols
	nT := c.d.YCols
	u, y, err := runRows(inputs, outputs, nInit, c.d.NCtrl, nT, c.uIn, c.outTgt)
	if err != nil {
		return nil, err
	}
	sim := p.simulate(u, y, nInit)
	res := make([][]float64, len(sim))
	for k, row := range sim {
		res[k] = make([]float64, nT)
		for t, o := range c.tgtOut {
			res[k][t] = row[o]
		}
	}
	return res, nil
}
