package trainers

// Native hybrid trainer: hybrid_residual@1 (physics grey-box calibrated on
// the free-run simulation error plus a bounded neural residual ensemble)
// and its model format aml.hybrid/1. The method is in internal/ident/hybrid.
//
// # Columns
//
// The physics model (param physics, a .aml file) is tied to the dataset's
// columns by param mapping:
//
//	{"controls":     {"<model control>": "<dataset control>"},
//	 "disturbances": {"<model disturbance>": "<dataset column>"},
//	 "outputs":      {"<model obs, guard or state>": "<dataset target>"}}
//
// Unmapped names default to the column of the same name. A model control
// must come from a dataset control (the only columns whose future values a
// window provides), or use its declared default; when the model has
// exactly one control and the dataset exactly one, they are paired, and
// likewise one obs with one target. Every dataset target must be the image
// of exactly one model quantity. A disturbance uses its column where the
// data have it (training, window history; held from the last history step
// over a window's future) and otherwise its declared default (or, without
// one, its training mean): whole-run simulation (SimulateRun) has only the
// controls.
//
// # Data
//
// Every train run is cut at its missing values (a step where a mapped
// control or a target is NaN) into NaN-free segments; segments shorter
// than max(nInit+1, 10) steps are dropped. Calibration uses the train runs
// only. The residual's early stopping uses the val runs when the dataset
// has any, otherwise held-out blocks of the train runs (see
// hybrid.TrainResidual).
//
// # Prediction
//
// PredictBatch and SimulateRun both call hybrid.Model.Simulate — one
// update rule (physics.Sim.Step), one initial-state estimator, one feature
// map: a window is simulated from its first history row over its H + F
// steps (history controls, then the window's future controls), its initial
// state estimated from all H history rows; a run is simulated from its
// first row with its first nInit measured rows for the initial state. The
// only difference is the prior weight of the initial-state fit (x0Weight
// for runs, windowX0Weight for windows, which start anywhere in a run; both
// chosen on training data unless param x0Weight fixes them).
//
// The residual ensemble is trained on free-run simulations of the training
// runs, the use it is made for; in a window the physics is re-anchored at
// the measured history, so corrections learned for long-horizon drift can
// make its short-horizon (one-step) error larger than the physics alone.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/hybrid"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/physics"
	"github.com/aml-project/aml/internal/safefile"
	"github.com/aml-project/aml/internal/trainer"
)

// FormatHybrid is the artifact of hybrid_residual@1.
const FormatHybrid = "aml.hybrid/1"

// HybridResidual ("hybrid_residual@1") calibrates a physics model's
// parameters inside their declared bounds on the free-run simulation error
// of the train runs (multi-start bounded Levenberg–Marquardt,
// hybrid.Calibrate) and trains an ensemble of small networks on what the
// calibrated physics misses (hybrid.TrainResidual): prediction = physics +
// mean bounded residual.
//
// Params:
//
//	physics        id of a stored physics model (phys-…, physics.put;
//	               required). A path is read only when the runner is
//	               called directly (tests, benchmarks): the application
//	               refuses paths in requests (security issue #16)
//	physicsSha256  the stored model's sha256 (pinned at submit; checked)
//	mapping        model names → dataset columns (see the top of hybrid.go)
//	starts         calibration starting points (4): nominal values, centre
//	               of the bounds, quasi-random points (seeded)
//	maxIter        Levenberg–Marquardt iterations per start (100)
//	x0             initial states of the unmeasured states in the
//	               calibration: "segment" (extra parameters per training
//	               segment), "estimate" (fitted to the first nInit rows, as
//	               at prediction), "init" (init clauses) or "auto" (default:
//	               segment and estimate, the better by the training free-run
//	               error as at prediction time)
//	x0Weight       weight of the prior in the prediction-time initial-state
//	               fit (negative: no fit, the prior alone). Default: chosen
//	               among hybrid.DefaultX0Weights, for runs by the training
//	               free-run error from the runs' starts, for windows by the
//	               error over the horizon of training windows
//	ensemble       residual networks (5); 0 = the calibrated physics alone
//	hidden         hidden tanh units (32)
//	residualScale  bound of the correction in output standard deviations (0.5)
//	epochs         maximum epochs (200), patience (40), batch (64), lr
//	               (0.002), l2 (0)
//	lags, lagStride  the network sees steps k, k−s, …, k−(lags−1)·s (6, 1)
//	nInit          measured steps that initialise a training segment's
//	               simulation for the residual data and the run simulator's
//	               default (5)
type HybridResidual struct{}

func (HybridResidual) Ref() string           { return "hybrid_residual@1" }
func (HybridResidual) HasTrainingStep() bool { return true }

type hybridMapping struct {
	Controls     map[string]string `json:"controls" jsonschema:"model control → dataset control"`
	Disturbances map[string]string `json:"disturbances" jsonschema:"model disturbance → dataset column"`
	Outputs      map[string]string `json:"outputs" jsonschema:"model obs, guard or state → dataset target"`
}

