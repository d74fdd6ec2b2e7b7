package trainers

// Native linear dynamic trainers: one_step@1 (MIMO ARX) and
// linear_state_space@1 (PO-MOESP subspace identification with
// prediction-error refinement), and their model formats aml.arx/1 and
// aml.statespace/1.
//
// # Columns
//
// Both trainers model the dataset's targets (manifest targets, in that
// order) as outputs driven by the dataset's controls (manifest controls) as
// inputs. Controls are the only columns whose future values a window
// provides, so they are the only inputs a model can be rolled out with;
// disturbances and features are not used. A dataset without controls is
// refused.
//
// # Data
//
// Training data are the aligned grids of the train runs
// (manifest split.train.runIds, Bundle.RunGrid), never joined: every run is
// cut at its missing values (a step where a control or target is NaN) into
// NaN-free segments, and no lag or state trajectory crosses a segment
// boundary (linear.FitARXSegments, linear.FitSubspaceSegments). Pieces too
// short to be useful are dropped (ARX: not longer than the largest lag of
// the candidates; state space: shorter than 20 steps, each segment costs
// its own initial state) and counted in the artifact.
//
// Structure selection (ARX orders and ridge, state-space order) scores the
// candidates on validation data: the val runs when the dataset has any —
// the final model is then the one fitted on the train runs only, so the
// val split stays unseen by the parameters — otherwise the last 25 % of
// every train run (candidates fitted on the first 75 %), after which the
// chosen structure is refitted on the whole train runs.
//
// # Prediction
//
// A window (history x [H, nAll], future controls u [F, nCtrl]) is predicted
// by initialising the model from the history and rolling it out over the F
// future steps with the window's future controls, feeding back its own
// predictions (free run):
//
//   - ARX: the history's targets and controls are the past values of the
//     regressor; H must be at least the model's largest lag.
//   - state space: the initial state at the first history step is
//     estimated from all H history rows (MAP with the training-state prior,
//     linear.EstimateX0, or plain least squares, linear.EstimateX0LS: param
//     windowX0, chosen on validation windows by default), then the model is
//     simulated over the H+F steps; H must be at least initSteps.
//
// Both predictors also implement eval.RunSimulator (SimulateRun) for
// free-run evaluation of whole runs (eval.FreeRun). An ARX model given
// fewer measured steps (nInit ≥ 1) than its largest lag assumes the process
// was at rest before the run: the first input and output are held
// backwards.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/linear"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// Model formats of the linear trainers.
const (
	FormatARX        = "aml.arx/1"
	FormatStateSpace = "aml.statespace/1"
)

const (
	minSSSegment  = 20   // shortest NaN-free piece a state-space fit uses
	valTailShare  = 0.25 // share of every train run used for selection without val runs
	defaultMaxARX = 10
	defaultMaxSS  = 10
)

// linColumns are the model's inputs (controls) and outputs (targets) and
// their columns in the grid (AllNodes order).
type linColumns struct {
	inputs, outputs []string
	in, out         []int
}

func linColumnsOf(m *dataset.Manifest, ref string) (linColumns, error) {
	if m.Kind != dataset.KindDynamic {
		return linColumns{}, fmt.Errorf("%s needs a dynamic dataset (mpc_surrogate or quality_predict); this one is %s", ref, m.Kind)
	}
	if len(m.Controls) == 0 {
		return linColumns{}, fmt.Errorf("%s needs a dataset with at least one control: its inputs are the controls, the only columns whose future values a window provides (this dataset has targets %s and no control)",
			ref, strings.Join(m.Targets, ", "))
	}
	if len(m.Targets) == 0 {
		return linColumns{}, fmt.Errorf("%s needs at least one target", ref)
	}
	col := map[string]int{}
	for j, n := range m.AllNodes {
		col[n] = j
	}
	c := linColumns{inputs: m.Controls, outputs: m.Targets}
	for _, n := range m.Controls {
		j, ok := col[n]
		if !ok {
			return c, fmt.Errorf("control %s is not among the dataset's columns", n)
		}
		c.in = append(c.in, j)
	}
	for _, n := range m.Targets {
		j, ok := col[n]
		if !ok {
			return c, fmt.Errorf("target %s is not among the dataset's columns", n)
		}
		c.out = append(c.out, j)
	}
	return c, nil
}

// linRun is one run's input and output columns (NaN kept).
type linRun struct {
	id   string
	u, y [][]float64
}

