package engine

import (
	"fmt"
	"math"
	"sort"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/physics"
	"github.com/aml-project/aml/internal/twin/contract"
)

// A plan is everything one (scene, snapshot, objective) gives every
// candidate: the start, the baseline, the limits, the compiled
// constraints, the cost weights and the baseline's own evaluation. It is
// immutable once made; candidates are evaluated with per-goroutine
// scratch buffers.

// Quantity kinds of a plan's variables.
const (
	kindControl     = "control"
	kindDisturbance = "disturbance"
	kindState       = "state"
	kindOutput      = "output" // obs or guard of the physics model
)

// variable is one model quantity a trial can report and constrain.
type variable struct {
	name string
	kind string
	idx  int // model control / disturbance / state / output index
	// target is the dataset target index when the quantity is a
	// calibrated model output (its prediction is the hybrid's, with a
	// conformal tube), else -1: physics alone, no tube.
	target int
}

type compiled struct {
	c    contract.Constraint
	v    int // variable index, -1 for custom or unknown
	cond *physics.Condition
	// err is why the constraint cannot be evaluated (fail closed).
	err string
}

type targetTerm struct {
	v      int
	value  float64
	weight float64
}

type plan struct {
	t     *Twin
	s     *snapStart
	scene *contract.SceneContract
	snap  *contract.TwinSnapshot
	obj   *contract.ObjectiveProfile
	T     int

	sceneCtrl []string  // scene control ids (scene order)
	ctrlModel []int     // per scene control: model control index
	baseline  []float64 // per scene control: the snapshot's value
	lo, hi    []float64 // per scene control: allowed absolute window
	trDelta   []float64 // per scene control: largest total deviation from the baseline (+Inf none)
	stepMax   []float64 // per scene control: largest move per step
	costPer   []float64 // per scene control: cost per unit moved
	nodeSteps int       // least steps between two moves of one control
	lineSteps int       // least steps between two actions on the line
	maxMoves  int       // most actions (steps with a move) in the candidate

	vars   []variable
	varIdx map[string]int
	cons   []compiled
	terms  []targetTerm

	conf [][]float64 // [T][targets] conformal half-width per horizon step (extrapolated past F)
	zq   float64     // conformal half-width / zq = standard deviation
	prev []float64   // per variable: its value at the window's last row
	// The quantities no target calibrates (states, obs and guards of the
	// physics) are judged on the physics started consistently with what
	// the dataset measures (see measured in newPlan):
	//
	//   - mNext is the state after the window's last row, stepped by the
	//     physics from the start's last-row state with every state the
	//     dataset measures (a column of its name) set to its last
	//     measurement (nil: the window measures no state, the model's
	//     own rollout serves). The model's initial-state fit explains the
	//     targets and may move an unobserved state far from its
	//     measurement (the hybrid's melt temperature, to explain the part
	//     weight); a guard computed from that state — the post-step
	//     temperature — would then be judged on a value the line's own
	//     measurement contradicts, refusing a safe move or passing an
	//     unsafe one. The physics from mNext rolls every candidate's
	//     controls alongside the model's rollout; targets keep the
	//     model's calibrated path (their conformal tube was measured on
	//     it).
	//   - anchor is, for an obs or guard the dataset measures itself (a
	//     column of its name), its last measurement minus the physics
	//     value at the window's last row: its mean is the physics value
	//     plus anchor (last measurement plus the physics' predicted
	//     change) and a constraint must hold on both that and the physics
	//     value (lower/upper are the two), so neither a biased output map
	//     nor a clamped rate anchored past its clamp passes unseen.
	//
	// anchored marks both kinds (states started at their measurement,
	// measured obs and guards).
	anchor   []float64
	anchored []bool
	mNext    []float64
	dHeld    [][]float64 // disturbance rows over the horizon (one shared row)
	ctrlU    []float64   // model controls at the last row (for controls not in the scene)
	oodOK    bool
	// dist is the declared unmeasured disturbances' estimate per target
	// (nil entries: none; nil: the scene declares none) and oodHist the
	// window's rows as the OOD envelope sees them (disturb.go)
	dist    []*distEst
	oodHist [][]float64
	// start is the rollouts' start: the window's (s.start) or, with
	// declared disturbances, the one estimated jointly with them
	start *dynStart

	base *evalResult // the baseline's evaluation
}