type hybridParams struct {
	Physics       string         `json:"physics" jsonschema:"id of a stored physics model (phys-…, physics.put)" param:"required"`
	PhysicsSha256 string         `json:"physicsSha256" jsonschema:"the stored model's sha256 (pinned at submit; checked)"`
	Mapping       *hybridMapping `json:"mapping" jsonschema:"model names → dataset columns; unmapped names default to the column of the same name"`
	Starts        int            `json:"starts" jsonschema:"calibration starting points: nominal values, centre of the bounds, quasi-random points (seeded); 0: the default" param:"default=4;min=0;max=64"`
	MaxIter       int            `json:"maxIter" jsonschema:"Levenberg–Marquardt iterations per start (0: the default)" param:"default=100;min=0;max=100000"`
	X0            string         `json:"x0" jsonschema:"initial states of the unmeasured states in the calibration: segment (extra parameters per training segment), estimate (fitted to the first nInit rows), init (init clauses) or auto (segment and estimate, the better)" param:"default=\"auto\";enum=auto|segment|estimate|init"`
	X0Weight      *float64       `json:"x0Weight" jsonschema:"weight of the prior in the prediction-time initial-state fit (negative: no fit, the prior alone); default: chosen on training data"`
	Ensemble      *int           `json:"ensemble" jsonschema:"residual networks; 0 = the calibrated physics alone" param:"default=5;min=0;max=32"`
	Hidden        int            `json:"hidden" jsonschema:"hidden tanh units per network (0: the default)" param:"default=32;min=0;max=1024"`
	ResidualScale float64        `json:"residualScale" jsonschema:"bound of the correction in output standard deviations (0: the default)" param:"default=0.5;min=0"`
	Epochs        int            `json:"epochs" jsonschema:"maximum training epochs (0: the default)" param:"default=200;min=0;max=100000"`
	Patience      int            `json:"patience" jsonschema:"early-stopping patience in epochs (0: the default)" param:"default=40;min=0;max=100000"`
	Batch         int            `json:"batch" jsonschema:"minibatch size (0: the default)" param:"default=64;min=0;max=100000"`
	LR            float64        `json:"lr" jsonschema:"learning rate (0: the default)" param:"default=0.002;min=0"`
	L2            float64        `json:"l2" jsonschema:"L2 weight penalty" param:"default=0;min=0"`
	Lags          int            `json:"lags" jsonschema:"the network sees steps k, k−s, …, k−(lags−1)·s (0: the default)" param:"default=6;min=0;max=1000"`
	LagStride     int            `json:"lagStride" jsonschema:"the stride s of the lags (0: the default)" param:"default=1;min=0;max=1000"`
	NInit         *int           `json:"nInit" jsonschema:"measured steps that initialise a training segment's simulation and the run simulator's default" param:"default=5;min=0;max=10000"`
}

// hybridColumn ties a model name to a dataset column ("" = the declared
// default; fallback is the value used where no column value exists).
type hybridColumn struct {
	Model    string  `json:"model"`
	Column   string  `json:"column"`
	Fallback *linNum `json:"fallback,omitempty"`
}

type hybridParamJSON struct {
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Lo      float64 `json:"lo"`
	Hi      float64 `json:"hi"`
	Nominal float64 `json:"nominal"`
}

type hybridStateJSON struct {
	Name string `json:"name"`
	// Free: estimated from the measured rows at prediction (prior = init
	// clause + priorOffset, scale); else set from output observedBy.
	Free        bool    `json:"free"`
	ObservedBy  string  `json:"observedBy,omitempty"`
	PriorOffset float64 `json:"priorOffset"`
	Scale       float64 `json:"scale"`
}

type hybridMemberJSON struct {
	W1   [][]float64        `json:"w1"` // [hidden][inputs]
	B1   []float64          `json:"b1"`
	W2   [][]float64        `json:"w2"` // [outputs][hidden]
	B2   []float64          `json:"b2"`
	Info *hybrid.MemberInfo `json:"info,omitempty"`
}

type hybridResidualJSON struct {
	Lags     int       `json:"lags"`
	Stride   int       `json:"lagStride"`
	Scale    float64   `json:"residualScale"`
	Hidden   int       `json:"hidden"`
	Inputs   int       `json:"inputs"`
	Features []string  `json:"features"` // base quantities of one lag
	FeatMean []float64 `json:"featMean"`
	FeatStd  []float64 `json:"featStd"`
	Members  []hybridMemberJSON
}

type hybridPhysicsJSON struct {
	File    string `json:"file"`
	Model   string `json:"model"`
	Version string `json:"version"`
	Sha256  string `json:"sha256"`
	Source  string `json:"source"`
}

type hybridStartJSON struct {
	Start  []float64 `json:"start"`
	Params []float64 `json:"params"`
	Cost   linNum    `json:"cost"`
	Iters  int       `json:"iters"`
	Evals  int       `json:"evals"`
}

type hybridFitJSON struct {
	Physics []linNum `json:"physicsRmse"`
	Hybrid  []linNum `json:"hybridRmse"`
	NRMSE   []linNum `json:"physicsNrmse"`
	HNRMSE  []linNum `json:"hybridNrmse"`
	Steps   int      `json:"steps"`
}

type hybridTrainingJSON struct {
	TrainRuns   []string          `json:"trainRuns"`
	ValRuns     []string          `json:"valRuns,omitempty"`
	Segments    int               `json:"segments"`
	ValSegments int               `json:"valSegments"`
	Samples     int               `json:"samples"`
	DroppedRows int               `json:"droppedRows"`
	Cost        linNum            `json:"calibrationCost"`
	NominalCost linNum            `json:"nominalCost"`
	Starts      []hybridStartJSON `json:"starts"`
	BestStart   int               `json:"bestStart"`
	Inactive    []string          `json:"inactive,omitempty"`
	FreeStates  []string          `json:"fittedInitialStates,omitempty"`
	X0          [][]float64       `json:"segmentInitialStates,omitempty"`
	Train       *hybridFitJSON    `json:"train,omitempty"`
	Val         *hybridFitJSON    `json:"val,omitempty"`
	// X0Mode is the calibration's initial-state mode; predCost(s) the
	// training free-run errors as at prediction (mean squared, output
	// standard deviations) of the candidate prior weights
	// (hybrid.DefaultX0Weights or the given x0Weight), windowScores the
	// errors over the horizon of training windows that chose
	// windowX0Weight.
	X0Mode       string             `json:"x0Mode"`
	PredCost     linNum             `json:"predCost"`
	PredCosts    []linNum           `json:"predCosts,omitempty"`
	WindowScores []linNum           `json:"windowScores,omitempty"`
	Alternatives []hybridAltJSON    `json:"alternatives,omitempty"`
	Seconds      map[string]float64 `json:"seconds"`
	Params       json.RawMessage    `json:"params,omitempty"`
}

type hybridAltJSON struct {
	X0Mode    string    `json:"x0Mode"`
	Params    []float64 `json:"params"`
	Cost      linNum    `json:"cost"`
	PredCost  linNum    `json:"predCost"`
	PredCosts []linNum  `json:"predCosts,omitempty"`
}

