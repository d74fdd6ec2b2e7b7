package engine

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"math"
	"slices"
	"sync"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Error codes of this package (public contract: never rename, only add).
const (
	// CodeModelUnsupported: the model is not a twin model (a format
	// [IsTwinFormat] does not name, a dynamic model without history and
	// horizon, a static model without a control input). HTTP 422.
	CodeModelUnsupported = core.CodeTwinModelUnsupported
	// CodeWindowInvalid: a snapshot window cannot start a rollout (wrong
	// grid, too short, a needed column entirely missing). HTTP 422.
	CodeWindowInvalid = core.CodeTwinWindowInvalid
	// CodeSceneMismatch: the scene, objective or snapshot does not fit the
	// model (a scene control the model does not have, a target it does not
	// predict). HTTP 422.
	CodeSceneMismatch = core.CodeTwinSceneMismatch
)

func errf(code, field, format string, args ...any) *core.Error {
	return core.FieldErrorf(code, field, format, args...)
}

// Twin is a loaded twin model: a dynamic model of a class the twin runs
// (aml.hybrid/1, aml.statespace/1, aml.arx/1, aml.narx/1, aml.nss/1) or a
// static quality model (aml.static-response/1, aml.static-forest/1) with
// its dataset's layout and the uncertainty figures measured when it was
// evaluated. It is
// safe for concurrent use; the only mutable part is the cache of window
// starts, guarded by a mutex, whose entries are immutable.
type Twin struct {
	modelID   string
	man       *dataset.Manifest
	pred      model.Predictor
	dyn       dynamics
	estimator string // the state estimator's name
	H, F      int
	beatMs    int64
	dt        float64
	// hideStates: the states are abstract (a state-space model's x1 … xn):
	// reported by EstimateState, no trial quantities
	hideStates bool
	// static: a static quality model (static.go): H = F = 1, the same
	// conformal width at every step, OOD over its input row (oodCols)
	static  bool
	oodCols []int // static: the columns of the OOD envelope's row (the model's inputs); nil: every column

	// model quantities
	ctrl, dist []qcol // model order
	outs       []qcol // dataset target order: the model quantity each target is
	states     []string
	stateCol   []int    // per state: the column measuring it directly, or -1
	modelOuts  []string // obs then guards
	nodes      []string // manifest AllNodes
	colOf      map[string]int

	// uncertainty measured at evaluation
	widths      [][]float64 // [F][targets] conformal half-widths
	coverage    float64     // calibrated level q (0 without a calibration)
	measuredCov float64     // coverage measured on the test split (0 without)
	calWindows  int
	ood         *eval.OOD
	members     int

	mu    sync.Mutex
	cache map[[32]byte]*snapStart
	order [][32]byte
}

// qcol is a model quantity and its dataset column.
type qcol struct {
	name     string
	col      int // index in AllNodes, -1 none
	fallback float64
}

// Load loads registered model modelID from store st (artifacts and
// datasets under dataDir) for the twin: [LoadFrom] over [StoreSource].
func Load(ctx context.Context, st ModelStore, dataDir, modelID string) (*Twin, error) {
	return LoadFrom(ctx, StoreSource(st, dataDir), modelID)
}

// LoadFrom loads model modelID of src for the twin: its artifact (hash
// verified by src), its dataset's manifest and the conformal calibration,
// test coverage and OOD envelope its evaluation stored in the model's
// metrics. Models of other formats than those [IsTwinFormat] names are
// refused with AML_TWIN_MODEL_UNSUPPORTED before their artifact is read.
func LoadFrom(ctx context.Context, src ModelSource, modelID string) (*Twin, error) {
	m, err := src.Model(ctx, modelID)
	if err != nil {
		return nil, err
	}
	if !IsTwinFormat(m.ArtifactKind) {
		return nil, errf(CodeModelUnsupported, "artifactKind", "model %s is %s; the twin runs %s models", m.ID, m.ArtifactKind, twinFormatList)
	}
	dir, err := src.ArtifactDir(ctx, m)
	if err != nil {
		return nil, err
	}
	man, err := src.Manifest(ctx, m)
	if err != nil {
		return nil, err
	}
	p, err := model.Load(dir, man, model.LoadOptions{Formats: trainers.Formats()})
	if err != nil {
		return nil, err
	}
	return New(m.ID, man, p, m.Metrics)
}