// Tube and OOD settings.
const (
	// MaxDisagreement is the largest ensemble disagreement (member
	// standard deviation over the calibrated half-width) a trial accepts.
	MaxDisagreement = 1.0
)

func (t *Twin) newPlan(scene *contract.SceneContract, snap *contract.TwinSnapshot, obj *contract.ObjectiveProfile) (*plan, error) {
	if scene == nil || snap == nil || obj == nil {
		return nil, core.Errorf(core.CodeInvalidArgument, "a trial needs a scene, a snapshot and an objective")
	}
	if err := scene.Validate(); err != nil {
		return nil, err
	}
	if err := snap.CheckAgainst(scene); err != nil {
		return nil, err
	}
	if err := obj.CheckAgainst(scene); err != nil {
		return nil, err
	}
	if len(scene.Constraints) == 0 {
		return nil, errf(CodeSceneMismatch, "constraints", "scene %s has no constraints: a trial must evaluate at least one", scene.SceneID)
	}
	if t.widths == nil {
		return nil, errf(CodeModelUnsupported, "metrics.conformal", "model %s has no conformal calibration: a trial's prediction tube cannot be drawn (evaluate the model with enough val windows)", t.modelID)
	}
	if obj.TwinModelID != "" && obj.TwinModelID != t.modelID {
		return nil, errf(CodeSceneMismatch, "twinModelId", "the objective is for model %s, this twin is %s", obj.TwinModelID, t.modelID)
	}
	s, err := t.start(snap.Window)
	if err != nil {
		return nil, err
	}
	p := &plan{t: t, s: s, scene: scene, snap: snap, obj: obj, T: obj.HorizonSteps, varIdx: map[string]int{}}
	// variables
	add := func(v variable) {
		if _, dup := p.varIdx[v.name]; dup {
			return
		}
		p.varIdx[v.name] = len(p.vars)
		p.vars = append(p.vars, v)
	}
	targetOf := map[string]int{}
	for o, c := range t.outs {
		targetOf[c.name] = o
	}
	for q, c := range t.ctrl {
		add(variable{name: c.name, kind: kindControl, idx: q, target: -1})
	}
	for q, c := range t.dist {
		add(variable{name: c.name, kind: kindDisturbance, idx: q, target: -1})
	}
	for i, n := range t.modelOuts {
		tg, ok := targetOf[n]
		if !ok {
			tg = -1
		}
		add(variable{name: n, kind: kindOutput, idx: i, target: tg})
	}
	for j, n := range t.states { // none for a linear model (Twin.hideStates)
		tg, ok := targetOf[n]
		if !ok {
			tg = -1
		}
		add(variable{name: n, kind: kindState, idx: j, target: tg})
	}
	// controls, baseline and limits
	ctrlIdx := map[string]int{}
	for q, c := range t.ctrl {
		ctrlIdx[c.name] = q
	}
	beat := float64(t.beatMs) / 1000
	p.nodeSteps = max(1, int(math.Ceil(scene.WritePolicy.MinNodeIntervalSec/beat-1e-9)))
	p.lineSteps = max(1, int(math.Ceil(scene.WritePolicy.MinLineActionIntervalSec/beat-1e-9)))
	p.maxMoves = scene.WritePolicy.MaxActionsPerRun
	for _, c := range scene.Controls {
		q, ok := ctrlIdx[c.ID]
		if !ok {
			names := make([]string, len(t.ctrl))
			for i, q := range t.ctrl {
				names[i] = q.name
			}
			return nil, errf(CodeSceneMismatch, "controls", "scene control %s is not a control of model %s (%v)", c.ID, t.modelID, names)
		}
		b := snap.ControlValues[c.ID]
		lo, hi := math.Inf(-1), math.Inf(1)
		if c.Min != nil {
			lo = *c.Min
		}
		if c.Max != nil {
			hi = *c.Max
		}
		step := math.Inf(1)
		if c.MaxStep != nil {
			step = *c.MaxStep
		}
		if d, ok := scene.WritePolicy.MaxDeltaPerAction[c.ID]; ok {
			step = math.Min(step, d)
		}
		trd := math.Inf(1)
		if tr, ok := obj.TrustRegion[c.ID]; ok {
			if tr.Min != nil {
				lo = math.Max(lo, *tr.Min)
			}
			if tr.Max != nil {
				hi = math.Min(hi, *tr.Max)
			}
			if tr.MaxDelta != nil {
				trd = *tr.MaxDelta
				step = math.Min(step, trd)
			}
		}
		p.sceneCtrl = append(p.sceneCtrl, c.ID)
		p.ctrlModel = append(p.ctrlModel, q)
		p.baseline = append(p.baseline, b)
		p.lo, p.hi, p.trDelta, p.stepMax = append(p.lo, lo), append(p.hi, hi), append(p.trDelta, trd), append(p.stepMax, step)
		p.costPer = append(p.costPer, obj.ControlCosts[c.ID])
	}
	// targets
	for _, k := range sortedKeys(obj.Targets) {
		v, ok := p.varIdx[k]
		if !ok || (p.vars[v].kind != kindOutput && p.vars[v].kind != kindState) {
			return nil, errf(CodeSceneMismatch, "targets."+k, "objective target %s is not predicted by model %s", k, t.modelID)
		}
		p.terms = append(p.terms, targetTerm{v: v, value: obj.Targets[k], weight: obj.Weights[k]})
	}
	// constraints
	names := make([]string, len(p.vars))
	for i, v := range p.vars {
		names[i] = v.name
	}
	for _, c := range scene.Constraints {
		cc := compiled{c: c, v: -1}
		if c.Variable != "" {
			if v, ok := p.varIdx[c.Variable]; ok {
				cc.v = v
			} else if c.Kind != contract.KindCustom {
				cc.err = fmt.Sprintf("variable %s is not a quantity of model %s: the constraint cannot be checked", c.Variable, t.modelID)
			}
		}
		if c.Kind == contract.KindCustom {
			cond, err := physics.ParseCondition(c.Expression, names, t.dt)
			if err != nil {
				cc.err = fmt.Sprintf("the expression cannot be evaluated on the model's quantities: %v", err)
			}
			cc.cond = cond
		}
		p.cons = append(p.cons, cc)
	}
	// tube widths per horizon step
	p.zq = 1.6448536269514722 // Φ⁻¹(0.95): a 90 % two-sided interval
	if t.coverage > 0 && t.coverage < 1 {
		p.zq = math.Sqrt2 * math.Erfinv(t.coverage)
	}
	ny := len(t.outs)
	p.conf = make([][]float64, p.T)
	for k := 0; k < p.T; k++ {
		p.conf[k] = make([]float64, ny)
		for o := 0; o < ny; o++ {
			p.conf[k][o] = t.confWidth(k, o)
		}
	}
	// declared unmeasured disturbances: the start is the joint estimate
	p.start = s.start
	if p.dist, p.start, err = t.disturbances(scene, s, p.zq); err != nil {
		return nil, err
	}
	p.oodHist = p.oodHistory()
	// values at the window's last row
	st := p.start
	p.prev = make([]float64, len(p.vars))
	for i, v := range p.vars {
		switch v.kind {
		case kindControl:
			p.prev[i] = s.ctrlLast[v.idx]
		case kindDisturbance:
			p.prev[i] = s.distLast[v.idx]
		case kindState:
			p.prev[i] = st.last[v.idx]
		case kindOutput:
			p.prev[i] = st.lastOut[v.idx]
		}
		if v.target >= 0 {
			p.prev[i] = st.lastY[v.target]
			if p.dist != nil && p.dist[v.target] != nil {
				p.prev[i] += p.dist[v.target].b
			}
		}
	}
	for c, q := range p.ctrlModel {
		p.prev[p.varIdx[t.ctrl[q].name]] = p.baseline[c]
	}
	if len(t.dist) > 0 {
		p.dHeld = make([][]float64, p.T)
		for k := range p.dHeld {
			p.dHeld[k] = s.distLast
		}
	}
	if err := p.measured(); err != nil {
		return nil, err
	}
	p.ctrlU = s.ctrlLast
	p.oodOK = t.ood != nil && s.complete && t.widths != nil
	// the baseline: hold the snapshot's controls
	sc := p.newScratch()
	base := make([][]float64, p.T)
	for k := range base {
		base[k] = p.baseline
	}
	r := p.evaluate(sc, base, true)
	if r.modelErr != "" {
		return nil, errf(CodeWindowInvalid, "window", "the baseline rollout fails: %s", r.modelErr)
	}
	p.base = r
	return p, nil
}