// hybridArtifact is the aml.hybrid/1 model.json: the physics source text
// (so the artifact is self-contained and its hash covers the equations),
// the column mapping, the step, the calibrated parameters with their
// bounds, the initial-state prior, the output scales and every residual
// network's weights.
type hybridArtifact struct {
	Format         string              `json:"format"`
	Physics        hybridPhysicsJSON   `json:"physics"`
	Controls       []hybridColumn      `json:"controls"`     // model control order
	Disturbances   []hybridColumn      `json:"disturbances"` // model disturbance order
	Outputs        []hybridColumn      `json:"outputs"`      // dataset target order
	DtSeconds      float64             `json:"dtSeconds"`
	NInit          int                 `json:"nInit"`
	Params         []hybridParamJSON   `json:"params"`
	States         []hybridStateJSON   `json:"states"`
	OutStd         []float64           `json:"outStd"`
	ErrScale       []float64           `json:"errScale"`
	X0Weight       float64             `json:"x0Weight"`
	WindowX0Weight float64             `json:"windowX0Weight"`
	Residual       *hybridResidualJSON `json:"residual,omitempty"`
	Training       *hybridTrainingJSON `json:"training,omitempty"`
}

func hybridDecodeParams(raw json.RawMessage) (*hybridParams, error) {
	p := &hybridParams{}
	if err := linDecodeParams(raw, p); err != nil {
		return nil, err
	}
	if p.Physics == "" {
		return nil, errors.New("params: physics (the id of a stored physics model, phys-…) is required")
	}
	if p.Starts < 0 || p.MaxIter < 0 || p.Hidden < 0 || p.Epochs < 0 || p.Patience < 0 || p.Batch < 0 || p.Lags < 0 || p.LagStride < 0 {
		return nil, errors.New("params: starts, maxIter, hidden, epochs, patience, batch, lags and lagStride must not be negative")
	}
	if p.Ensemble != nil && *p.Ensemble < 0 {
		return nil, errors.New("params: ensemble must not be negative")
	}
	if p.NInit != nil && *p.NInit < 0 {
		return nil, errors.New("params: nInit must not be negative")
	}
	if p.ResidualScale < 0 || p.LR < 0 || p.L2 < 0 || math.IsNaN(p.ResidualScale+p.LR+p.L2) {
		return nil, errors.New("params: residualScale, lr and l2 must not be negative")
	}
	if p.Mapping == nil {
		p.Mapping = &hybridMapping{}
	}
	return p, nil
}

// hybridResolve ties the model to the dataset's columns.
func hybridResolve(pm *physics.Model, man *dataset.Manifest, mp *hybridMapping) (ctrl, dist, outs []hybridColumn, err error) {
	isCtrl := map[string]bool{}
	for _, c := range man.Controls {
		isCtrl[c] = true
	}
	isCol := map[string]bool{}
	for _, c := range man.AllNodes {
		isCol[c] = true
	}
	var problems []string
	bad := func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }
	known := func(kind string, m map[string]string, names []string) {
		ok := map[string]bool{}
		for _, n := range names {
			ok[n] = true
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !ok[k] {
				bad("mapping.%s: %s is not a %s of model %s (%s)", kind, k, strings.TrimSuffix(kind, "s"), pm.Name, strings.Join(names, ", "))
			}
		}
	}
	known("controls", mp.Controls, pm.ControlNames())
	known("disturbances", mp.Disturbances, pm.DisturbanceNames())
	quantities := append(pm.OutputNames(), pm.StateNames()...)
	known("outputs", mp.Outputs, quantities)
	for _, d := range pm.Controls {
		c := hybridColumn{Model: d.Name}
		col, given := mp.Controls[d.Name]
		switch {
		case given:
			if !isCtrl[col] {
				bad("mapping.controls: %s → %s: %s is not a control of the dataset (%s); only controls have future values in a window", d.Name, col, col, strings.Join(man.Controls, ", "))
			}
			c.Column = col
		case isCtrl[d.Name]:
			c.Column = d.Name
		case len(pm.Controls) == 1 && len(man.Controls) == 1:
			c.Column = man.Controls[0]
		case !math.IsNaN(d.Value):
			v := linNum(d.Value)
			c.Fallback = &v
		default:
			bad("model control %s has no dataset control of that name and no default: map it (mapping.controls)", d.Name)
		}
		ctrl = append(ctrl, c)
	}
	for _, d := range pm.Disturbances {
		c := hybridColumn{Model: d.Name}
		col, given := mp.Disturbances[d.Name]
		switch {
		case given:
			if !isCol[col] {
				bad("mapping.disturbances: %s → %s: no such dataset column", d.Name, col)
			}
			c.Column = col
		case isCol[d.Name] && !hybIsTarget(man, d.Name):
			c.Column = d.Name
		}
		if !math.IsNaN(d.Value) {
			v := linNum(d.Value)
			c.Fallback = &v
		} else if c.Column == "" {
			bad("model disturbance %s has no dataset column of that name and no default: map it (mapping.disturbances)", d.Name)
		}
		dist = append(dist, c)
	}
	inv := map[string][]string{}
	for k, v := range mp.Outputs {
		inv[v] = append(inv[v], k)
	}
	isQ := map[string]bool{}
	for _, q := range quantities {
		isQ[q] = true
	}
	for col := range inv {
		if !hybIsTarget(man, col) {
			bad("mapping.outputs: %s is not a target of the dataset (%s)", col, strings.Join(man.Targets, ", "))
		}
	}
	for _, t := range man.Targets {
		src := inv[t]
		sort.Strings(src)
		switch {
		case len(src) == 1:
			outs = append(outs, hybridColumn{Model: src[0], Column: t})
		case len(src) > 1:
			bad("mapping.outputs: target %s is the image of %s; one model quantity per target", t, strings.Join(src, " and "))
		case isQ[t]:
			outs = append(outs, hybridColumn{Model: t, Column: t})
		case len(pm.Obs) == 1 && len(man.Targets) == 1:
			outs = append(outs, hybridColumn{Model: pm.Obs[0].Name, Column: t})
		default:
			bad("target %s has no model quantity: map one (mapping.outputs; model outputs %s, states %s)", t, strings.Join(pm.OutputNames(), ", "), strings.Join(pm.StateNames(), ", "))
		}
	}
	if len(problems) > 0 {
		return nil, nil, nil, errors.New(strings.Join(problems, "; "))
	}
	return ctrl, dist, outs, nil
}

func hybIsTarget(man *dataset.Manifest, n string) bool {
	for _, t := range man.Targets {
		if t == n {
			return true
		}
	}
	return false
}