// metricsJSON is the part of a model's metrics the twin reads (written by
// the job runner's evaluation: jobs.attempt.uncertainty).
type metricsJSON struct {
	Conformal *eval.Conformal      `json:"conformal"`
	Coverage  *eval.CoverageReport `json:"coverage"`
	OOD       *eval.OOD            `json:"ood"`
}

// TwinFormats are the artifact formats the twin runs: hybrid_residual@1,
// linear_state_space@1, one_step@1 (ARX), narx_mlp@1 and
// neural_state_space@1 models of dynamic datasets, static_response@1 and
// static_forest@1 models of static_response datasets.
var TwinFormats = []string{trainers.FormatHybrid, trainers.FormatStateSpace, trainers.FormatARX, trainers.FormatNARX, trainers.FormatNSS,
	trainers.FormatStatic, trainers.FormatForest}

const twinFormatList = "aml.hybrid/1, aml.statespace/1, aml.arx/1, aml.narx/1, aml.nss/1, aml.static-response/1 or aml.static-forest/1"

// IsTwinFormat says whether the twin runs models of artifact format f.
func IsTwinFormat(f string) bool { return slices.Contains(TwinFormats, f) }

// New builds a twin from a loaded predictor, its dataset manifest and the
// model's metrics JSON. Without a conformal calibration the twin still
// estimates states, but trials are refused (AML_TWIN_MODEL_UNSUPPORTED:
// no tube can be drawn); without an OOD envelope every trial fails its OOD
// verdict (OOD_NOT_CALIBRATED).
func New(modelID string, man *dataset.Manifest, p model.Predictor, metrics json.RawMessage) (*Twin, error) {
	if _, err := man.WholeMsBeat(); err != nil {
		return nil, errf(CodeModelUnsupported, "dataset", "%s", core.MessageOf(err))
	}
	H, F := man.HistorySteps, man.HorizonSteps
	if isStatic(man) {
		H, F = 1, 1 // one row in, one prediction out (dataset.Dims)
	}
	if man.BeatMs <= 0 || H < 1 || F < 1 {
		return nil, errf(CodeModelUnsupported, "dataset", "the model's dataset is not a dynamic dataset with history and horizon")
	}
	t := &Twin{modelID: modelID, man: man, pred: p, H: H, F: F, beatMs: man.BeatMs,
		dt: float64(man.BeatMs) / 1000, nodes: append([]string(nil), man.AllNodes...), colOf: map[string]int{}, cache: map[[32]byte]*snapStart{}}
	for j, n := range man.AllNodes {
		t.colOf[n] = j
	}
	if isStatic(man) {
		if err := t.initStatic(p); err != nil {
			return nil, err
		}
	} else if hp, ok := trainers.AsHybrid(p); ok {
		t.initHybrid(hp)
	} else if lt, ok := trainers.AsLinearTwin(p); ok {
		if err := t.initColumns(lt.LinearLayout()); err != nil {
			return nil, err
		}
		t.dyn, t.estimator, t.hideStates = linearDyn{lt, len(t.outs)}, lt.WindowEstimator(), true
	} else if ht, ok := trainers.AsHistoryTwin(p); ok {
		if err := t.initColumns(ht.LinearLayout()); err != nil {
			return nil, err
		}
		t.dyn, t.estimator, t.hideStates, t.members = neuralDyn{ht, len(t.outs)}, ht.WindowEstimator(), true, ht.Members()
	} else {
		return nil, errf(CodeModelUnsupported, "format", "model %s is %s; the twin runs %s models", modelID, p.Format(), twinFormatList)
	}
	if len(metrics) > 0 {
		var mj metricsJSON
		if err := json.Unmarshal(metrics, &mj); err != nil {
			return nil, errf(CodeModelUnsupported, "metrics", "the model's metrics cannot be read: %v", err)
		}
		if c := mj.Conformal; c != nil && len(c.Widths) == t.F {
			good := true
			for _, row := range c.Widths {
				good = good && len(row) == len(t.outs)
				for _, w := range row {
					good = good && w >= 0 && !math.IsInf(w, 0)
				}
			}
			if good {
				t.widths, t.coverage, t.calWindows = c.Widths, c.Coverage, c.CalibrationWindows
			}
		}
		if mj.Coverage != nil && t.widths != nil && mj.Coverage.Split == dataset.SplitTest {
			t.measuredCov = mj.Coverage.Measured
		}
		if o := mj.OOD; o != nil && o.H == t.H && o.Cols == t.oodWidth() && len(o.Mean) == len(o.Prec) && len(o.Mean) > 0 &&
			(!t.static || (o.Features == eval.OODFeaturesRow && len(o.Mean) == o.Cols)) {
			t.ood = o
		}
	}
	return t, nil
}