// measured sets the plan's measurement-consistent physics (see the plan's
// anchor fields): the states the window measures start at their last
// measurement (mNext, the physics stepped once through the last row),
// the obs and guards it measures are anchored to theirs, and prev holds
// the last-row values of both.
func (p *plan) measured() error {
	t, s, st := p.t, p.s, p.start
	p.anchor, p.anchored = make([]float64, len(p.vars)), make([]bool, len(p.vars))
	measuredAt := func(name string) (float64, bool) {
		j, ok := t.colOf[name]
		if !ok {
			return 0, false
		}
		m, ok := s.lastValid[j]
		return m, ok
	}
	var xm []float64 // the last-row state, measured states at their measurement
	for i, v := range p.vars {
		if v.kind != kindState || v.target >= 0 {
			continue
		}
		if m, ok := measuredAt(v.name); ok {
			if xm == nil {
				xm = append([]float64(nil), st.last...)
			}
			xm[v.idx] = m
			p.anchored[i], p.prev[i] = true, m
		}
	}
	outLast := st.lastOut
	if xm != nil {
		pr, ok := t.dyn.newRoller().(physicsRoller)
		if !ok { // only the hybrid has physical states
			return errf(CodeModelUnsupported, "states", "model %s reports measured states but cannot run its physics from them", t.modelID)
		}
		var d [][]float64
		if s.distLast != nil {
			d = [][]float64{s.distLast}
		}
		r := pr.rollPhysics(xm, [][]float64{s.ctrlLast}, d)
		if r.Fail < 1 {
			return errf(CodeWindowInvalid, "window", "the physics from the measured states %v fails at the window's last row", xm)
		}
		p.mNext, outLast = append([]float64(nil), r.Next...), append([]float64(nil), r.Out...)
	}
	for i, v := range p.vars {
		if v.kind != kindOutput || v.target >= 0 {
			continue
		}
		p.prev[i] = outLast[v.idx]
		if m, ok := measuredAt(v.name); ok {
			p.anchor[i], p.anchored[i], p.prev[i] = m-outLast[v.idx], true, m
		}
	}
	return nil
}