func linReadRuns(b *dataset.Bundle, c linColumns, ids []string) ([]linRun, error) {
	nAll := len(b.Manifest.AllNodes)
	var out []linRun
	for _, id := range ids {
		_, vals, ok := b.RunGrid(id)
		if !ok {
			return nil, fmt.Errorf("run %s has no grid in the dataset", id)
		}
		T := len(vals) / nAll
		r := linRun{id: id, u: make([][]float64, T), y: make([][]float64, T)}
		for k := 0; k < T; k++ {
			row := vals[k*nAll : (k+1)*nAll]
			r.u[k] = make([]float64, len(c.in))
			for i, j := range c.in {
				r.u[k][i] = float64(row[j])
			}
			r.y[k] = make([]float64, len(c.out))
			for i, j := range c.out {
				r.y[k][i] = float64(row[j])
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// linSegments are NaN-free pieces of runs.
type linSegments struct {
	y, u    [][][]float64
	samples int
	dropped int // rows not used: missing values or pieces too short
}

func linFiniteRow(r []float64) bool {
	for _, v := range r {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// add cuts rows [lo, hi) of r into maximal NaN-free pieces and keeps those
// of at least minLen rows.
func (s *linSegments) add(r linRun, lo, hi, minLen int) {
	start := lo
	for k := lo; k <= hi; k++ {
		if k < hi && linFiniteRow(r.u[k]) && linFiniteRow(r.y[k]) {
			continue
		}
		if n := k - start; n >= minLen && n > 0 {
			s.y = append(s.y, r.y[start:k])
			s.u = append(s.u, r.u[start:k])
			s.samples += n
		} else {
			s.dropped += n
		}
		if k < hi {
			s.dropped++
		}
		start = k + 1
	}
}

// linData is the training data and the validation data for selection.
type linData struct {
	train      linSegments // all train runs (the final fit)
	selTrain   linSegments // candidates are fitted on these
	val        linSegments // and scored on these
	validation string      // where val comes from
	refit      bool        // refit the chosen structure on train
	trend      *linTrend   // removed from every run (nil: none)
}

// linPrepareData reads the train runs (and the validation data when
// needVal) cut into NaN-free pieces, the trend of detrend ("" or none:
// none) estimated on the train runs and removed from all of them.
func linPrepareData(b *dataset.Bundle, c linColumns, minTrain, minVal int, needVal bool, detrend string) (*linData, error) {
	sp := b.Manifest.Split
	if len(sp.Train.RunIDs) == 0 {
		return nil, errors.New("the dataset has no train runs")
	}
	tr, err := linReadRuns(b, c, sp.Train.RunIDs)
	if err != nil {
		return nil, err
	}
	d := &linData{}
	if d.trend, err = linDetrendRuns(detrend, tr); err != nil {
		return nil, err
	}
	for _, r := range tr {
		d.train.add(r, 0, len(r.y), minTrain)
	}
	if d.train.samples == 0 {
		return nil, fmt.Errorf("the train runs have no NaN-free stretch of %d steps", minTrain)
	}
	if !needVal {
		return d, nil
	}
	if len(sp.Val.RunIDs) > 0 {
		va, err := linReadRuns(b, c, sp.Val.RunIDs)
		if err != nil {
			return nil, err
		}
		d.trend.removeRuns(va)
		for _, r := range va {
			d.val.add(r, 0, len(r.y), minVal)
		}
		d.selTrain = d.train
		d.validation = fmt.Sprintf("val runs (%d)", len(va))
		if d.val.samples == 0 {
			return nil, fmt.Errorf("the val runs have no NaN-free stretch of %d steps for the structure selection", minVal)
		}
		return d, nil
	}
	for _, r := range tr {
		T := len(r.y)
		cut := T - int(math.Round(valTailShare*float64(T)))
		d.selTrain.add(r, 0, cut, minTrain)
		d.val.add(r, cut, T, minVal)
	}
	d.validation = "last 25% of every train run"
	d.refit = true
	if d.selTrain.samples == 0 || d.val.samples == 0 {
		return nil, errors.New("the train runs are too short to hold out their last 25% for the structure selection; add val runs or fix the structure (ARX: select false; state space: order > 0)")
	}
	return d, nil
}

// linDecodeParams reads params strictly: an unknown key is an error (a
// misspelt parameter must not be silently ignored). Both parameter structs
// accept and ignore "physics", which tools running a benchmark pass to
// every trainer (the linear trainers use no physics model).
func linDecodeParams(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	return nil
}

func linProgress(tc *trainer.TrainContext, f float64, stage string) {
	if tc.Progress != nil {
		tc.Progress(f, stage)
	}
}

// linSelectionProgress maps the selection's candidates onto [lo, hi] of the
// job's progress and stops the selection when ctx is done.
func linSelectionProgress(ctx context.Context, tc *trainer.TrainContext, lo, hi float64, stage string) func(done, total int) error {
	return func(done, total int) error {
		if total > 0 {
			linProgress(tc, lo+(hi-lo)*float64(done)/float64(total), fmt.Sprintf("%s %d/%d", stage, done, total))
		}
		return ctx.Err()
	}
}

// linNum is a float64 written as null when not finite (scores may be +Inf).
type linNum float64

func (v linNum) MarshalJSON() ([]byte, error) {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

func (v *linNum) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = linNum(math.NaN())
		return nil
	}
	var f float64
	err := json.Unmarshal(b, &f)
	*v = linNum(f)
	return err
}

func linNums(x []float64) []linNum {
	out := make([]linNum, len(x))
	for i, v := range x {
		out[i] = linNum(v)
	}
	return out
}

// linScoreJSON is one selection candidate in an artifact. nb and nk are
// integers for orders common to all inputs, lists (one per input) for
// per-input ones.
type linScoreJSON struct {
	NA        *int               `json:"na,omitempty"`
	NB        *trainer.IntOrList `json:"nb,omitempty"`
	NK        *trainer.IntOrList `json:"nk,omitempty"`
	Lambda    *linNum            `json:"lambda,omitempty"`
	Order     int                `json:"order,omitempty"`
	BlockRows int                `json:"blockRows,omitempty"`
	Criterion string             `json:"criterion"`
	Start     int                `json:"start"`
	Folds     int                `json:"folds,omitempty"`
	RMSE      []linNum           `json:"rmse,omitempty"`
	NRMSE     []linNum           `json:"nrmse,omitempty"`
	Value     linNum             `json:"meanNrmse"`
	Error     string             `json:"error,omitempty"`
	Skipped   string             `json:"skipped,omitempty"`
}

// linOrderList is the nb or nk of o in an artifact: the scalar or the
// per-input list.
func linOrderList(o linear.ARXOrders, nu int, nb bool) *trainer.IntOrList {
	if !o.PerInput() {
		v := o.NK
		if nb {
			v = o.NB
		}
		return &trainer.IntOrList{N: v}
	}
	return &trainer.IntOrList{List: perInput(o, nu, nb), IsList: true}
}

func linScoresJSON(sc []linear.Score, arx bool, nu int) []linScoreJSON {
	out := make([]linScoreJSON, 0, len(sc))
	for _, s := range sc {
		j := linScoreJSON{Order: s.Order, BlockRows: s.BlockRows, Criterion: s.Criterion, Start: s.Start, Folds: s.Folds,
			RMSE: linNums(s.RMSE), NRMSE: linNums(s.NRMSE), Value: linNum(s.Value), Skipped: s.Skipped}
		if arx {
			na, l := s.Orders.NA, linNum(s.Lambda)
			j.NA, j.NB, j.NK, j.Lambda = &na, linOrderList(s.Orders, nu, true), linOrderList(s.Orders, nu, false), &l
		}
		if s.Err != nil {
			j.Error = s.Err.Error()
		}
		out = append(out, j)
	}
	return out
}

// linDelaysJSON records the input-delay estimation of an ARX model.
type linDelaysJSON struct {
	Method    string              `json:"method"`
	Inputs    []string            `json:"inputs"`
	Estimated []int               `json:"estimated"`
	Scores    []linDelayScoreJSON `json:"scores"`
}

type linDelayScoreJSON struct {
	Input string `json:"input"`
	NK    int    `json:"nk"`
	Value linNum `json:"meanNrmse"`
}

// linTrainingJSON records how a linear model was trained (information only;
// the loader ignores it).
type linTrainingJSON struct {
	TrainRuns   []string `json:"trainRuns"`
	Segments    int      `json:"segments"`
	Samples     int      `json:"samples"`
	DroppedRows int      `json:"droppedRows"`
	Validation  string   `json:"validation,omitempty"`
	Refit       bool     `json:"refitOnTrain,omitempty"`
	// Selection says how the structure was chosen (cross-validation or a
	// validation record), Chosen the structure, Scores every candidate
	// (skipped ones with the reason).
	Selection string          `json:"selection,omitempty"`
	Chosen    string          `json:"chosen,omitempty"`
	Scores    []linScoreJSON  `json:"scores,omitempty"`
	Delays    *linDelaysJSON  `json:"delays,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
}

func linTrainingInfo(tc *trainer.TrainContext, d *linData, sc []linScoreJSON) *linTrainingJSON {
	t := &linTrainingJSON{TrainRuns: tc.Dataset.Manifest.Split.Train.RunIDs, Segments: len(d.train.y), Samples: d.train.samples,
		DroppedRows: d.train.dropped, Validation: d.validation, Refit: d.refit, Scores: sc}
	if len(bytes.TrimSpace(tc.Params)) > 0 && json.Valid(tc.Params) {
		t.Params = tc.Params
	}
	return t
}

func linRows(x *mat.Dense) [][]float64 {
	r, c := x.Dims()
	out := make([][]float64, r)
	for i := range out {
		out[i] = make([]float64, c)
		for j := range out[i] {
			out[i][j] = x.At(i, j)
		}
	}
	return out
}

// linDense converts rows to an r×c matrix, checking the shape.
func linDense(name string, x [][]float64, r, c int) (*mat.Dense, error) {
	if len(x) != r {
		return nil, model.Invalid(name, "has %d rows, want %d", len(x), r)
	}
	if r == 0 || c == 0 {
		return nil, model.Invalid(name, "is empty")
	}
	m := mat.NewDense(r, c, nil)
	for i, row := range x {
		if len(row) != c {
			return nil, model.Invalid(name, "row %d has %d values, want %d", i, len(row), c)
		}
		m.SetRow(i, row)
	}
	return m, nil
}

func linParseScaling(s string) (linear.Scaling, error) {
	for _, v := range []linear.Scaling{linear.Standardize, linear.CenterOnly, linear.NoScaling} {
		if v.String() == s {
			return v, nil
		}
	}
	return 0, model.Invalid("scaling", "unknown scaling %q (standardize, center or none)", s)
}

// ---------------------------------------------------------------- ARX

// OneStep ("one_step@1") fits a MIMO ARX model
//
//	y(k) = Σ_{i=1..na} A_i y(k−i) + Σ_a Σ_{j=nk_a..nk_a+nb_a−1} b_{a,j} u_a(k−j) + c
//
// (y the targets, u the controls) by ridge least squares over the
// NaN-free segments of the train runs (see the top of linear.go for the
// data and column conventions), optionally selecting the structure.
//
// Params:
//
//	select      choose na = nb and the ridge λ (default true, false when
//	            na, nb or nk is given)
//	selection   "cv" (default): K-fold block cross-validation of the train
//	            runs' segments (linear.SelectARXCV: fit on K−1 contiguous
//	            blocks, free-run score on the held-out one, mean over the
//	            folds), so the val runs stay unseen for calibration; "val":
//	            score on the val runs (or the last 25 % of every train run)
//	cvFolds     K of the cross-validation (default 3)
//	maxOrder    selection grid na = nb = 1..maxOrder (default 10, limited
//	            to lags ≤ the dataset's history); candidates the data cannot
//	            support are skipped (reported with the reason)
//	feedthrough allow nk = 0 (u(k) acts on y(k)) for the estimated delays
//	            (default true), else nk ≥ 1
//	maxDelay    largest delay the delay estimation tries (default
//	            min(5, history − 1))
//	lambdas     ridge grid (default [0, 1, 100]; scaled units, summed
//	            squared errors)
//	criterion   "simulation" (free run, default) or "one_step"
//	na          fixed output order when select is false (default 2)
//	nb, nk      input orders and delays: an integer (every input) or a list
//	            with one entry per control, in the dataset's control order;
//	            nb defaults to na; without nk the delays are estimated
//	            (linear.EstimateDelays: per input, an ARX(2, 2) sweep over
//	            nk ∈ 0..maxDelay on the train segments, the shortest delay
//	            within 1 % of the best one-step NRMSE; every candidate's
//	            score recorded in training.delays)
//	lambda      fixed ridge parameter (default 0; with select it replaces
//	            the grid)
//	diag        every target regressed on its own past only (default false)
//	intercept   constant term c (default true)
//	detrend     none (default), mean or linear: the trend removed from
//	            every input and output before the fit and added back at
//	            prediction (detrend.go)
//	physics     ignored (the key is accepted for benchmark tools)
//
// Data are standardised with the statistics of the training segments. The
// largest lag must not exceed the dataset's history (the window
// predictor's initialisation).
type OneStep struct{}

func (OneStep) Ref() string           { return "one_step@1" }
func (OneStep) HasTrainingStep() bool { return true }

// Selection methods of one_step@1 and linear_state_space@1.
const (
	selCV  = "cv"
	selVal = "val"
)

type arxParams struct {
	Select        *bool              `json:"select" jsonschema:"choose na = nb and the ridge λ (default true, false when na, nb or nk is given)"`
	MaxOrder      int                `json:"maxOrder" jsonschema:"selection grid na = nb = 1..maxOrder (0: the default), limited to lags ≤ the dataset's history; candidates the data cannot support are skipped" param:"default=10;min=0"`
	Feedthrough   *bool              `json:"feedthrough" jsonschema:"allow nk = 0 (u(k) acts on y(k)) in the delay estimation; false: nk ≥ 1" param:"default=true"`
	MaxDelay      *int               `json:"maxDelay" jsonschema:"largest delay the delay estimation tries (default min(5, history − 1))" param:"min=0"`
	Selection     string             `json:"selection" jsonschema:"how candidates are scored: cv, block cross-validation of the train runs (the val runs stay for calibration), or val, on the val runs (without them the last 25% of every train run)" param:"default=\"cv\";enum=cv|val"`
	CVFolds       int                `json:"cvFolds" jsonschema:"blocks of the cross-validation (0: the default)" param:"default=3;min=0"`
	Lambdas       []float64          `json:"lambdas" jsonschema:"ridge grid of the selection (scaled units, summed squared errors)" param:"default=[0,1,100];itemMin=0;maxItems=100"`
	Criterion     string             `json:"criterion" jsonschema:"selection criterion: free-run simulation error or one-step prediction error" param:"default=\"simulation\";enum=simulation|one_step"`
	NA            *int               `json:"na" jsonschema:"fixed output order when select is false" param:"default=2;min=0"`
	NB            *trainer.IntOrList `json:"nb" jsonschema:"fixed input order when select is false: an integer (every input) or a list, one per control in the dataset's control order (default: na; na + nb > 0)" param:"min=0;itemMin=0"`
	NK            *trainer.IntOrList `json:"nk" jsonschema:"input delay: an integer (every input) or a list, one per control in the dataset's control order (default: estimated per input)" param:"min=0;itemMin=0"`
	Lambda        *float64           `json:"lambda" jsonschema:"fixed ridge parameter; with select it replaces the grid" param:"default=0;min=0"`
	Diag          bool               `json:"diag" jsonschema:"every target regressed on its own past only" param:"default=false"`
	Intercept     *bool              `json:"intercept" jsonschema:"constant term c" param:"default=true"`
	Detrend       string             `json:"detrend" jsonschema:"trend removed from every input and output before the fit and added back at prediction: none, mean, or linear (level + slope per step of the run, estimated on the train runs)" param:"default=\"none\";enum=none|mean|linear"`
	Physics       any                `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"` // see linDecodeParams
	PhysicsSha256 any                `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`                    // pinned by job.submit beside physics
}

// linPerInput resolves an integer-or-list param for the nu controls: nil
// when absent, an error naming the field when the list has the wrong
// length or a negative entry.
func linPerInput(name string, v *trainer.IntOrList, controls []string) ([]int, error) {
	if v == nil {
		return nil, nil
	}
	l := v.For(len(controls))
	if l == nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "params."+name, "params.%s has %d entries; the model has %d inputs, one per control (%s)",
			name, len(v.List), len(controls), strings.Join(controls, ", "))
	}
	for a, x := range l {
		if x < 0 {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "params."+name, "params.%s: %d for %s must not be negative", name, x, controls[a])
		}
	}
	return l, nil
}

// CheckDatasetParams checks what the param schema cannot: the per-input
// lists nb and nk have one entry per control of the dataset.
func (OneStep) CheckDatasetParams(params json.RawMessage, m *dataset.Manifest) error {
	var p arxParams
	if err := linDecodeParams(params, &p); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    *trainer.IntOrList
	}{{"nb", p.NB}, {"nk", p.NK}} {
		if _, err := linPerInput(f.name, f.v, m.Controls); err != nil {
			return err
		}
	}
	return nil
}

// arxOrders builds the orders na, nb, nk (per input unless every input has
// the same nb and nk).
func arxOrders(na int, nbs, nks []int, diag bool) linear.ARXOrders {
	o := linear.ARXOrders{NA: na, Diag: diag}
	same := len(nbs) > 0
	for a := range nbs {
		if nbs[a] != nbs[0] || nks[a] != nks[0] {
			same = false
		}
	}
	if same {
		o.NB, o.NK = nbs[0], nks[0]
		return o
	}
	o.NBs, o.NKs = append([]int(nil), nbs...), append([]int(nil), nks...)
	return o
}

// arxArtifact is the aml.arx/1 model.json. Theta has one column per output
// and one row per regressor, in scaled units ỹ = (y−yMean)/yStd,
// ũ = (u−uMean)/uStd; the regressor of output o at time k is
//
//	full: [ỹ(k−1)ᵀ … ỹ(k−na)ᵀ  ũ-block(lo) … ũ-block(hi−1)  1]
//	diag: [ỹ_o(k−1) … ỹ_o(k−na)  ũ-block(lo) … ũ-block(hi−1)  1]
//
// where ũ-block(j) lists ũ_a(k−j) of the inputs a with
// nk_a ≤ j < nk_a + nb_a in input order, lo is the smallest delay and hi
// the largest nk_a + nb_a (with one nb and nk for all inputs:
// ũ(k−nk)ᵀ … ũ(k−nk−nb+1)ᵀ); the 1 only with an intercept;
// ŷ = yMean + yStd·(regressorᵀ Theta). nb and nk are integers (all inputs)
// or lists (one per input; written by this version). inputs and outputs
// name the columns of u and y.
type arxArtifact struct {
	Format    string            `json:"format"`
	Inputs    []string          `json:"inputs"`
	Outputs   []string          `json:"outputs"`
	NA        int               `json:"na"`
	NB        trainer.IntOrList `json:"nb"`
	NK        trainer.IntOrList `json:"nk"`
	Diag      bool              `json:"diag"`
	Intercept bool              `json:"intercept"`
	Scaling   string            `json:"scaling"`
	Lambda    float64           `json:"lambda"`
	YMean     []float64         `json:"yMean"`
	YStd      []float64         `json:"yStd"`
	UMean     []float64         `json:"uMean"`
	UStd      []float64         `json:"uStd"`
	Theta     [][]float64       `json:"theta"`
	MaxLag    int               `json:"maxLag"`
	TrainRows int               `json:"trainRows"`
	// Detrend, when present, is the trend removed before the fit: theta
	// models the detrended data, predictions get the trend back.
	Detrend  *linTrend        `json:"detrend,omitempty"`
	Training *linTrainingJSON `json:"training,omitempty"`
}

const defaultMaxDelay = 5

func (OneStep) Train(ctx context.Context, tc *trainer.TrainContext) error {
	const ref = "one_step@1"
	b := tc.Dataset
	var p arxParams
	if err := linDecodeParams(tc.Params, &p); err != nil {
		return err
	}
	c, err := linColumnsOf(b.Manifest, ref)
	if err != nil {
		return err
	}
	nu := len(c.inputs)
	nbs, err := linPerInput("nb", p.NB, c.inputs)
	if err != nil {
		return err
	}
	nks, err := linPerInput("nk", p.NK, c.inputs)
	if err != nil {
		return err
	}
	H := b.Manifest.HistorySteps
	sel := p.NA == nil && p.NB == nil && p.NK == nil
	if p.Select != nil {
		sel = *p.Select
	}
	crit := p.Criterion
	if crit == "" {
		crit = linear.CriterionSimulation
	}
	if crit != linear.CriterionSimulation && crit != linear.CriterionOneStep {
		return fmt.Errorf("params: criterion %q: simulation or one_step", crit)
	}
	selection, err := linSelectionMethod(p.Selection, p.CVFolds)
	if err != nil {
		return err
	}
	if p.MaxOrder < 0 {
		return fmt.Errorf("params: maxOrder must not be negative")
	}
	opts := linear.ARXOptions{NoIntercept: p.Intercept != nil && !*p.Intercept}
	maxO := p.MaxOrder
	if maxO == 0 {
		maxO = defaultMaxARX
	}
	na := 2
	if p.NA != nil {
		na = *p.NA
	}
	if sel && (p.NA != nil || p.NB != nil) {
		return errors.New("params: na and nb are chosen by the selection; set select to false to fix them")
	}
	if !sel && nbs == nil {
		nbs = make([]int, nu)
		for a := range nbs {
			nbs[a] = na
		}
	}
	// delay estimation: the sweep's candidates and the data it needs
	minDelay := 0
	if p.Feedthrough != nil && !*p.Feedthrough {
		minDelay = 1
	}
	maxDelay := min(defaultMaxDelay, H-1)
	if p.MaxDelay != nil {
		if *p.MaxDelay < 0 || *p.MaxDelay > H-1 {
			return fmt.Errorf("params: maxDelay %d: 0 … history − 1 = %d", *p.MaxDelay, H-1)
		}
		maxDelay = *p.MaxDelay
	}
	estimate := nks == nil
	if estimate && maxDelay < minDelay {
		return fmt.Errorf("the dataset's history of %d steps leaves no delay ≥ %d to estimate; give nk", H, minDelay)
	}
	const sweepNA, sweepNB = 2, 2
	// the largest lag any model may get decides the shortest usable piece
	lagBound := 0
	if estimate {
		lagBound = max(sweepNA, maxDelay+sweepNB-1)
		if sel {
			lagBound = max(lagBound, min(H, maxDelay+maxO-1))
		} else {
			for a := range nbs {
				lagBound = max(lagBound, min(H, maxDelay+nbs[a]-1))
			}
			lagBound = max(lagBound, na)
		}
	} else if sel {
		lagBound = min(H, max(maxO, slices.Max(nks)+maxO-1))
	} else {
		lagBound = arxOrders(na, nbs, nks, p.Diag).MaxLag()
	}
	linProgress(tc, 0.02, "reading runs")
	needVal := sel && selection.method == selVal
	d, err := linPrepareData(b, c, lagBound+1, lagBound+1, needVal, p.Detrend)
	if err != nil {
		return err
	}
	var delays *linDelaysJSON
	if estimate {
		linProgress(tc, 0.04, "estimating the input delays")
		est, dsc, err := linear.EstimateDelays(d.train.y, d.train.u, sweepNA, sweepNB, minDelay, maxDelay, opts)
		if err != nil {
			return fmt.Errorf("delay estimation: %w", err)
		}
		nks = est
		delays = &linDelaysJSON{Method: fmt.Sprintf("ARX(na=%d nb=%d) sweep per input over nk = %d..%d on the train segments (two passes, other inputs at their current delay); score: one-step mean NRMSE on the train segments; the shortest delay within %g%% of the best wins",
			sweepNA, sweepNB, minDelay, maxDelay, 100*linear.DelayTol), Inputs: c.inputs, Estimated: est}
		for _, x := range dsc {
			delays.Scores = append(delays.Scores, linDelayScoreJSON{Input: c.inputs[x.Input], NK: x.NK, Value: linNum(x.Value)})
		}
	}
	var grid []linear.ARXOrders
	var lambdas []float64
	if sel {
		for n := 1; n <= maxO; n++ {
			nb := make([]int, nu)
			for a := range nb {
				nb[a] = n
			}
			if o := arxOrders(n, nb, nks, p.Diag); o.MaxLag() <= H {
				grid = append(grid, o)
			}
		}
		if len(grid) == 0 {
			return fmt.Errorf("no ARX structure of the grid fits the dataset's history of %d steps (delays %v)", H, nks)
		}
		lambdas = []float64{0, 1, 100}
		if len(p.Lambdas) > 0 {
			lambdas = p.Lambdas
		}
		if p.Lambda != nil {
			lambdas = []float64{*p.Lambda}
		}
	} else {
		o := arxOrders(na, nbs, nks, p.Diag)
		nbSum := 0
		for _, x := range nbs {
			nbSum += x
		}
		if o.NA < 0 || o.NA+nbSum == 0 {
			return fmt.Errorf("params: orders %v: non-negative, na+nb > 0", o)
		}
		if o.MaxLag() > H {
			return fmt.Errorf("params: the largest lag of %v is %d, more than the dataset's history of %d steps (a window could not initialise the model)", o, o.MaxLag(), H)
		}
		grid = []linear.ARXOrders{o}
		lambdas = []float64{0}
		if p.Lambda != nil {
			lambdas = []float64{*p.Lambda}
		}
	}
	for _, l := range lambdas {
		if !(l >= 0) || math.IsInf(l, 0) {
			return fmt.Errorf("params: ridge parameter %v must be finite and ≥ 0", l)
		}
	}
	var m *linear.ARX
	var scores []linScoreJSON
	if sel {
		progress := linSelectionProgress(ctx, tc, 0.05, 0.85, "selecting ARX structure")
		var sc []linear.Score
		if selection.method == selCV {
			m, sc, err = linear.SelectARXCV(d.train.y, d.train.u, grid, lambdas, crit, opts, selection.folds, progress)
		} else {
			m, sc, err = linear.SelectARXSegments(d.selTrain.y, d.selTrain.u, d.val.y, d.val.u, grid, lambdas, crit, opts, progress)
		}
		scores = linScoresJSON(sc, true, nu)
		if err != nil {
			return err
		}
		if selection.method == selVal && d.refit {
			linProgress(tc, 0.9, "refitting on the train runs")
			o := opts
			o.Lambda = m.Lambda
			if m, err = linear.FitARXSegments(d.train.y, d.train.u, m.Orders, o); err != nil {
				return err
			}
		}
	} else {
		linProgress(tc, 0.1, "fitting")
		o := opts
		o.Lambda = lambdas[0]
		if m, err = linear.FitARXSegments(d.train.y, d.train.u, grid[0], o); err != nil {
			return err
		}
	}
	linProgress(tc, 0.95, "writing")
	art := newARXArtifact(m, c.inputs, c.outputs)
	art.Detrend = d.trend
	art.Training = linTrainingInfo(tc, d, scores)
	art.Training.Delays = delays
	if sel {
		art.Training.Selection = "validation on the " + d.validation
		if selection.method == selCV {
			art.Training.Selection = selection.describe()
		}
		art.Training.Chosen = fmt.Sprintf("%v λ=%g", m.Orders, m.Lambda)
	}
	if err := writeJSON(filepath.Join(tc.ArtifactsDir, model.FileName), art); err != nil {
		return fmt.Errorf("write the model (non-finite parameters?): %w", err)
	}
	return nil
}

// linSelection is the selection method of a trainer's params.
type linSelection struct {
	method string
	folds  int
}

func linSelectionMethod(method string, folds int) (linSelection, error) {
	if folds < 0 || folds == 1 {
		return linSelection{}, fmt.Errorf("params: cvFolds %d: at least 2 (0: the default %d)", folds, linear.DefaultCVFolds)
	}
	if folds == 0 {
		folds = linear.DefaultCVFolds
	}
	switch method {
	case "", selCV:
		return linSelection{selCV, folds}, nil
	case selVal:
		return linSelection{selVal, 0}, nil
	}
	return linSelection{}, fmt.Errorf("params: selection %q: cv or val", method)
}

func (s linSelection) describe() string {
	return fmt.Sprintf("block cross-validation: %d contiguous blocks of the train runs' segments, fit on %d, free-run score on the held-out one, mean over the folds", s.folds, s.folds-1)
}

// newARXArtifact describes m, whose inputs and outputs are the named
// columns, as an aml.arx/1 model.json (nb and nk as per-input lists).
func newARXArtifact(m *linear.ARX, inputs, outputs []string) *arxArtifact {
	return &arxArtifact{Format: FormatARX, Inputs: inputs, Outputs: outputs, NA: m.Orders.NA,
		NB: trainer.IntOrList{List: perInput(m.Orders, len(inputs), true), IsList: true},
		NK: trainer.IntOrList{List: perInput(m.Orders, len(inputs), false), IsList: true}, Diag: m.Orders.Diag,
		Intercept: m.Intercept, Scaling: m.Scaling.String(), Lambda: m.Lambda, YMean: m.YMean, YStd: m.YStd, UMean: m.UMean, UStd: m.UStd,
		Theta: linRows(m.Theta), MaxLag: m.Orders.MaxLag(), TrainRows: m.TrainRows}
}

// perInput lists nb (or nk) of every one of nu inputs.
func perInput(o linear.ARXOrders, nu int, nb bool) []int {
	l := make([]int, nu)
	for a := range l {
		if nb {
			l[a] = o.InputNB(a)
		} else {
			l[a] = o.InputNK(a)
		}
	}
	return l
}

func loadARX(b []byte, dir string, man *dataset.Manifest) (model.Predictor, error) {
	var a arxArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	m, err := a.model()
	if err != nil {
		return nil, err
	}
	p, err := newLinearPredictor(FormatARX, man, a.Inputs, a.Outputs, m.Orders.MaxLag(), "the model's largest lag")
	if err != nil {
		return nil, err
	}
	p.arx = m
	if p.trend = a.Detrend; p.trend != nil {
		if err := p.trend.check(len(a.Inputs), len(a.Outputs)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// model rebuilds the linear.ARX: scalar nb and nk (older artifacts) are
// the orders of every input, lists the per-input ones.
func (a *arxArtifact) model() (*linear.ARX, error) {
	sc, err := linParseScaling(a.Scaling)
	if err != nil {
		return nil, err
	}
	nu := len(a.Inputs)
	o := linear.ARXOrders{NA: a.NA, NB: a.NB.N, NK: a.NK.N, Diag: a.Diag}
	for _, f := range []struct {
		name string
		v    trainer.IntOrList
		dst  *[]int
	}{{"nb", a.NB, &o.NBs}, {"nk", a.NK, &o.NKs}} {
		if f.v.IsList {
			if len(f.v.List) != nu {
				return nil, model.Invalid(f.name, "has %d entries for %d inputs", len(f.v.List), nu)
			}
			*f.dst = f.v.List
		}
	}
	if o.PerInput() {
		// lists: the scalars do not apply; equal lists are the scalar orders
		nbs, nks := perInput(o, nu, true), perInput(o, nu, false)
		if len(nbs) > 0 {
			o = arxOrders(a.NA, nbs, nks, a.Diag)
		}
	}
	m := &linear.ARX{Orders: o, NY: len(a.Outputs), NU: nu,
		YMean: a.YMean, YStd: a.YStd, UMean: a.UMean, UStd: a.UStd, Lambda: a.Lambda, Scaling: sc, Intercept: a.Intercept, TrainRows: a.TrainRows}
	if len(a.Theta) > 0 {
		if m.Theta, err = linDense("theta", a.Theta, len(a.Theta), len(a.Theta[0])); err != nil {
			return nil, err
		}
	}
	if err := m.Restore(); err != nil {
		return nil, model.Invalid("theta", "%v", err)
	}
	return m, nil
}

// ---------------------------------------------------------------- state space

// LinearStateSpace ("linear_state_space@1") identifies a discrete-time
// state-space model x(k+1) = A x(k) + B ũ(k), ỹ(k) = C x(k) + D ũ(k)
// (standardised targets ỹ and controls ũ) by multi-experiment PO-MOESP
// over the NaN-free segments of the train runs, with stability enforcement
// and prediction-error refinement (see the top of linear.go and
// linear.FitSubspaceSegments).
//
// Params:
//
//	order       state dimension; 0 (default) selects it among 1..maxOrder by
//	            the free-run NRMSE (selection cv: block cross-validation of
//	            the train runs' segments, linear.SelectStateSpaceCV: the
//	            smallest order within 1 % of the best mean over the folds;
//	            val: on the val runs or the last 25 % of every train run,
//	            the best); orders the data
//	            cannot support (NY·blockRows ≤ order) are skipped and
//	            reported, an error only when none is left
//	selection   cv (default) or val, as for one_step@1
//	cvFolds     blocks of the cross-validation (default 3)
//	maxOrder    largest candidate order (default 10)
//	delays      per-input delays d_a (one per control, dataset order;
//	            default none): the model sees u_a(k − d_a), in the fit (each
//	            segment loses its first max d_a steps) and in prediction
//	            (the window history supplies the delayed inputs; before a
//	            window's or run's first step the first input is held)
//	blockRows   block rows of the Hankel matrices (default: the library's,
//	            max(10, 2·maxOrder/nTargets, order+1) limited by the data)
//	feedthrough estimate D (u(k) acts on y(k)); default false
//	refine      Levenberg–Marquardt simulation-error refinement (default true)
//	initSteps   steps used to estimate the initial state of a validation
//	            segment (default 5); the dataset's history must be at least
//	            this long
//	windowX0    how a window's initial state is estimated from its H history
//	            rows: "prior" (MAP with the training-state prior,
//	            linear.EstimateX0), "ls" (plain least squares,
//	            linear.EstimateX0LS) or "auto" (default): the one with the
//	            smaller mean NRMSE over the dataset's H/F windows of the
//	            validation segments (at most 4000 windows; "prior" on a tie
//	            or without such windows). Free-run simulation of whole runs
//	            (SimulateRun) always uses the prior, whose regularisation
//	            matters for its few (nInit) initialisation steps.
//	detrend     none (default), mean or linear, as for one_step@1
//	physics     ignored (the key is accepted for benchmark tools)
type LinearStateSpace struct{}

func (LinearStateSpace) Ref() string           { return "linear_state_space@1" }
func (LinearStateSpace) HasTrainingStep() bool { return true }

type ssParams struct {
	Order         int    `json:"order" jsonschema:"state dimension; 0 selects it among 1..maxOrder by the free-run NRMSE (see selection); orders the data cannot support are skipped" param:"default=0;min=0"`
	MaxOrder      int    `json:"maxOrder" jsonschema:"largest candidate order (0: the default, at least order)" param:"default=10;min=0"`
	BlockRows     int    `json:"blockRows" jsonschema:"block rows of the Hankel matrices (0: the library's, max(10, 2·maxOrder/nTargets, order+1) limited by the data)" param:"default=0;min=0"`
	Feedthrough   bool   `json:"feedthrough" jsonschema:"estimate D (u(k) acts on y(k))" param:"default=false"`
	Refine        *bool  `json:"refine" jsonschema:"Levenberg–Marquardt simulation-error refinement" param:"default=true"`
	InitSteps     int    `json:"initSteps" jsonschema:"steps used to estimate the initial state of a validation segment (0: the default); the dataset's history must be at least this long" param:"default=5;min=0"`
	WindowX0      string `json:"windowX0" jsonschema:"how a window's initial state is estimated from its history rows: prior (MAP with the training-state prior), ls (least squares) or auto (the better on validation windows)" param:"default=\"auto\";enum=auto|prior|ls"`
	Selection     string `json:"selection" jsonschema:"how the order is chosen: cv, block cross-validation of the train runs (the val runs stay for calibration), or val, on the val runs (without them the last 25% of every train run)" param:"default=\"cv\";enum=cv|val"`
	CVFolds       int    `json:"cvFolds" jsonschema:"blocks of the cross-validation (0: the default)" param:"default=3;min=0"`
	Delays        []int  `json:"delays" jsonschema:"per-input delays, one per control in the dataset's control order: the model sees u(k − delay) (default none)" param:"itemMin=0"`
	Detrend       string `json:"detrend" jsonschema:"trend removed from every input and output before the fit and added back at prediction: none, mean, or linear (level + slope per step of the run, estimated on the train runs)" param:"default=\"none\";enum=none|mean|linear"`
	Physics       any    `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"` // see linDecodeParams
	PhysicsSha256 any    `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
}

// ssArtifact is the aml.statespace/1 model.json: the model
//
//	x(k+1) = A x(k) + B ũ(k),  ỹ(k) = C x(k) + D ũ(k),
//	ũ = (u − uMean)/uStd,  y = yMean + yStd·ỹ
//
// (yMean includes the estimated output offset), with matrices row-major,
// and the Gaussian initial-state prior (xMean, xCov, noiseVar) used to
// estimate initial states. windowX0 ("prior", the default when empty, or
// "ls") selects how a window's initial state is estimated from its history;
// initSteps is the shortest history the model accepts.
type ssArtifact struct {
	Format    string      `json:"format"`
	Inputs    []string    `json:"inputs"`
	Outputs   []string    `json:"outputs"`
	Order     int         `json:"order"`
	A         [][]float64 `json:"A"`
	B         [][]float64 `json:"B"`
	C         [][]float64 `json:"C"`
	D         [][]float64 `json:"D"`
	Scaling   string      `json:"scaling"`
	YMean     []float64   `json:"yMean"`
	YStd      []float64   `json:"yStd"`
	UMean     []float64   `json:"uMean"`
	UStd      []float64   `json:"uStd"`
	XMean     []float64   `json:"xMean"`
	XCov      [][]float64 `json:"xCov"`
	NoiseVar  []float64   `json:"noiseVar"`
	InitSteps int         `json:"initSteps"`
	WindowX0  string      `json:"windowX0"`
	// Delays, when present, are the input delays: the model's input a at
	// step k is u_a(k − delays[a]) (the first input held before a
	// window's or run's first step).
	Delays []int `json:"delays,omitempty"`
	// Detrend, when present, is the trend removed before the fit (the
	// model is of the detrended data; predictions get it back).
	Detrend *linTrend `json:"detrend,omitempty"`
	// Diagnostics (information only).
	WindowX0Scores map[string]linNum `json:"windowX0Scores,omitempty"` // mean window NRMSE per estimator
	OutputOffset   []float64         `json:"outputOffset,omitempty"`
	BlockRows      int               `json:"blockRows"`
	SingularValues []float64         `json:"singularValues,omitempty"`
	SpectralRadius float64           `json:"spectralRadius"`
	Stabilized     bool              `json:"stabilized"`
	Refined        bool              `json:"refined"`
	RefineIters    int               `json:"refineIters"`
	TrainMSEInit   linNum            `json:"trainMseInit"`
	TrainMSE       linNum            `json:"trainMse"`
	Training       *linTrainingJSON  `json:"training,omitempty"`
}

func (LinearStateSpace) Train(ctx context.Context, tc *trainer.TrainContext) error {
	const ref = "linear_state_space@1"
	b := tc.Dataset
	var p ssParams
	if err := linDecodeParams(tc.Params, &p); err != nil {
		return err
	}
	c, err := linColumnsOf(b.Manifest, ref)
	if err != nil {
		return err
	}
	if p.Order < 0 || p.MaxOrder < 0 || p.BlockRows < 0 || p.InitSteps < 0 {
		return errors.New("params: order, maxOrder, blockRows and initSteps must not be negative")
	}
	if p.InitSteps == 0 {
		p.InitSteps = 5
	}
	if H := b.Manifest.HistorySteps; p.InitSteps > H {
		return fmt.Errorf("params: initSteps %d is more than the dataset's history of %d steps (a window could not initialise the model)", p.InitSteps, H)
	}
	if p.MaxOrder == 0 {
		p.MaxOrder = max(defaultMaxSS, p.Order)
	}
	switch p.WindowX0 {
	case "":
		p.WindowX0 = "auto"
	case "auto", x0Prior, x0LS:
	default:
		return fmt.Errorf("params: windowX0 %q: auto, prior or ls", p.WindowX0)
	}
	if p.Order > p.MaxOrder {
		return fmt.Errorf("params: order %d above maxOrder %d", p.Order, p.MaxOrder)
	}
	selection, err := linSelectionMethod(p.Selection, p.CVFolds)
	if err != nil {
		return err
	}
	maxD, err := ssCheckDelays(p.Delays, c.inputs, b.Manifest.HistorySteps)
	if err != nil {
		return err
	}
	opts := linear.SubspaceOptions{Order: p.Order, MaxOrder: p.MaxOrder, BlockRows: p.BlockRows, Feedthrough: p.Feedthrough,
		Refine: p.Refine == nil || *p.Refine, NInit: p.InitSteps, Seed: tc.Seed}
	sel := p.Order == 0
	linProgress(tc, 0.02, "reading runs")
	auto := p.WindowX0 == "auto"
	needVal := (sel && selection.method == selVal) || auto
	d, err := linPrepareData(b, c, minSSSegment+maxD, p.InitSteps+1+maxD, needVal, p.Detrend)
	if err != nil && !(sel && selection.method == selVal) && auto {
		// validation data only for the window estimator: without them it
		// falls back to the prior
		d, err = linPrepareData(b, c, minSSSegment+maxD, p.InitSteps+1+maxD, false, p.Detrend)
	}
	if err != nil {
		return err
	}
	if maxD > 0 {
		for _, sg := range []*linSegments{&d.train, &d.selTrain, &d.val} {
			sg.delay(p.Delays, maxD)
		}
	}
	d.refit = d.refit && sel && selection.method == selVal
	var m *linear.StateSpace
	var scores []linScoreJSON
	if sel {
		orders := make([]int, p.MaxOrder)
		for i := range orders {
			orders[i] = i + 1
		}
		progress := linSelectionProgress(ctx, tc, 0.05, 0.8, "selecting the order")
		var sc []linear.Score
		if selection.method == selCV {
			m, sc, err = linear.SelectStateSpaceCV(d.train.y, d.train.u, orders, opts, selection.folds, progress)
		} else {
			m, sc, err = linear.SelectStateSpaceSegments(d.selTrain.y, d.selTrain.u, d.val.y, d.val.u, orders, opts, progress)
		}
		scores = linScoresJSON(sc, false, len(c.inputs))
		if err != nil {
			return err
		}
		if d.refit {
			linProgress(tc, 0.85, "refitting on the train runs")
			o := opts
			o.Order = m.N
			o.BlockRows = m.BlockRows
			if m, err = linear.FitSubspaceSegments(d.train.y, d.train.u, o); err != nil {
				return err
			}
		}
	} else {
		linProgress(tc, 0.1, "fitting")
		if m, err = linear.FitSubspaceSegments(d.train.y, d.train.u, opts); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	art := newSSArtifact(m, c.inputs, c.outputs, p.InitSteps)
	art.Detrend = d.trend
	if maxD > 0 {
		art.Delays = p.Delays
	}
	art.WindowX0 = p.WindowX0
	if p.WindowX0 == "auto" {
		linProgress(tc, 0.9, "choosing the window initial-state estimator")
		var sc map[string]float64
		art.WindowX0, sc = chooseWindowX0(m, d.val, b.Manifest.HistorySteps, b.Manifest.HorizonSteps)
		art.WindowX0Scores = map[string]linNum{}
		for k, v := range sc {
			art.WindowX0Scores[k] = linNum(v)
		}
	}
	linProgress(tc, 0.95, "writing")
	art.Training = linTrainingInfo(tc, d, scores)
	if sel {
		art.Training.Selection = "validation on the " + d.validation
		if selection.method == selCV {
			art.Training.Selection = selection.describe() + fmt.Sprintf("; the smallest order within %g%% of the best", 100*linear.OrderTol)
		}
		art.Training.Chosen = fmt.Sprintf("order %d (block rows %d)", m.N, m.BlockRows)
	}
	if err := writeJSON(filepath.Join(tc.ArtifactsDir, model.FileName), art); err != nil {
		return fmt.Errorf("write the model (non-finite parameters?): %w", err)
	}
	return nil
}

// ssCheckDelays checks the delays param (one per control, 0 … history)
// and returns the largest delay (0 without delays).
func ssCheckDelays(delays []int, controls []string, H int) (int, error) {
	if delays == nil {
		return 0, nil
	}
	if len(delays) != len(controls) {
		return 0, core.FieldErrorf(core.CodeInvalidArgument, "params.delays", "params.delays has %d entries; the model has %d inputs, one per control (%s)",
			len(delays), len(controls), strings.Join(controls, ", "))
	}
	maxD := 0
	for a, v := range delays {
		if v < 0 || v > H {
			return 0, core.FieldErrorf(core.CodeInvalidArgument, "params.delays", "params.delays: %d for %s must be in 0 … the dataset's history of %d steps", v, controls[a], H)
		}
		maxD = max(maxD, v)
	}
	return maxD, nil
}

// CheckDatasetParams checks what the param schema cannot: delays has one
// entry per control of the dataset, each at most its history.
func (LinearStateSpace) CheckDatasetParams(params json.RawMessage, m *dataset.Manifest) error {
	var p ssParams
	if err := linDecodeParams(params, &p); err != nil {
		return err
	}
	_, err := ssCheckDelays(p.Delays, m.Controls, m.HistorySteps)
	return err
}

// delay replaces every segment by its delayed-input version: rows k ≥ maxD
// with input a taken at k − delays[a]; segments left shorter than
// minSSSegment are dropped.
func (s *linSegments) delay(delays []int, maxD int) {
	var ys, us [][][]float64
	n := 0
	for i := range s.y {
		T := len(s.y[i])
		if T-maxD < minSSSegment {
			s.dropped += T
			continue
		}
		u := make([][]float64, T-maxD)
		for k := range u {
			u[k] = make([]float64, len(delays))
			for a, d := range delays {
				u[k][a] = s.u[i][maxD+k-d][a]
			}
		}
		ys, us = append(ys, s.y[i][maxD:]), append(us, u)
		n += T - maxD
		s.dropped += maxD
	}
	s.y, s.u, s.samples = ys, us, n
}

// delayInputs returns u with input a delayed by delays[a] steps, the first
// row held before the start (u itself without delays).
func delayInputs(u [][]float64, delays []int) [][]float64 {
	if delays == nil {
		return u
	}
	out := make([][]float64, len(u))
	for k := range u {
		out[k] = make([]float64, len(delays))
		for a, d := range delays {
			out[k][a] = u[max(0, k-d)][a]
		}
	}
	return out
}

// Window initial-state estimators of the state-space predictor.
const (
	x0Prior = "prior"
	x0LS    = "ls"
)

// maxX0Windows bounds the validation windows chooseWindowX0 scores.
const maxX0Windows = 4000

// chooseWindowX0 scores both initial-state estimators on the H/F windows of
// the validation segments (every stride-th window so that at most
// maxX0Windows are used) by the mean over outputs of the NRMSE over all F
// steps, and returns the better one ("prior" on a tie or when there is no
// window) with both scores.
func chooseWindowX0(m *linear.StateSpace, val linSegments, H, F int) (string, map[string]float64) {
	total := 0
	for _, y := range val.y {
		total += max(0, len(y)-H-F+1)
	}
	if total == 0 {
		return x0Prior, nil
	}
	stride := (total + maxX0Windows - 1) / maxX0Windows
	scores := map[string]float64{}
	for _, est := range []string{x0Prior, x0LS} {
		var yt, yp [][]float64
		for s, y := range val.y {
			u := val.u[s]
			for w := H; w+F <= len(y); w += stride {
				hy, hu := y[w-H:w], u[w-H:w+F]
				var x0 []float64
				if est == x0LS {
					x0 = m.EstimateX0LS(hy, hu, H)
				} else {
					x0 = m.EstimateX0(hy, hu, H)
				}
				sim := m.Simulate(hu, x0)
				yt = append(yt, y[w:w+F]...)
				yp = append(yp, sim[H:]...)
			}
		}
		scores[est] = linear.Mean(linear.NRMSE(yt, yp, 0))
	}
	if scores[x0LS] < scores[x0Prior] {
		return x0LS, scores
	}
	return x0Prior, scores
}

// newSSArtifact describes m (a fitted model, with its initial-state
// prior), whose inputs and outputs are the named columns, as an
// aml.statespace/1 model.json.
func newSSArtifact(m *linear.StateSpace, inputs, outputs []string, initSteps int) *ssArtifact {
	a := &ssArtifact{Format: FormatStateSpace, Inputs: inputs, Outputs: outputs, Order: m.N,
		A: linRows(m.A), B: linRows(m.B), C: linRows(m.C), D: linRows(m.D), Scaling: m.Scaling.String(),
		YMean: m.YMean, YStd: m.YStd, UMean: m.UMean, UStd: m.UStd, XMean: m.XMean, NoiseVar: m.NoiseVar,
		InitSteps: initSteps, OutputOffset: m.OutputOffset, BlockRows: m.BlockRows, SingularValues: m.SingularValues,
		SpectralRadius: m.SpectralRadius(), Stabilized: m.Stabilized, Refined: m.Refined, RefineIters: m.RefineIters,
		TrainMSEInit: linNum(m.TrainMSEInit), TrainMSE: linNum(m.TrainMSE)}
	if m.XCov != nil {
		a.XCov = linRows(mat.DenseCopyOf(m.XCov))
	}
	return a
}

func loadStateSpace(b []byte, dir string, man *dataset.Manifest) (model.Predictor, error) {
	var a ssArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	m, err := a.model()
	if err != nil {
		return nil, err
	}
	if a.InitSteps < 1 {
		return nil, model.Invalid("initSteps", "must be at least 1, got %d", a.InitSteps)
	}
	switch a.WindowX0 {
	case "", x0Prior, x0LS:
	default:
		return nil, model.Invalid("windowX0", "unknown initial-state estimator %q (prior or ls)", a.WindowX0)
	}
	p, err := newLinearPredictor(FormatStateSpace, man, a.Inputs, a.Outputs, a.InitSteps, "initSteps")
	if err != nil {
		return nil, err
	}
	p.ss = m
	p.windowLS = a.WindowX0 == x0LS
	if p.trend = a.Detrend; p.trend != nil {
		if err := p.trend.check(len(a.Inputs), len(a.Outputs)); err != nil {
			return nil, err
		}
	}
	if a.Delays != nil {
		if len(a.Delays) != len(a.Inputs) {
			return nil, model.Invalid("delays", "has %d entries for %d inputs", len(a.Delays), len(a.Inputs))
		}
		for _, d := range a.Delays {
			if d < 0 || d > p.d.H {
				return nil, model.Invalid("delays", "delay %d outside 0 … the dataset's history of %d steps", d, p.d.H)
			}
		}
		p.delays = a.Delays
	}
	return p, nil
}

// model rebuilds the linear.StateSpace.
func (a *ssArtifact) model() (*linear.StateSpace, error) {
	sc, err := linParseScaling(a.Scaling)
	if err != nil {
		return nil, err
	}
	n, ny, nu := a.Order, len(a.Outputs), len(a.Inputs)
	if n < 1 || ny < 1 || nu < 1 {
		return nil, model.Invalid("order", "order %d with %d outputs and %d inputs", n, ny, nu)
	}
	m := &linear.StateSpace{N: n, NY: ny, NU: nu, Scaling: sc, YMean: a.YMean, YStd: a.YStd, UMean: a.UMean, UStd: a.UStd,
		XMean: a.XMean, NoiseVar: a.NoiseVar, OutputOffset: a.OutputOffset, BlockRows: a.BlockRows, SingularValues: a.SingularValues,
		Stabilized: a.Stabilized, Refined: a.Refined, RefineIters: a.RefineIters, TrainMSEInit: float64(a.TrainMSEInit), TrainMSE: float64(a.TrainMSE)}
	for _, c := range []struct {
		name string
		dst  **mat.Dense
		x    [][]float64
		r, c int
	}{{"A", &m.A, a.A, n, n}, {"B", &m.B, a.B, n, nu}, {"C", &m.C, a.C, ny, n}, {"D", &m.D, a.D, ny, nu}} {
		if *c.dst, err = linDense(c.name, c.x, c.r, c.c); err != nil {
			return nil, err
		}
	}
	if a.XCov != nil {
		cov, err := linDense("xCov", a.XCov, n, n)
		if err != nil {
			return nil, err
		}
		m.XCov = mat.NewSymDense(n, nil)
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				m.XCov.SetSym(i, j, cov.At(i, j))
			}
		}
	}
	if err := m.Restore(); err != nil {
		return nil, model.Invalid("model", "%v", err)
	}
	return m, nil
}

// ---------------------------------------------------------------- predictor

// linearPredictor predicts dataset windows with an ARX or state-space model
// and simulates whole runs (eval.RunSimulator).
type linearPredictor struct {
	format   string
	d        dataset.Dims
	arx      *linear.ARX
	ss       *linear.StateSpace
	windowLS bool      // state space: least-squares window initial state
	delays   []int     // state space: input delays (nil: none)
	trend    *linTrend // removed from the data the model sees (nil: none)
	xIn      []int     // x column (AllNodes) of model input i
	uIn      []int     // u column (controls order) of model input i
	xOut     []int     // x column of model output o
	tgtOut   []int     // model output of dataset target k
	outTgt   []int     // dataset target of model output o
}

func newLinearPredictor(format string, man *dataset.Manifest, inputs, outputs []string, needH int, what string) (*linearPredictor, error) {
	if man.Kind != dataset.KindDynamic {
		return nil, model.Invalid("format", "%s predicts windows of a dynamic dataset; the dataset is %s", format, man.Kind)
	}
	d := man.Dims()
	if d.H < needH {
		return nil, model.Invalid("history", "the dataset's history of %d steps is shorter than %s (%d): a window cannot initialise the model", d.H, what, needH)
	}
	idx := func(names []string) map[string]int {
		m := map[string]int{}
		for i, n := range names {
			m[n] = i
		}
		return m
	}
	all, ctrl, tgt := idx(man.AllNodes), idx(man.Controls), idx(man.Targets)
	p := &linearPredictor{format: format, d: d}
	var missing []string
	for _, n := range inputs {
		j, ok := ctrl[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		p.uIn = append(p.uIn, j)
		p.xIn = append(p.xIn, all[n])
	}
	if len(missing) > 0 {
		return nil, model.Invalid("inputs", "model input(s) %s are not controls of the dataset (controls: %s)", strings.Join(missing, ", "), strings.Join(man.Controls, ", "))
	}
	out := idx(outputs)
	if len(out) != len(outputs) {
		return nil, model.Invalid("outputs", "duplicate output names %v", outputs)
	}
	for _, n := range man.Targets {
		o, ok := out[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		p.tgtOut = append(p.tgtOut, o)
	}
	if len(missing) > 0 || len(outputs) != len(man.Targets) {
		return nil, model.Invalid("outputs", "the model predicts %s, the dataset's targets are %s", strings.Join(outputs, ", "), strings.Join(man.Targets, ", "))
	}
	p.outTgt = make([]int, len(outputs))
	for o, n := range outputs {
		p.outTgt[o] = tgt[n]
		p.xOut = append(p.xOut, all[n])
	}
	return p, nil
}

func (p *linearPredictor) Format() string { return p.format }
func (p *linearPredictor) Horizon() int   { return p.d.F }

// Poles implements eval.PoleReporter: the eigenvalues of A (state space)
// or of the ARX A polynomial's companion matrix.
func (p *linearPredictor) Poles() []complex128 {
	if p.arx != nil {
		return p.arx.Poles()
	}
	return p.ss.Poles()
}

// simulate runs the model over u (model input order) initialised with the
// first nInit rows of y (model output order). An ARX model given fewer
// than its largest lag of measured steps (but at least one) assumes the
// process was at rest before the first step: the run is extended backwards
// by holding its first input and first output, so no value outside the run
// is needed (without this the missing past would be the training means,
// an inconsistent start that an ARX with slow dynamics carries for long).
func (p *linearPredictor) simulate(u, y [][]float64, nInit int) [][]float64 {
	if p.arx != nil {
		pad := p.arx.Orders.MaxLag() - nInit
		if nInit < 1 || pad <= 0 || len(u) == 0 {
			return p.arx.Simulate(u, y[:nInit])
		}
		up := make([][]float64, 0, pad+len(u))
		yp := make([][]float64, 0, pad+nInit)
		for i := 0; i < pad; i++ {
			up, yp = append(up, u[0]), append(yp, y[0])
		}
		return p.arx.Simulate(append(up, u...), append(yp, y[:nInit]...))[pad:]
	}
	return p.ss.SimulateFrom(y, u, nInit)
}

// PredictBatch predicts n windows: the history (x) initialises the model,
// which is then rolled out over the window's future controls (u).
func (p *linearPredictor) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	if err := model.CheckBatch(p.d, x, u, n); err != nil {
		return nil, err
	}
	H, F, nT := p.d.H, p.d.F, p.d.YCols
	nu, ny := len(p.xIn), len(p.xOut)
	out := make([]float32, 0, n*F*nT)
	us := make([][]float64, H+F)
	ys := make([][]float64, H)
	ubuf := make([]float64, (H+F)*nu)
	ybuf := make([]float64, H*ny)
	for k := range us {
		us[k] = ubuf[k*nu : (k+1)*nu]
	}
	for k := range ys {
		ys[k] = ybuf[k*ny : (k+1)*ny]
	}
	for w := 0; w < n; w++ {
		if w%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		windowRows(p.d, x, u, w, p.xIn, p.xOut, p.uIn, us, ys)
		var sim [][]float64
		uw, yw, tau := p.trend.detrended(us, ys)
		ud := delayInputs(uw, p.delays)
		if p.windowLS {
			sim = p.ss.Simulate(ud, p.ss.EstimateX0LS(yw, ud, H))
		} else {
			sim = p.simulate(ud, yw, H)
		}
		if p.trend != nil {
			p.trend.restore(sim, tau)
		}
		for f := 0; f < F; f++ {
			for _, o := range p.tgtOut {
				out = append(out, float32(sim[H+f][o]))
			}
		}
	}
	return out, nil
}

// SimulateRun implements eval.RunSimulator: inputs are the run's controls
// and outputs its targets in the dataset's order (at least nInit rows of
// outputs, of which the first nInit are used); the result has len(inputs)
// rows of targets. ARX: the first nInit outputs are returned as given and
// the rest simulated (with nInit below the largest lag the first input and
// output are held before the first step; with nInit 0 the training means);
// state space: the initial state is estimated from the first nInit steps
// and the whole run is simulated.
func (p *linearPredictor) SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error) {
	nC, nT := p.d.NCtrl, p.d.YCols
	if p.ss != nil && nInit == 0 && p.ss.XMean == nil {
		return nil, errors.New("SimulateRun: nInit 0 needs the model's initial-state prior")
	}
	u, y, err := runRows(inputs, outputs, nInit, nC, nT, p.uIn, p.outTgt)
	if err != nil {
		return nil, err
	}
	u, y, tau := p.trend.detrended(u, y)
	sim := p.simulate(delayInputs(u, p.delays), y, nInit)
	if p.trend != nil {
		p.trend.restore(sim, tau)
	}
	res := make([][]float64, len(sim))
	for k, row := range sim {
		res[k] = make([]float64, nT)
		for t, o := range p.tgtOut {
			res[k][t] = row[o]
		}
	}
	return res, nil
}