// initHybrid lays out a hybrid model: its physics quantities and the
// dataset columns they are tied to.
func (t *Twin) initHybrid(hp trainers.HybridPredictor) {
	m := hp.WindowModel() // the path the conformal widths were measured on
	t.dyn, t.estimator = hybridDyn{m}, "hybrid-x0fit/1"
	l := hp.Layout()
	for _, c := range l.Controls {
		t.ctrl = append(t.ctrl, qcol{c.Model, c.Col, c.Fallback})
	}
	for _, c := range l.Disturbances {
		t.dist = append(t.dist, qcol{c.Model, c.Col, c.Fallback})
	}
	for _, c := range l.Outputs {
		t.outs = append(t.outs, qcol{c.Model, c.Col, math.NaN()})
	}
	pm := m.Sys.Model
	t.states = pm.StateNames()
	t.modelOuts = pm.OutputNames()
	for j, s := range t.states {
		col := -1
		if o := m.Sys.ObservedBy[j]; o >= 0 {
			col = t.outs[o].col
		} else if c, ok := t.colOf[s]; ok {
			col = c
		}
		t.stateCol = append(t.stateCol, col)
	}
	if e := m.Residual; e != nil {
		t.members = len(e.Members)
	}
}

// initColumns lays out a linear or history-started neural model: its
// quantities are the dataset columns it uses, named by their node ids;
// its inputs are controls and its targets its model outputs.
func (t *Twin) initColumns(in, out []trainers.HybridColumnRef) error {
	for _, c := range in {
		if c.Col < 0 || c.Col >= len(t.nodes) {
			return errf(CodeModelUnsupported, "inputs", "model %s has an input without a dataset column", t.modelID)
		}
		t.ctrl = append(t.ctrl, qcol{t.nodes[c.Col], c.Col, math.NaN()})
	}
	for _, c := range out {
		if c.Col < 0 || c.Col >= len(t.nodes) {
			return errf(CodeModelUnsupported, "outputs", "model %s has an output without a dataset column", t.modelID)
		}
		t.outs = append(t.outs, qcol{t.nodes[c.Col], c.Col, math.NaN()})
		t.modelOuts = append(t.modelOuts, t.nodes[c.Col])
	}
	return nil
}

// oodWidth is the number of columns of the OOD envelope's rows: a static
// model's inputs, or every dataset column.
func (t *Twin) oodWidth() int {
	if t.oodCols != nil {
		return len(t.oodCols)
	}
	return len(t.nodes)
}

// failWhat names what fails when a rollout stops being finite.
func (t *Twin) failWhat() string {
	if _, ok := t.dyn.(hybridDyn); ok {
		return "physics simulation"
	}
	return "model's prediction"
}

// ModelID returns the model's id.
func (t *Twin) ModelID() string { return t.modelID }

// Calibrated reports whether the model has conformal widths and an OOD
// envelope (without them every trial fails its OOD verdict).
func (t *Twin) Calibrated() bool { return t.widths != nil && t.ood != nil }

// Window returns the grid the state estimator and trials need: the
// dataset's history length H, its beat and the node ids of its columns
// (every column of the dataset, the order of the OOD envelope).
func (t *Twin) Window() (steps int, beatMs int64, nodeIDs []string) {
	return t.H, t.beatMs, append([]string(nil), t.nodes...)
}

// EstimatorVersion names the state estimator of this twin.
func (t *Twin) EstimatorVersion() string { return t.estimator + ":" + t.modelID }