// confWidth is the conformal half-width of target o at horizon step k:
// the calibrated width for k < F; past the calibrated horizon the largest
// calibrated width of the target grown like a random walk,
// max_f W[f][o] · √((k+1)/F) — never smaller than any calibrated width, and
// growing without bound, because nothing was measured there. A static
// model's width is its one calibrated width at every step: each step is
// predicted from that step's inputs alone, exactly the one-row prediction
// the width was calibrated on. Without a calibration the width is +Inf
// (newPlan refuses trials then).
func (t *Twin) confWidth(k, o int) float64 {
	if t.widths == nil {
		return math.Inf(1)
	}
	if t.static {
		return t.widths[0][o]
	}
	if k < t.F {
		return t.widths[k][o]
	}
	w := 0.0
	for f := 0; f < t.F; f++ {
		w = math.Max(w, t.widths[f][o])
	}
	return w * math.Sqrt(float64(k+1)/float64(t.F))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// scratch is one goroutine's buffers.
type scratch struct {
	roller           roller
	r                *rollout // the last rollout
	U                [][]float64
	mean, lower, upr []float64 // [T][vars] flat
	spread           []float64 // [T][targets]
	row, sum, z      []float64 // OOD
	condLo, condHi   []float64
}

func (p *plan) newScratch() *scratch {
	nv, T := len(p.vars), p.T
	sc := &scratch{roller: p.t.dyn.newRoller(), U: make([][]float64, T), mean: make([]float64, T*nv), lower: make([]float64, T*nv),
		upr: make([]float64, T*nv), spread: make([]float64, T*len(p.t.outs)), row: make([]float64, len(p.t.nodes)),
		sum: make([]float64, len(p.t.nodes)), condLo: make([]float64, nv), condHi: make([]float64, nv)}
	for k := range sc.U {
		sc.U[k] = make([]float64, len(p.t.ctrl))
	}
	if p.t.ood != nil {
		sc.z = make([]float64, len(p.t.ood.Mean))
	}
	return sc
}

// oodInput builds the horizon rows over the dataset's columns for the OOD
// envelope: controls from the candidate, targets from the prediction,
// columns named like a model quantity from the simulation, every other
// column (and disturbances) held at its last value in the window.
func (p *plan) oodRow(sc *scratch, k int, dst []float64) {
	t := p.t
	last := p.s.rows[len(p.s.rows)-1]
	nv := len(p.vars)
	for j, n := range t.nodes {
		dst[j] = last[j]
		if v, ok := p.varIdx[n]; ok && p.vars[v].kind != kindDisturbance {
			dst[j] = sc.mean[k*nv+v] // measured obs and guards: anchored
		}
	}
	for q, c := range t.ctrl {
		if c.col >= 0 {
			dst[c.col] = sc.U[k][q]
		}
	}
	for o, c := range t.outs {
		dst[c.col] = sc.r.Y[k*len(t.outs)+o]
	}
}

// evalResult is one candidate's evaluation.
type evalResult struct {
	modelErr     string // the rollout failed
	fail         int    // first failing physics step (T when none)
	cons         []consResult
	violations   int
	oodDist      float64
	oodStep      int
	disagreement float64
	maxSpread    float64
	oodAccepted  bool
	oodCode      string
	costTarget   float64
	costVariance float64
	costControl  float64
	cost         float64
	passed       bool
	rejectCode   string
	rejections   []contract.Rejection
	recorded     []map[string]float64
	mean, lo, hi []float64 // copies for the detail (only when kept)
	spreadCopy   []float64
}

type consResult struct {
	passed       bool
	notEvaluated bool
	step         int
	edge         string
	detail       string
}

func (r *evalResult) total() float64 { return r.costTarget + r.costVariance + r.costControl }

// evaluate rolls out the candidate cand ([T][scene controls], already
// validated) and evaluates constraints, OOD and cost. It only writes to sc
// and the result.
func (p *plan) evaluate(sc *scratch, cand [][]float64, keep bool) *evalResult {
	t := p.t
	T, nv, ny := p.T, len(p.vars), len(t.outs)
	res := &evalResult{fail: T}
	for k := 0; k < T; k++ {
		copy(sc.U[k], p.ctrlU)
		for c, q := range p.ctrlModel {
			sc.U[k][q] = cand[k][c]
		}
	}
	r, err := sc.roller.roll(p.start, sc.U, p.dHeld)
	if err != nil {
		res.modelErr, res.oodCode = err.Error(), "NOT_EVALUATED"
		res.fail = 0
		return res
	}
	sc.r = r
	res.fail = r.Fail
	var pm *physRollout // the physics from the measured states
	if p.mNext != nil {
		pm = sc.roller.(physicsRoller).rollPhysics(p.mNext, sc.U, p.dHeld)
		if pm.Fail < res.fail {
			res.fail = pm.Fail
			res.modelErr, res.oodCode = fmt.Sprintf("the physics from the measured states fails at horizon step %d", pm.Fail), "NOT_EVALUATED"
			if pm.Fail == 0 {
				return res
			}
		}
	}
	nx, nout := len(t.states), len(t.modelOuts)
	for k := 0; k < T; k++ {
		row := k * nv
		for i, v := range p.vars {
			var m float64
			switch v.kind {
			case kindControl:
				m = sc.U[k][v.idx]
			case kindDisturbance:
				m = p.s.distLast[v.idx]
			case kindState:
				m = r.X[k*nx+v.idx]
				if pm != nil && v.target < 0 {
					m = pm.X[k*nx+v.idx]
				}
			case kindOutput:
				m = r.Out[k*nout+v.idx]
				if pm != nil && v.target < 0 {
					m = pm.Out[k*nout+v.idx]
				}
			}
			lo, hi := m, m
			if p.anchored[i] && v.kind == kindOutput {
				// judged on its physics value and on its anchored level
				a := m + p.anchor[i]
				lo, hi, m = math.Min(m, a), math.Max(m, a), a
			}
			if v.target >= 0 {
				o := v.target
				m = r.Y[k*ny+o]
				h := p.conf[k][o] + r.Spread[k*ny+o]
				if p.dist != nil && p.dist[o] != nil {
					d := p.dist[o]
					m += d.b
					h += p.zq * math.Sqrt(d.varAt(k))
				}
				lo, hi = m-h, m+h
			}
			sc.mean[row+i], sc.lower[row+i], sc.upr[row+i] = m, lo, hi
		}
		for o := 0; o < ny; o++ {
			sp := r.Spread[k*ny+o]
			sc.spread[k*ny+o] = sp
			res.maxSpread = math.Max(res.maxSpread, sp)
			if K := float64(t.members); K >= 2 {
				res.disagreement = math.Max(res.disagreement, sp*math.Sqrt(K/(K-1))/p.conf[k][o])
			}
		}
	}
	if r.Fail < T {
		// nothing after the failure is judged: the record says so
		res.modelErr, res.oodCode = fmt.Sprintf("the %s fails at horizon step %d", t.failWhat(), r.Fail), "NOT_EVALUATED"
		return res
	}
	if res.modelErr != "" { // the physics from the measured states failed
		return res
	}
	p.checkConstraints(sc, res)
	p.checkOOD(sc, res)
	// cost: expected squared error (bias² + variance) plus control moves
	for k := 0; k < T; k++ {
		for _, tm := range p.terms {
			v := p.vars[tm.v]
			e := sc.mean[k*nv+tm.v] - tm.value
			res.costTarget += tm.weight * e * e
			if v.target >= 0 {
				sd := p.conf[k][v.target] / p.zq
				sp := sc.spread[k*ny+v.target]
				res.costVariance += tm.weight * (sd*sd + sp*sp)
				if p.dist != nil && p.dist[v.target] != nil {
					res.costVariance += tm.weight * p.dist[v.target].varAt(k)
				}
			}
		}
		for c := range p.sceneCtrl {
			prev := p.baseline[c]
			if k > 0 {
				prev = cand[k-1][c]
			}
			res.costControl += p.costPer[c] * math.Abs(cand[k][c]-prev)
		}
	}
	res.cost = res.total()
	if keep {
		res.mean, res.lo, res.hi = append([]float64(nil), sc.mean...), append([]float64(nil), sc.lower...), append([]float64(nil), sc.upr...)
		res.spreadCopy = append([]float64(nil), sc.spread...)
	}
	res.passed = res.violations == 0 && res.oodAccepted
	switch {
	case res.violations > 0:
		res.rejectCode = contract.RejectConstraint
	case !res.oodAccepted:
		res.rejectCode = contract.RejectOOD
	}
	return res
}

// checkConstraints evaluates every scene constraint on the tube: the
// lower and upper edges (and the mean) of every quantity; exact quantities
// (controls, disturbances, physics-only outputs) have lower = mean = upper.
func (p *plan) checkConstraints(sc *scratch, res *evalResult) {
	T, nv := p.T, len(p.vars)
	res.cons = make([]consResult, len(p.cons))
	for ci, cc := range p.cons {
		out := consResult{passed: true, step: -1}
		c := cc.c
		fail := func(k int, edge, format string, args ...any) {
			out = consResult{step: k, edge: edge, detail: fmt.Sprintf(format, args...)}
		}
		switch {
		case cc.err != "":
			out = consResult{notEvaluated: true, step: -1, detail: cc.err}
		case c.Kind == contract.KindHardRange:
			v := cc.v
			exact := p.exact(v)
			for k := 0; k < T && out.passed; k++ {
				lo, hi := sc.lower[k*nv+v], sc.upr[k*nv+v]
				edgeLo, edgeHi := "lower", "upper"
				if exact {
					edgeLo, edgeHi = "exact", "exact"
				}
				switch {
				case c.Min != nil && !(lo >= *c.Min):
					fail(k, edgeLo, "%s %s %.6g < min %.6g at step %d", c.Variable, edgeName(edgeLo), lo, *c.Min, k)
				case c.Max != nil && !(hi <= *c.Max):
					fail(k, edgeHi, "%s %s %.6g > max %.6g at step %d", c.Variable, edgeName(edgeHi), hi, *c.Max, k)
				}
			}
		case c.Kind == contract.KindMaxDelta || c.Kind == contract.KindRate:
			v := cc.v
			limit, per := 0.0, "step"
			if c.Kind == contract.KindMaxDelta {
				limit = *c.MaxDelta
			} else {
				limit, per = *c.MaxRatePerSec*p.t.dt, "s"
			}
			exact := p.exact(v)
			type traj struct {
				name string
				vals []float64
			}
			trs := []traj{{"mean", sc.mean}, {"lower", sc.lower}, {"upper", sc.upr}}
			if exact {
				trs = []traj{{"exact", sc.mean}}
			}
			for k := 0; k < T && out.passed; k++ {
				for _, tr := range trs {
					prev := p.prev[v]
					if k > 0 {
						prev = tr.vals[(k-1)*nv+v]
					} else if tr.name != "mean" && tr.name != "exact" {
						// the edge one step back: the same offset from the
						// last row's value as at step 0
						prev += tr.vals[v] - sc.mean[v]
					}
					d := math.Abs(tr.vals[k*nv+v] - prev)
					if !(d <= limit*(1+1e-12)) {
						if c.Kind == contract.KindRate {
							fail(k, tr.name, "%s %s changes at %.6g/%s at step %d, more than %.6g/s", c.Variable, edgeName(tr.name), d/p.t.dt, per, k, *c.MaxRatePerSec)
						} else {
							fail(k, tr.name, "%s %s changes by %.6g at step %d, more than %.6g", c.Variable, edgeName(tr.name), d, k, limit)
						}
						break
					}
				}
			}
		case c.Kind == contract.KindCustom:
			for k := 0; k < T && out.passed; k++ {
				copy(sc.condLo, sc.lower[k*nv:(k+1)*nv])
				copy(sc.condHi, sc.upr[k*nv:(k+1)*nv])
				always, _ := cc.cond.HoldsOn(sc.condLo, sc.condHi)
				if always {
					continue
				}
				edge := "tube"
				if !cc.cond.Holds(sc.mean[k*nv : (k+1)*nv]) {
					edge = "mean"
				}
				fail(k, edge, "%q does not hold on the %s at step %d", c.Expression, edgeName(edge), k)
			}
		default:
			out = consResult{notEvaluated: true, step: -1, detail: fmt.Sprintf("unknown constraint kind %q", c.Kind)}
		}
		if out.passed {
			out.detail = "holds on the whole tube over the horizon"
		}
		if !out.passed && !out.notEvaluated {
			res.violations++
		}
		if out.notEvaluated {
			res.violations++ // fail closed: counted as not passing
		}
		res.cons[ci] = out
	}
}

// exact says whether variable v has one value per step (lower = mean =
// upper): controls, disturbances and physics-only quantities, but not a
// calibrated target (its tube) nor a measured obs or guard (its physics
// value and its anchored level).
func (p *plan) exact(v int) bool {
	return p.vars[v].target < 0 && !(p.anchored[v] && p.vars[v].kind == kindOutput)
}

func edgeName(e string) string {
	switch e {
	case "lower":
		return "lower edge"
	case "upper":
		return "upper edge"
	case "mean":
		return "mean"
	case "tube":
		return "tube"
	}
	return "value"
}

// checkOOD judges the candidate's trajectory against the training
// envelope: for every horizon step, the window of the H most recent rows
// (history then horizon rows; see oodRow) is summarised as in training
// (eval.OOD features) and its Mahalanobis distance taken; the largest
// distance must not exceed the envelope's threshold, and the ensemble
// disagreement must not exceed MaxDisagreement.
func (p *plan) checkOOD(sc *scratch, res *evalResult) {
	t := p.t
	if !p.oodOK {
		res.oodCode = "OOD_NOT_CALIBRATED"
		if t.ood != nil && t.widths != nil && !p.s.complete {
			res.oodCode = "OOD_WINDOW_INCOMPLETE"
		}
		return
	}
	o := t.ood
	H, cols := o.H, o.Cols
	hist := p.oodHist
	clear(sc.sum)
	for _, row := range hist[len(hist)-H:] {
		for j, v := range row {
			sc.sum[j] += v
		}
	}
	res.oodDist = 0
	// combined rows: history (H) then horizon; window ending at horizon k
	// covers combined rows k+1 … k+H.
	oldest := func(i int) []float64 { // combined row i < H: history
		return hist[len(hist)-H+i]
	}
	var horizonRows [][]float64
	if H > 1 {
		horizonRows = make([][]float64, 0, p.T)
	}
	for k := 0; k < p.T; k++ {
		row := sc.row
		if H > 1 {
			row = make([]float64, cols)
		}
		p.oodRow(sc, k, row)
		if H > 1 { // the window's running sum (H = 1: the row is the window)
			var drop []float64
			if k < H {
				drop = oldest(k)
			} else {
				drop = horizonRows[k-H]
			}
			for j := 0; j < cols; j++ {
				sc.sum[j] += row[j] - drop[j]
			}
			horizonRows = append(horizonRows, row)
		} else {
			copy(sc.sum, row)
		}
		z := sc.z
		switch {
		case t.oodCols != nil: // a static model: its input row
			for j, c := range t.oodCols {
				z[j] = row[c]
			}
		case o.Features == eval.OODFeaturesRow:
			copy(z, row)
		default:
			for j := 0; j < cols; j++ {
				z[j] = sc.sum[j] / float64(H)
				z[cols+j] = row[j]
			}
		}
		d := mahalanobis(o, z)
		if !(d <= res.oodDist) || math.IsNaN(d) {
			if math.IsNaN(d) {
				res.oodDist, res.oodStep = math.Inf(1), k
			} else {
				res.oodDist, res.oodStep = d, k
			}
		}
	}
	switch {
	case p.distBeyond():
		res.oodCode = "OOD_DISTURBANCE"
	case !(res.oodDist <= o.Threshold):
		res.oodCode = "OOD_DISTANCE"
	case !(res.disagreement <= MaxDisagreement):
		res.oodCode = "OOD_DISAGREEMENT"
	default:
		res.oodAccepted = true
	}
}

func mahalanobis(o *eval.OOD, z []float64) float64 {
	q := 0.0
	for i, row := range o.Prec {
		di := z[i] - o.Mean[i]
		s := 0.0
		for j, pv := range row {
			s += pv * (z[j] - o.Mean[j])
		}
		q += di * s
	}
	return math.Sqrt(math.Max(0, q))
}