// hybridCols are the resolved column indices of a model on a dataset.
type hybridCols struct {
	ctrlX, ctrlU []int     // per model control: column in AllNodes / in the controls, -1 for the fallback
	ctrlFB       []float64 // fallbacks
	distX        []int     // per model disturbance: column in AllNodes, -1 none
	distFB       []float64
	outX         []int // per output (target order): column in AllNodes
	outNames     []string
}

func hybridColumnsOf(man *dataset.Manifest, ctrl, dist, outs []hybridColumn) (*hybridCols, error) {
	all, ctl := map[string]int{}, map[string]int{}
	for j, n := range man.AllNodes {
		all[n] = j
	}
	for j, n := range man.Controls {
		ctl[n] = j
	}
	c := &hybridCols{}
	for _, h := range ctrl {
		fb := math.NaN()
		if h.Fallback != nil {
			fb = float64(*h.Fallback)
		}
		if h.Column == "" {
			if math.IsNaN(fb) {
				return nil, model.Invalid("controls", "control %s has neither a column nor a fallback", h.Model)
			}
			c.ctrlX, c.ctrlU = append(c.ctrlX, -1), append(c.ctrlU, -1)
		} else {
			j, ok := ctl[h.Column]
			if !ok {
				return nil, model.Invalid("controls", "column %s (model control %s) is not a control of the dataset (%s)", h.Column, h.Model, strings.Join(man.Controls, ", "))
			}
			c.ctrlX, c.ctrlU = append(c.ctrlX, all[h.Column]), append(c.ctrlU, j)
		}
		c.ctrlFB = append(c.ctrlFB, fb)
	}
	for _, h := range dist {
		fb := math.NaN()
		if h.Fallback != nil {
			fb = float64(*h.Fallback)
		}
		j := -1
		if h.Column != "" {
			var ok bool
			if j, ok = all[h.Column]; !ok {
				return nil, model.Invalid("disturbances", "column %s (model disturbance %s) is not a column of the dataset", h.Column, h.Model)
			}
		}
		c.distX, c.distFB = append(c.distX, j), append(c.distFB, fb)
	}
	if len(outs) != len(man.Targets) {
		return nil, model.Invalid("outputs", "the model predicts %d targets, the dataset has %d (%s)", len(outs), len(man.Targets), strings.Join(man.Targets, ", "))
	}
	for i, h := range outs {
		if h.Column != man.Targets[i] {
			return nil, model.Invalid("outputs", "output %d is %s, the dataset's target %d is %s", i, h.Column, i, man.Targets[i])
		}
		c.outX = append(c.outX, all[h.Column])
		c.outNames = append(c.outNames, h.Model)
	}
	return c, nil
}

// segments cuts the grids of runs into NaN-free segments (controls and
// targets); disturbances hold their last finite value (the fallback before
// the first).
func (c *hybridCols) segments(b *dataset.Bundle, ids []string, minLen int) (segs []*hybrid.Segment, samples, dropped int, err error) {
	nAll := len(b.Manifest.AllNodes)
	for _, id := range ids {
		_, vals, ok := b.RunGrid(id)
		if !ok {
			return nil, 0, 0, fmt.Errorf("run %s has no grid in the dataset", id)
		}
		T := len(vals) / nAll
		good := func(k int) bool {
			row := vals[k*nAll : (k+1)*nAll]
			for _, j := range c.ctrlX {
				if j >= 0 && !hybFiniteF(row[j]) {
					return false
				}
			}
			for _, j := range c.outX {
				if !hybFiniteF(row[j]) {
					return false
				}
			}
			return true
		}
		start := 0
		for k := 0; k <= T; k++ {
			if k < T && good(k) {
				continue
			}
			if n := k - start; n >= minLen && n > 0 {
				segs = append(segs, c.segment(id, vals[start*nAll:k*nAll], nAll, start))
				samples += n
			} else {
				dropped += n
			}
			if k < T {
				dropped++
			}
			start = k + 1
		}
	}
	return segs, samples, dropped, nil
}