// EstimateState returns the model states (by physics state name) at the
// window's last row and the estimator version. A state measured directly
// (an output that is the state, or a dataset column of the state's name)
// takes its last valid observation in the window; every other state is
// the model's, estimated as PredictBatch does for a window: for a hybrid
// model the initial-state fit over the window's H rows simulated through
// the window to its last row. A linear model's states are no scene
// quantities and are not reported here (a trial's detail shows them): a
// state-space model's x1 … xn are estimated by the Kalman filter without
// process noise (the prior's MAP initial state, propagated) or from the
// least-squares initial state, as the model was trained; an ARX model's
// state is the window's rows themselves. Gaps (null values) are handled as in [Twin.Trial]: controls and
// disturbances hold their last valid value, outputs are simply not fitted
// where missing, and a needed column without any value is refused.
func (t *Twin) EstimateState(ctx context.Context, w *contract.SnapshotWindow) (map[string]float64, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	s, err := t.start(w)
	if err != nil {
		return nil, "", err
	}
	out := make(map[string]float64, len(t.states))
	for j, name := range t.states {
		out[name] = s.start.last[j]
		if c := t.stateCol[j]; c >= 0 {
			if v, ok := s.lastValid[c]; ok {
				out[name] = v
			}
		}
	}
	return out, t.EstimatorVersion(), nil
}

// snapStart is everything a window gives every rollout from it: immutable
// once made.
type snapStart struct {
	start *dynStart
	rows  [][]float64 // H filled rows over the dataset's columns (gaps held, for OOD)
	yRaw  [][]float64 // H rows of the targets as measured (NaN for gaps)
	// the class's start inputs (u, d, y, yFilled), kept to re-start with
	// disturbance-corrected targets (disturb.go)
	inU, inD, inYf [][]float64
	complete       bool // every column has at least one value (else OOD cannot be judged)
	lastValid      map[int]float64
	ctrlLast       []float64 // model controls at the last row
	distLast       []float64 // model disturbances at the last row
	gaps           int       // null values filled
	endMs          int64
}

const maxCachedStarts = 32

// start returns the (cached) start of window w.
func (t *Twin) start(w *contract.SnapshotWindow) (*snapStart, error) {
	if w == nil {
		return nil, errf(CodeWindowInvalid, "window", "the snapshot has no window: a trial starts from the recent history")
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, errf(CodeWindowInvalid, "window", "%v", err)
	}
	key := sha256.Sum256(b)
	t.mu.Lock()
	s, ok := t.cache[key]
	t.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err = t.estimate(w)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.cache[key]; ok {
		return old, nil
	}
	t.cache[key] = s
	t.order = append(t.order, key)
	if len(t.order) > maxCachedStarts {
		delete(t.cache, t.order[0])
		t.order = t.order[1:]
	}
	return s, nil
}