func hybFiniteF(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

func (c *hybridCols) segment(run string, vals []float32, nAll, start int) *hybrid.Segment {
	T := len(vals) / nAll
	g := &hybrid.Segment{Run: run, Start: start, U: make([][]float64, T), Y: make([][]float64, T)}
	if len(c.distX) > 0 {
		g.D = make([][]float64, T)
	}
	for k := 0; k < T; k++ {
		row := vals[k*nAll : (k+1)*nAll]
		g.U[k] = make([]float64, len(c.ctrlX))
		for i, j := range c.ctrlX {
			if j < 0 {
				g.U[k][i] = c.ctrlFB[i]
			} else {
				g.U[k][i] = float64(row[j])
			}
		}
		g.Y[k] = make([]float64, len(c.outX))
		for o, j := range c.outX {
			g.Y[k][o] = float64(row[j])
		}
		if g.D != nil {
			g.D[k] = make([]float64, len(c.distX))
			for i, j := range c.distX {
				v := math.NaN()
				if j >= 0 {
					v = float64(row[j])
				}
				if !hybFinite(v) {
					v = c.distFB[i]
					if k > 0 {
						v = g.D[k-1][i]
					}
				}
				g.D[k][i] = v
			}
		}
	}
	return g
}

func hybFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func hybridProgress(tc *trainer.TrainContext, f float64, stage string) {
	if tc.Progress != nil {
		tc.Progress(f, stage)
	}
}

func (HybridResidual) Train(ctx context.Context, tc *trainer.TrainContext) error {
	const ref = "hybrid_residual@1"
	t0 := time.Now()
	secs := map[string]float64{}
	b := tc.Dataset
	man := b.Manifest
	p, err := hybridDecodeParams(tc.Params)
	if err != nil {
		return err
	}
	if man.Kind != dataset.KindDynamic {
		return fmt.Errorf("%s needs a dynamic dataset; this one is %s", ref, man.Kind)
	}
	src, file, err := hybridPhysicsSource(ctx, tc, p)
	if err != nil {
		return err
	}
	pm, err := physics.Parse(file, src)
	if err != nil {
		if strings.HasPrefix(p.Physics, core.PhysicsIDPrefix) {
			return fmt.Errorf("params: physics: %w", err)
		}
		// A file's problems would quote its lines into the job's error,
		// which every viewer reads: name the file only.
		return fmt.Errorf("params: physics: %s is not a valid physics model (%s); check it with aml physics put", file, core.CodeOf(err))
	}
	ctrl, dist, outs, err := hybridResolve(pm, man, p.Mapping)
	if err != nil {
		return fmt.Errorf("params: %w", err)
	}
	cols, err := hybridColumnsOf(man, ctrl, dist, outs)
	if err != nil {
		return err
	}
	dt := man.PeriodSeconds()
	sys, err := hybrid.NewSystem(pm, cols.outNames, dt)
	if err != nil {
		return err
	}
	nInit := 5
	if p.NInit != nil {
		nInit = *p.NInit
	}
	// distFB: the training mean where there is no default
	hybridProgress(tc, 0.02, "reading runs")
	minLen := max(nInit+1, 10)
	train, samples, dropped, err := cols.segments(b, man.Split.Train.RunIDs, minLen)
	if err != nil {
		return err
	}
	if len(train) == 0 {
		return fmt.Errorf("the train runs have no NaN-free stretch of %d steps", minLen)
	}
	for i := range dist {
		if dist[i].Fallback == nil {
			s, n := 0.0, 0.0
			for _, g := range train {
				for _, row := range g.D {
					if hybFinite(row[i]) {
						s += row[i]
						n++
					}
				}
			}
			v := linNum(s / math.Max(1, n))
			dist[i].Fallback = &v
			cols.distFB[i] = float64(v)
		}
	}
	val, _, _, err := cols.segments(b, man.Split.Val.RunIDs, minLen)
	if err != nil {
		return err
	}
	co := hybrid.DefaultCalibOptions()
	co.Seed = tc.Seed
	if p.Starts > 0 {
		co.Starts = p.Starts
	}
	if p.MaxIter > 0 {
		co.MaxIter = p.MaxIter
	}
	co.X0 = p.X0
	co.NInit = nInit
	if p.X0Weight != nil {
		co.X0Weights = []float64{*p.X0Weight}
	}
	co.Progress = func(done, total int) {
		hybridProgress(tc, 0.05+0.45*float64(done)/float64(total), fmt.Sprintf("calibrating: start %d/%d", done, total))
	}
	hybridProgress(tc, 0.05, "calibrating")
	t1 := time.Now()
	cal, err := hybrid.Calibrate(ctx, sys, train, co)
	if err != nil {
		return err
	}
	secs["calibration"] = time.Since(t1).Seconds()
	hm, err := hybrid.NewModel(sys, cal, train, cal.X0Weight, nInit)
	if err != nil {
		return err
	}
	winScores, err := hm.SelectWindowX0Weight(train, man.HistorySteps, man.HorizonSteps, co.X0Weights)
	if err != nil {
		return err
	}
	K := 5
	if p.Ensemble != nil {
		K = *p.Ensemble
	}
	if K > 0 {
		ro := hybrid.ResidualOptions{Members: K, Hidden: p.Hidden, Lags: p.Lags, Stride: p.LagStride, Scale: p.ResidualScale,
			Epochs: p.Epochs, Batch: p.Batch, Patience: p.Patience, LR: p.LR, L2: p.L2, Seed: tc.Seed}
		hybridProgress(tc, 0.5, "training the residual ensemble")
		t1 = time.Now()
		if _, err := hybrid.TrainResidual(ctx, hm, train, val, nInit, ro, func(done, total int) {
			hybridProgress(tc, 0.5+0.4*float64(done)/float64(total), fmt.Sprintf("residual member %d/%d", done, total))
		}); err != nil {
			return err
		}
		secs["residual"] = time.Since(t1).Seconds()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	hybridProgress(tc, 0.92, "scoring the training runs")
	art := newHybridArtifact(pm, src, file, ctrl, dist, outs, dt, nInit, cal, hm)
	tr := &hybridTrainingJSON{TrainRuns: man.Split.Train.RunIDs, ValRuns: man.Split.Val.RunIDs, Segments: len(train), ValSegments: len(val),
		Samples: samples, DroppedRows: dropped, Cost: linNum(cal.Cost), NominalCost: linNum(cal.NominalCost), BestStart: cal.Best,
		Inactive: cal.Inactive, X0: cal.X0, Seconds: secs, X0Mode: cal.X0Mode, PredCost: linNum(cal.PredCost), PredCosts: linNums(cal.PredCosts),
		WindowScores: linNums(winScores)}
	for _, alt := range cal.Alternatives {
		tr.Alternatives = append(tr.Alternatives, hybridAltJSON{X0Mode: alt.X0Mode, Params: alt.Params, Cost: linNum(alt.Cost), PredCost: linNum(alt.PredCost), PredCosts: linNums(alt.PredCosts)})
	}
	for _, s := range cal.Starts {
		tr.Starts = append(tr.Starts, hybridStartJSON{Start: s.Start, Params: s.Params, Cost: linNum(s.Cost), Iters: s.Iters, Evals: s.Evals})
	}
	for _, j := range cal.FreeStates {
		tr.FreeStates = append(tr.FreeStates, pm.States[j].Name)
	}
	if tr.Train, err = hybridFit(hm, train, nInit); err != nil {
		return err
	}
	if len(val) > 0 {
		if tr.Val, err = hybridFit(hm, val, nInit); err != nil {
			return err
		}
	}
	if len(bytes.TrimSpace(tc.Params)) > 0 && json.Valid(tc.Params) {
		tr.Params = tc.Params
	}
	secs["total"] = time.Since(t0).Seconds()
	art.Training = tr
	hybridProgress(tc, 0.97, "writing")
	if err := writeJSON(filepath.Join(tc.ArtifactsDir, model.FileName), art); err != nil {
		return fmt.Errorf("write the model (non-finite values?): %w", err)
	}
	return nil
}

// hybridFit is the free-run RMSE (and NRMSE) of the physics alone and of
// the hybrid over segments, pooled, steps nInit… of every segment.
func hybridFit(m *hybrid.Model, segs []*hybrid.Segment, nInit int) (*hybridFitJSON, error) {
	sim, err := m.NewSim()
	if err != nil {
		return nil, err
	}
	ny := m.Sys.NumOutputs()
	sp, sh, s, ss, n := make([]float64, ny), make([]float64, ny), make([]float64, ny), make([]float64, ny), make([]float64, ny)
	steps := 0
	for _, g := range segs {
		pr, err := m.Simulate(sim, g.U, g.D, g.Y[:min(nInit, g.Len())], nInit)
		if err != nil {
			return nil, err
		}
		for k := nInit; k < g.Len(); k++ {
			steps++
			for o := 0; o < ny; o++ {
				y := g.Y[k][o]
				sp[o] += (pr.Phys[k][o] - y) * (pr.Phys[k][o] - y)
				sh[o] += (pr.Y[k][o] - y) * (pr.Y[k][o] - y)
				s[o] += y
				ss[o] += y * y
				n[o]++
			}
		}
	}
	f := &hybridFitJSON{Steps: steps}
	for o := 0; o < ny; o++ {
		nn := math.Max(1, n[o])
		sd := math.Sqrt(math.Max(0, ss[o]/nn-(s[o]/nn)*(s[o]/nn)))
		rp, rh := math.Sqrt(sp[o]/nn), math.Sqrt(sh[o]/nn)
		f.Physics = append(f.Physics, linNum(rp))
		f.Hybrid = append(f.Hybrid, linNum(rh))
		f.NRMSE = append(f.NRMSE, linNum(rp/sd))
		f.HNRMSE = append(f.HNRMSE, linNum(rh/sd))
	}
	return f, nil
}

func hybRows(p []float64, r, c int) [][]float64 {
	out := make([][]float64, r)
	for i := range out {
		out[i] = append([]float64(nil), p[i*c:(i+1)*c]...)
	}
	return out
}

func newHybridArtifact(pm *physics.Model, src []byte, file string, ctrl, dist, outs []hybridColumn, dt float64, nInit int, cal *hybrid.Calibration, m *hybrid.Model) *hybridArtifact {
	sum := sha256.Sum256(src)
	a := &hybridArtifact{Format: FormatHybrid, Physics: hybridPhysicsJSON{File: file, Model: pm.Name, Version: pm.Version, Sha256: hex.EncodeToString(sum[:]), Source: string(src)},
		Controls: ctrl, Disturbances: dist, Outputs: outs, DtSeconds: dt, NInit: nInit, OutStd: m.OutStd, ErrScale: m.ErrScale, X0Weight: m.X0Weight, WindowX0Weight: m.WindowX0Weight}
	if a.Controls == nil {
		a.Controls = []hybridColumn{}
	}
	if a.Disturbances == nil {
		a.Disturbances = []hybridColumn{}
	}
	for i, n := range cal.Names {
		a.Params = append(a.Params, hybridParamJSON{Name: n, Value: m.Params[i], Lo: cal.Lo[i], Hi: cal.Hi[i], Nominal: cal.Nominal[i]})
	}
	for j, d := range pm.States {
		s := hybridStateJSON{Name: d.Name, Free: m.Free[j], PriorOffset: m.PriorOffset[j], Scale: m.StateScale[j]}
		if o := m.Sys.ObservedBy[j]; o >= 0 {
			s.ObservedBy = m.Sys.Outputs[o]
		}
		a.States = append(a.States, s)
	}
	if e := m.Residual; e != nil && len(e.Members) > 0 {
		r := &hybridResidualJSON{Lags: e.Lags, Stride: e.Stride, Scale: e.Scale, Hidden: e.Members[0].Hidden, Inputs: e.Dim(),
			FeatMean: e.FeatMean, FeatStd: e.FeatStd}
		r.Features = append(append(pm.OutputNames(), pm.StateNames()...), pm.ControlNames()...)
		for i, n := range e.Members {
			w1, b1, w2, b2 := n.Parts()
			mj := hybridMemberJSON{W1: hybRows(w1, n.Hidden, n.In), B1: b1, W2: hybRows(w2, n.Out, n.Hidden), B2: b2}
			if i < len(e.Info) {
				info := e.Info[i]
				mj.Info = &info
			}
			r.Members = append(r.Members, mj)
		}
		a.Residual = r
	}
	return a
}

// ---------------------------------------------------------------- loading

func loadHybrid(b []byte, dir string, man *dataset.Manifest) (model.Predictor, error) {
	var a hybridArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	if man.Kind != dataset.KindDynamic {
		return nil, model.Invalid("format", "%s predicts windows of a dynamic dataset; the dataset is %s", FormatHybrid, man.Kind)
	}
	sum := sha256.Sum256([]byte(a.Physics.Source))
	if a.Physics.Sha256 != "" && hex.EncodeToString(sum[:]) != a.Physics.Sha256 {
		return nil, model.Invalid("physics.sha256", "does not match the embedded source")
	}
	pm, err := physics.Parse(a.Physics.File, []byte(a.Physics.Source))
	if err != nil {
		return nil, model.Invalid("physics.source", "%v", err)
	}
	if dt := man.PeriodSeconds(); math.Abs(dt-a.DtSeconds) > 1e-9*math.Max(1, dt) {
		return nil, model.Invalid("dtSeconds", "the model was trained at %g s steps, the dataset's beat is %g s", a.DtSeconds, dt)
	}
	if len(a.Controls) != len(pm.Controls) || len(a.Disturbances) != len(pm.Disturbances) {
		return nil, model.Invalid("controls", "the mapping has %d controls and %d disturbances, the model %d and %d", len(a.Controls), len(a.Disturbances), len(pm.Controls), len(pm.Disturbances))
	}
	for i, c := range a.Controls {
		if c.Model != pm.Controls[i].Name {
			return nil, model.Invalid("controls", "control %d is %s, the model's is %s", i, c.Model, pm.Controls[i].Name)
		}
	}
	for i, c := range a.Disturbances {
		if c.Model != pm.Disturbances[i].Name {
			return nil, model.Invalid("disturbances", "disturbance %d is %s, the model's is %s", i, c.Model, pm.Disturbances[i].Name)
		}
		if c.Fallback == nil || !hybFinite(float64(*c.Fallback)) {
			return nil, model.Invalid("disturbances", "disturbance %s has no finite fallback", c.Model)
		}
	}
	cols, err := hybridColumnsOf(man, a.Controls, a.Disturbances, a.Outputs)
	if err != nil {
		return nil, err
	}
	sys, err := hybrid.NewSystem(pm, cols.outNames, a.DtSeconds)
	if err != nil {
		return nil, model.Invalid("outputs", "%v", err)
	}
	if len(a.Params) != len(pm.Params) {
		return nil, model.Invalid("params", "%d values, the model has %d parameters", len(a.Params), len(pm.Params))
	}
	params := make([]float64, len(a.Params))
	for i, q := range a.Params {
		if q.Name != pm.Params[i].Name {
			return nil, model.Invalid("params", "parameter %d is %s, the model's is %s", i, q.Name, pm.Params[i].Name)
		}
		params[i] = q.Value
	}
	if _, err := pm.NewSim(params); err != nil {
		return nil, model.Invalid("params", "%v", err)
	}
	nx, ny := len(pm.States), len(a.Outputs)
	if len(a.States) != nx || len(a.OutStd) != ny || len(a.ErrScale) != ny {
		return nil, model.Invalid("states", "%d states, %d output scales, %d error scales: want %d, %d, %d", len(a.States), len(a.OutStd), len(a.ErrScale), nx, ny, ny)
	}
	hm := &hybrid.Model{Sys: sys, Params: params, Free: make([]bool, nx), PriorOffset: make([]float64, nx), StateScale: make([]float64, nx),
		OutStd: a.OutStd, ErrScale: a.ErrScale, X0Weight: a.X0Weight, WindowX0Weight: a.WindowX0Weight}
	for j, s := range a.States {
		if s.Name != pm.States[j].Name || !(s.Scale > 0) || !hybFinite(s.PriorOffset) {
			return nil, model.Invalid("states", "state %d: %s (scale %g), the model's is %s", j, s.Name, s.Scale, pm.States[j].Name)
		}
		hm.Free[j], hm.PriorOffset[j], hm.StateScale[j] = s.Free, s.PriorOffset, s.Scale
	}
	for o := range a.OutStd {
		if !(a.OutStd[o] > 0) || !(a.ErrScale[o] > 0) {
			return nil, model.Invalid("outStd", "output scales must be positive")
		}
	}
	if r := a.Residual; r != nil && len(r.Members) > 0 {
		e := &hybrid.Ensemble{Lags: r.Lags, Stride: r.Stride, Scale: r.Scale, NOut: sys.NumModelOutputs(), NState: nx, NCtrl: sys.NumControls(),
			FeatMean: r.FeatMean, FeatStd: r.FeatStd}
		nb := e.NOut + e.NState + e.NCtrl
		if r.Lags < 1 || r.Stride < 1 || r.Hidden < 1 || !(r.Scale > 0) || len(r.FeatMean) != nb || len(r.FeatStd) != nb || r.Inputs != e.Dim() {
			return nil, model.Invalid("residual", "inconsistent layout: lags %d, stride %d, hidden %d, %d inputs, %d feature scales (want %d inputs, %d scales)",
				r.Lags, r.Stride, r.Hidden, r.Inputs, len(r.FeatStd), e.Dim(), nb)
		}
		for _, v := range r.FeatStd {
			if !(v > 0) {
				return nil, model.Invalid("residual.featStd", "must be positive")
			}
		}
		for i, mj := range r.Members {
			n, err := hybrid.NetFromWeights(mj.W1, mj.B1, mj.W2, mj.B2, r.Scale)
			if err != nil {
				return nil, model.Invalid(fmt.Sprintf("residual.members[%d]", i), "%v", err)
			}
			if n.In != e.Dim() || n.Out != ny || n.Hidden != r.Hidden {
				return nil, model.Invalid(fmt.Sprintf("residual.members[%d]", i), "shape %d→%d→%d, want %d→%d→%d", n.In, n.Hidden, n.Out, e.Dim(), r.Hidden, ny)
			}
			e.Members = append(e.Members, n)
		}
		hm.Residual = e
	}
	if a.NInit < 0 {
		return nil, model.Invalid("nInit", "must not be negative")
	}
	return &hybridPredictor{d: man.Dims(), m: hm, win: hm.ForWindows(), cols: cols, nInit: a.NInit}, nil
}

// ---------------------------------------------------------------- predictor

// hybridPredictor predicts windows and simulates runs (eval.RunSimulator)
// with one hybrid.Model.
type hybridPredictor struct {
	d     dataset.Dims
	m     *hybrid.Model
	win   *hybrid.Model // m with the window prior weight (Model.ForWindows)
	cols  *hybridCols
	nInit int
}

func (p *hybridPredictor) Format() string { return FormatHybrid }
func (p *hybridPredictor) Horizon() int   { return p.d.F }

// Model returns the hybrid model (for uncertainty: Prediction.Spread).
func (p *hybridPredictor) Model() *hybrid.Model { return p.m }

// PredictBatch predicts n windows: each is simulated from its first history
// row over the H history controls and the F future controls, the initial
// state estimated from the H history rows (hybrid.Model.Simulate, with the
// window prior weight).
// Windows are predicted in parallel, each worker with its own simulator.
func (p *hybridPredictor) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	if err := model.CheckBatch(p.d, x, u, n); err != nil {
		return nil, err
	}
	H, F, nAll, uc, nT := p.d.H, p.d.F, p.d.XCols, p.d.UCols, p.d.YCols
	out := make([]float32, n*F*nT)
	workers := min(runtime.GOMAXPROCS(0), max(1, n/64))
	errs := make([]error, workers)
	chunk := (n + workers - 1) / max(1, workers)
	done := make(chan int, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			defer func() { done <- w }()
			sim, err := p.m.NewSim()
			if err != nil {
				errs[w] = err
				return
			}
			c := p.cols
			nu, nd := len(c.ctrlX), len(c.distX)
			U := make([][]float64, H+F)
			var D [][]float64
			if nd > 0 {
				D = make([][]float64, H+F)
			}
			Y := make([][]float64, H)
			for k := range U {
				U[k] = make([]float64, nu)
				if D != nil {
					D[k] = make([]float64, nd)
				}
			}
			for k := range Y {
				Y[k] = make([]float64, nT)
			}
			for i := w * chunk; i < min(n, (w+1)*chunk); i++ {
				if (i-w*chunk)%128 == 0 && ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				xw := x[i*H*nAll : (i+1)*H*nAll]
				uw := u[i*F*uc : (i+1)*F*uc]
				for k := 0; k < H+F; k++ {
					var row []float32
					if k < H {
						row = xw[k*nAll : (k+1)*nAll]
					}
					for q := 0; q < nu; q++ {
						v := c.ctrlFB[q]
						switch {
						case c.ctrlX[q] >= 0 && k < H:
							v = float64(row[c.ctrlX[q]])
						case c.ctrlU[q] >= 0:
							v = float64(uw[(k-H)*uc+c.ctrlU[q]])
						}
						if !hybFinite(v) {
							v = c.ctrlFB[q]
							if k > 0 {
								v = U[k-1][q]
							}
						}
						U[k][q] = v
					}
					for q := 0; q < nd; q++ {
						v := math.NaN()
						if k < H && c.distX[q] >= 0 {
							v = float64(row[c.distX[q]])
						}
						if !hybFinite(v) {
							v = c.distFB[q]
							if k > 0 {
								v = D[k-1][q]
							}
						}
						D[k][q] = v
					}
					if k < H {
						for o, j := range c.outX {
							Y[k][o] = float64(row[j])
						}
					}
				}
				pr, err := p.win.Simulate(sim, U, D, Y, H)
				if err != nil {
					errs[w] = err
					return
				}
				for f := 0; f < F; f++ {
					for o := 0; o < nT; o++ {
						out[(i*F+f)*nT+o] = float32(pr.Y[H+f][o])
					}
				}
			}
		}(w)
	}
	for w := 0; w < workers; w++ {
		<-done
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SimulateRun implements eval.RunSimulator: inputs are the run's controls
// and outputs its targets in the dataset's order (the first nInit rows
// initialise the state); disturbances take their fallbacks (the declared
// default, or the training mean). The result has len(inputs) rows.
func (p *hybridPredictor) SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error) {
	pr, err := p.simulateRun(inputs, outputs, nInit)
	if err != nil {
		return nil, err
	}
	return pr.Y, nil
}

// SimulateRunSpread is SimulateRun with the ensemble members' spread
// (standard deviation per step and target; zeros without an ensemble).
func (p *hybridPredictor) SimulateRunSpread(inputs, outputs [][]float64, nInit int) (mean, spread [][]float64, err error) {
	pr, err := p.simulateRun(inputs, outputs, nInit)
	if err != nil {
		return nil, nil, err
	}
	return pr.Y, pr.Spread, nil
}

func (p *hybridPredictor) simulateRun(inputs, outputs [][]float64, nInit int) (*hybrid.Prediction, error) {
	nC, nT := p.d.NCtrl, p.d.YCols
	if nInit < 0 || nInit > len(inputs) || nInit > len(outputs) {
		return nil, fmt.Errorf("SimulateRun: nInit %d with %d input and %d output rows", nInit, len(inputs), len(outputs))
	}
	c := p.cols
	U := make([][]float64, len(inputs))
	for k, row := range inputs {
		if len(row) != nC {
			return nil, fmt.Errorf("SimulateRun: input row %d has %d values, the dataset has %d controls", k, len(row), nC)
		}
		U[k] = make([]float64, len(c.ctrlU))
		for q, j := range c.ctrlU {
			v := c.ctrlFB[q]
			if j >= 0 {
				v = row[j]
			}
			if !hybFinite(v) {
				return nil, fmt.Errorf("SimulateRun: input row %d is not finite", k)
			}
			U[k][q] = v
		}
	}
	var D [][]float64
	if len(c.distX) > 0 {
		D = make([][]float64, len(inputs))
		for k := range D {
			D[k] = c.distFB
		}
	}
	Y := make([][]float64, nInit)
	for k := range Y {
		if len(outputs[k]) != nT {
			return nil, fmt.Errorf("SimulateRun: output row %d has %d values, the dataset has %d targets", k, len(outputs[k]), nT)
		}
		Y[k] = outputs[k]
	}
	sim, err := p.m.NewSim()
	if err != nil {
		return nil, err
	}
	return p.m.Simulate(sim, U, D, Y, nInit)
}

// hybridPhysicsSource returns the physics source of p and its file name:
// a stored model by id through tc.Physics (its hash checked), or — only
// for direct callers of the runner, the application refuses paths — a
// regular file of at most physics.MaxSourceBytes (no FIFO, no device).
// Errors never quote the content.
func hybridPhysicsSource(ctx context.Context, tc *trainer.TrainContext, p *hybridParams) ([]byte, string, error) {
	if strings.HasPrefix(p.Physics, core.PhysicsIDPrefix) {
		if tc.Physics == nil {
			return nil, "", fmt.Errorf("params: physics: %s: this runner has no physics store", p.Physics)
		}
		m, err := tc.Physics(ctx, p.Physics)
		if err != nil {
			return nil, "", fmt.Errorf("params: physics: %w", err)
		}
		sum := sha256.Sum256([]byte(m.Source))
		got := hex.EncodeToString(sum[:])
		if got != m.SHA256 || (p.PhysicsSha256 != "" && !strings.EqualFold(p.PhysicsSha256, got)) {
			return nil, "", fmt.Errorf("params: physics: %s: stored source hash %.12s does not match the recorded %.12s", p.Physics, got, p.PhysicsSha256+m.SHA256)
		}
		name := m.FileName
		if name == "" {
			name = m.ID + ".aml"
		}
		return []byte(m.Source), name, nil
	}
	path := p.Physics
	if !filepath.IsAbs(path) {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, "", err
		}
		path = abs
	}
	src, err := safefile.ReadFile(path, physics.MaxSourceBytes)
	if err != nil {
		return nil, "", fmt.Errorf("params: physics: %w", err)
	}
	if p.PhysicsSha256 != "" {
		sum := sha256.Sum256(src)
		if !strings.EqualFold(hex.EncodeToString(sum[:]), p.PhysicsSha256) {
			return nil, "", fmt.Errorf("params: physics: %s does not have sha256 %s", path, p.PhysicsSha256)
		}
	}
	return src, filepath.Base(path), nil
}