// estimate builds the start of a window: its last H rows, gaps filled
// where the model needs inputs, the initial state fitted and propagated.
func (t *Twin) estimate(w *contract.SnapshotWindow) (*snapStart, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if w.BeatMs != t.beatMs {
		return nil, errf(CodeWindowInvalid, "window.beatMs", "the window's beat is %d ms, the model's %d ms", w.BeatMs, t.beatMs)
	}
	if w.Steps < t.H {
		return nil, errf(CodeWindowInvalid, "window.steps", "the window has %d rows, the model needs its history of %d", w.Steps, t.H)
	}
	H, off := t.H, w.Steps-t.H
	nAll := len(t.nodes)
	raw := make([][]float64, H) // NaN for gaps
	for k := range raw {
		raw[k] = make([]float64, nAll)
		for j := range raw[k] {
			raw[k][j] = math.NaN()
		}
	}
	s := &snapStart{lastValid: map[int]float64{}, complete: true, endMs: w.EndMs}
	for j, n := range t.nodes {
		vs, ok := w.Values[n]
		if ok {
			for k := 0; k < H; k++ {
				if p := vs[off+k]; p != nil {
					raw[k][j] = *p
				}
			}
		}
	}
	any := func(j int) bool {
		for k := 0; k < H; k++ {
			if !math.IsNaN(raw[k][j]) {
				return true
			}
		}
		return false
	}
	for _, c := range t.ctrl {
		if c.col >= 0 && !any(c.col) {
			return nil, errf(CodeWindowInvalid, "window.values."+t.nodes[c.col], "control %s (node %s) has no value in the last %d rows of the window", c.name, t.nodes[c.col], H)
		}
	}
	for _, c := range t.dist {
		if t.static && c.col >= 0 && !any(c.col) {
			return nil, errf(CodeWindowInvalid, "window.values."+t.nodes[c.col], "input %s has no value in the last %d rows of the window: a static model predicts from every input", c.name, H)
		}
	}
	for _, o := range t.outs {
		if !t.static && !any(o.col) { // a static model has no state to estimate from its targets
			return nil, errf(CodeWindowInvalid, "window.values."+t.nodes[o.col], "output %s (node %s) has no value in the last %d rows of the window: the state cannot be estimated", o.name, t.nodes[o.col], H)
		}
	}
	// filled rows: hold the last valid value, the first valid one before it
	s.rows = make([][]float64, H)
	for k := range s.rows {
		s.rows[k] = append([]float64(nil), raw[k]...)
	}
	for j := 0; j < nAll; j++ {
		first := math.NaN()
		for k := 0; k < H; k++ {
			if !math.IsNaN(raw[k][j]) {
				first = raw[k][j]
				break
			}
		}
		if math.IsNaN(first) {
			if !t.static || slices.Contains(t.oodCols, j) { // a static model's OOD row is its inputs
				s.complete = false
			}
			continue
		}
		prev := first
		for k := 0; k < H; k++ {
			if math.IsNaN(s.rows[k][j]) {
				s.rows[k][j] = prev
				s.gaps++
			}
			prev = s.rows[k][j]
			if !math.IsNaN(raw[k][j]) {
				s.lastValid[j] = raw[k][j]
			}
		}
	}
	nu, nd := len(t.ctrl), len(t.dist)
	U := make([][]float64, H)
	var D [][]float64
	if nd > 0 {
		D = make([][]float64, H)
	}
	Y := make([][]float64, H)
	for k := 0; k < H; k++ {
		U[k] = make([]float64, nu)
		for q, c := range t.ctrl {
			U[k][q] = c.fallback
			if c.col >= 0 {
				U[k][q] = s.rows[k][c.col]
			}
		}
		if D != nil {
			D[k] = make([]float64, nd)
			for q, c := range t.dist {
				v := c.fallback
				if c.col >= 0 && !math.IsNaN(s.rows[k][c.col]) {
					v = s.rows[k][c.col]
				}
				D[k][q] = v
			}
		}
		Y[k] = make([]float64, len(t.outs))
		for o, c := range t.outs {
			Y[k][o] = raw[k][c.col] // gaps stay NaN: not fitted
		}
	}
	Yf := make([][]float64, H) // targets with gaps held (linear models)
	for k := range Yf {
		Yf[k] = make([]float64, len(t.outs))
		for o, c := range t.outs {
			Yf[k][o] = s.rows[k][c.col]
		}
	}
	s.yRaw, s.inU, s.inD, s.inYf = Y, U, D, Yf
	st, err := t.dyn.start(U, D, Y, Yf)
	if err != nil {
		return nil, errf(CodeWindowInvalid, "window", "%v", err)
	}
	s.start = st
	s.ctrlLast = U[H-1]
	if D != nil {
		s.distLast = D[H-1]
	}
	return s, nil
}

// Bindings maps every model quantity the model's dataset measures (its
// controls, disturbances and outputs, and states with a column of their
// own) to that column's node id: the scene-variable → node bindings a
// snapshot of this model's scene needs (a scene variable's id is the model
// quantity's name). The default injection scene's "weight", for one, is
// node "part_weight" of the simulated line.
func (t *Twin) Bindings() map[string]string {
	b := map[string]string{}
	add := func(name string, col int) {
		if col >= 0 && col < len(t.nodes) {
			b[name] = t.nodes[col]
		}
	}
	for _, q := range t.ctrl {
		add(q.name, q.col)
	}
	for _, q := range t.dist {
		add(q.name, q.col)
	}
	for _, q := range t.outs {
		add(q.name, q.col)
	}
	for j, s := range t.states {
		add(s, t.stateCol[j])
	}
	return b
}
