package snapshot

import (
	"context"

	"fmt"
	"math"
	"sort"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/twin/contract"
)

// taker holds the state of one Take.
type taker struct {
	src    core.SeriesStore
	scene  *contract.SceneContract
	o      *opt
	nowMs  int64
	run    *core.Run
	filter core.ContextFilter
	vars   []*boundVar
	nodes  map[string]*nodeData // by node id: every node read
	rep    *Report
}

// boundVar is one scene variable and its node (node nil when unbound).
type boundVar struct {
	v       *contract.SceneVariable
	nodeID  string
	boundBy string
	node    *core.Node
	r       VariableReport
}

// nodeData is what was read and cleaned of one node.
type nodeData struct {
	node     core.Node
	kept     []core.Point // cleaned, time order
	counts   dataset.CleanCounts
	latest   *core.Point // the current value (nil: none usable)
	heldBack int
	future   int
	futureGE bool
}

func (t *taker) take(ctx context.Context) (*contract.TwinSnapshot, *Report, error) {
	o := t.o
	t.rep = &Report{CapturedAt: o.Now, Replay: o.Replay, Strict: o.Strict, MaxAgeMs: o.maxAgeMs,
		Unobservable: append([]string(nil), Unobservable...), Variables: []VariableReport{}}
	if err := t.resolveRun(ctx); err != nil {
		return nil, nil, err
	}
	if err := t.resolveVars(ctx); err != nil {
		return nil, nil, err
	}
	binding, err := t.checkBinding()
	if err != nil {
		return nil, nil, err
	}
	t.rep.Binding = binding

	// Nodes to read: every bound node, and the estimator's window nodes.
	var ids []string
	for _, b := range t.vars {
		if b.node != nil {
			ids = append(ids, b.nodeID)
		}
	}
	winNodes := o.windowNodes
	if o.Estimator == nil {
		winNodes = sortedUnique(append([]string(nil), ids...))
	}
	ids = sortedUnique(append(ids, winNodes...))
	lo := t.nowMs - o.lookbackMs
	if err := t.readAll(ctx, ids, lo); err != nil {
		return nil, nil, err
	}
	watermark := t.watermark()
	endMs := floorDiv(t.nowMs, o.beatMs) * o.beatMs
	if watermark > 0 {
		endMs = floorDiv(watermark, o.beatMs) * o.beatMs
	}
	startMs := endMs - int64(o.steps-1)*o.beatMs
	// The window (with its Hampel neighbourhood) must lie in what was
	// read; with stale data it may reach further back: read again.
	if need := startMs - o.HampelWindowMs; need < lo {
		if err := t.readAll(ctx, ids, need); err != nil {
			return nil, nil, err
		}
		watermark = t.watermark()
	}

	var problems []core.Problem
	if binding == nil && o.Strict {
		problems = append(problems, core.Problem{Field: "binding", Message: "no binding snapshot could be built (a bound node has no unit or line): the variables cannot be checked against their nodes"})
	}
	snap := &contract.TwinSnapshot{
		SchemaVersion: contract.TwinSnapshotSchemaVersion,
		CreatedBy:     o.CreatedBy,
		SceneID:       t.scene.SceneID,
		SceneVersion:  t.scene.SceneVersion,
		LineID:        t.scene.LineID,
		ProductID:     t.scene.ProductID,
		RecipeID:      t.scene.RecipeID,
		CapturedAt:    o.Now,
		DAQWatermark:  watermark,
	}
	if t.run != nil {
		snap.ProductID, snap.RecipeID = t.run.ProductID, t.run.RecipeID
		t.rep.RunID = t.run.ID
	}
	var missingControls []core.Problem
	measured := map[string]bool{}
	for _, b := range t.vars {
		r := &b.r
		if b.node == nil {
			r.Status = StatusUnbound
			t.rep.Variables = append(t.rep.Variables, *r)
			continue
		}
		t.rep.Bound++
		nd := t.nodes[b.nodeID]
		r.Clean, r.HeldBack, r.Future, r.FutureAtLeast = nd.counts, nd.heldBack, nd.future, nd.futureGE
		field := "variables." + b.v.ID
		if nd.latest == nil {
			r.Status = StatusMissing
			if ls, err := t.src.Latest(ctx, []string{b.nodeID}, t.filter); err == nil && len(ls) == 1 {
				r.NewestTsMs = core.UsToMs(ls[0].TsUs)
			}
			msg := fmt.Sprintf("node %s has no usable sample between %s and %s", b.nodeID, fmtMs(t.nowMs-o.lookbackMs), fmtMs(t.nowMs))
			if r.NewestTsMs != 0 {
				msg += fmt.Sprintf(" (its newest sample, any state, is at %s)", fmtMs(r.NewestTsMs))
			}
			r.Note = msg
			t.rep.MissingNodeIDs = append(t.rep.MissingNodeIDs, b.nodeID)
			if o.Strict {
				problems = append(problems, core.Problem{Field: field, Message: "missing: " + msg})
			}
			if b.v.Role == contract.RoleControl {
				missingControls = append(missingControls, core.Problem{Field: "controlValues." + b.v.ID, Message: "missing: " + msg + "; a snapshot needs every control's current value"})
			}
			t.rep.Variables = append(t.rep.Variables, *r)
			continue
		}
		val := nd.latest.Value
		r.Value, r.TsMs = &val, core.UsToMs(nd.latest.TsUs)
		r.AgeMs = max(0, t.nowMs-r.TsMs)
		if r.AgeMs > o.maxAgeMs {
			r.Status = StatusStale
			t.rep.StaleNodeIDs = append(t.rep.StaleNodeIDs, b.nodeID)
			if o.Strict {
				problems = append(problems, core.Problem{Field: field, Message: fmt.Sprintf("stale: the newest usable sample of node %s is %s old (at %s), more than the %s allowed",
					b.nodeID, msAge(r.AgeMs), fmtMs(r.TsMs), msAge(o.maxAgeMs))})
			}
		} else {
			r.Status = StatusOK
			t.rep.Fresh++
		}
		switch b.v.Role {
		case contract.RoleControl:
			setVal(&snap.ControlValues, b.v.ID, val)
		case contract.RoleDisturbance:
			setVal(&snap.Disturbances, b.v.ID, val)
		case contract.RoleState:
			setVal(&snap.StateEstimate, b.v.ID, val)
			measured[b.v.ID] = true
		}
		t.rep.Variables = append(t.rep.Variables, *r)
	}
	// Future samples of every node read (bound or window-only).
	for _, id := range ids {
		nd := t.nodes[id]
		if nd.future == 0 {
			continue
		}
		t.rep.FutureSamples += nd.future
		t.rep.FutureNodeIDs = append(t.rep.FutureNodeIDs, id)
		if o.Strict {
			n := fmt.Sprint(nd.future)
			if nd.futureGE {
				n = "at least " + n
			}
			problems = append(problems, core.Problem{Field: "nodes." + id, Message: fmt.Sprintf("future: node %s has %s sample(s) stamped after %s (capture time + %s tolerance)",
				id, n, fmtMs(t.nowMs+o.tolMs), msAge(o.tolMs))})
		}
	}
	if len(problems) > 0 {
		return nil, t.rep, qualityErr(problems)
	}
	if len(missingControls) > 0 {
		return nil, t.rep, qualityErr(missingControls)
	}

	// Window on the grid, never filled in: gaps stay null.
	w := &contract.SnapshotWindow{BeatMs: o.beatMs, EndMs: endMs, Steps: o.steps, Values: map[string][]*float64{}}
	if t.run != nil {
		w.RunID = t.run.ID
	}
	for _, id := range winNodes {
		g, _ := dataset.Align(t.nodes[id].kept, startMs*1000, (endMs+o.beatMs)*1000-1, dataset.AlignConfig{BeatUs: o.beatMs * 1000})
		vs := make([]*float64, o.steps)
		for k := range vs {
			if k < len(g.Values) && !math.IsNaN(g.Values[k]) {
				x := g.Values[k]
				vs[k] = &x
				t.rep.WindowFilled++
			}
		}
		t.rep.WindowCells += o.steps
		w.Values[id] = vs
	}
	snap.Window = w

	// State estimate: measured states are last-valid; the rest from the
	// estimator, if any.
	var unmeasured []string
	for _, s := range t.scene.States {
		if !measured[s.ID] {
			unmeasured = append(unmeasured, s.ID)
		}
	}
	snap.EstimatorVersion = VersionLastValid
	switch {
	case o.Estimator != nil:
		est, ver, err := o.Estimator.EstimateState(ctx, w)
		if err != nil {
			return nil, t.rep, err
		}
		if ver == "" {
			return nil, t.rep, core.Errorf(core.CodeInternal, "the state estimator returned no version")
		}
		snap.EstimatorVersion = VersionLastValid + "+" + ver
		for _, id := range unmeasured {
			x, ok := est[id]
			if !ok {
				t.rep.Notes = append(t.rep.Notes, fmt.Sprintf("state %s: neither measured nor estimated by %s", id, ver))
				continue
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, t.rep, core.FieldErrorf(core.CodeNonFinite, "stateEstimate."+id, "the estimator %s returned %v for state %s", ver, x, id)
			}
			setVal(&snap.StateEstimate, id, x)
			for i := range t.rep.Variables {
				if vr := &t.rep.Variables[i]; vr.VariableID == id {
					xv := x
					vr.Status, vr.Value, vr.Note = StatusEstimated, &xv, "estimated by "+ver
				}
			}
		}
		for _, id := range sortedKeys(est) {
			if v := t.scene.Variable(id); v == nil || v.Role != contract.RoleState {
				t.rep.Notes = append(t.rep.Notes, fmt.Sprintf("estimator output %s is not a state of the scene: ignored", id))
			} else if measured[id] {
				t.rep.Notes = append(t.rep.Notes, fmt.Sprintf("state %s is measured: the last valid observation is used, not the estimate", id))
			}
		}
	case len(unmeasured) > 0:
		snap.EstimatorVersion = VersionLastValid + "+" + VersionNoModel
		t.rep.Notes = append(t.rep.Notes, fmt.Sprintf("unmeasured state(s) omitted (no model given): %v", unmeasured))
	}
	t.rep.EstimatorVersion = snap.EstimatorVersion

	// Phase: the store records none.
	snap.Phase, t.rep.PhaseSource = o.Phase, "option"
	if snap.Phase == "" {
		t.rep.PhaseSource = "default"
		snap.Phase = t.scene.Phases[0]
		for _, p := range t.scene.Phases {
			if p == "unknown" {
				snap.Phase = p
			}
		}
		t.rep.Notes = append(t.rep.Notes, fmt.Sprintf("phase %q assumed: the store records no process phase (set it with Options.Phase / --phase)", snap.Phase))
	}
	t.rep.Phase = snap.Phase

	// Data quality.
	if t.rep.Bound > 0 {
		t.rep.VariableCompleteness = float64(t.rep.Fresh) / float64(t.rep.Bound)
	}
	if t.rep.WindowCells > 0 {
		t.rep.WindowCompleteness = float64(t.rep.WindowFilled) / float64(t.rep.WindowCells)
	}
	stale := sortedUnique(append(append([]string(nil), t.rep.StaleNodeIDs...), t.rep.MissingNodeIDs...))
	snap.DataQuality = contract.DataQuality{
		Fresh:        t.rep.Bound > 0 && t.rep.Fresh == t.rep.Bound,
		Completeness: min(t.rep.VariableCompleteness, t.rep.WindowCompleteness),
		StaleNodeIDs: stale,
	}
	if len(stale) == 0 {
		snap.DataQuality.StaleNodeIDs = nil
	}
	if binding != nil {
		snap.BindingSnapshotHash = binding.SnapshotHash
	}

	snap.CreatedAt = o.Clock().UTC()
	snap.SnapshotID = o.SnapshotID
	if snap.SnapshotID == "" {
		snap.SnapshotID = NewSnapshotID(o.Now)
	}
	t.rep.SnapshotID = snap.SnapshotID
	if err := snap.Seal(); err != nil {
		return nil, t.rep, err
	}
	if err := snap.CheckAgainst(t.scene); err != nil {
		return nil, t.rep, err
	}
	return snap, t.rep, nil
}

func setVal(m *map[string]float64, k string, v float64) {
	if *m == nil {
		*m = map[string]float64{}
	}
	(*m)[k] = v
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// resolveRun picks the run and the context filter.
func (t *taker) resolveRun(ctx context.Context) error {
	s := t.scene
	if t.o.RunID != "" {
		r, err := t.src.GetRun(ctx, t.o.RunID)
		if err != nil {
			return err
		}
		t.run = &r
	} else {
		runs, err := t.src.ListRuns(ctx, core.RunFilter{Line: s.LineID})
		if err != nil {
			return err
		}
		// Newest active run started by Now, else the newest run of any status.
		var best, bestActive *core.Run
		for i := range runs {
			r := &runs[i]
			if r.StartedMs > t.nowMs {
				continue
			}
			if best == nil || r.StartedMs >= best.StartedMs {
				best = r
			}
			if r.Status == core.RunActive && (bestActive == nil || r.StartedMs >= bestActive.StartedMs) {
				bestActive = r
			}
		}
		if bestActive != nil {
			best = bestActive
		}
		t.run = best
	}
	if t.run == nil {
		t.filter = core.ContextFilter{Line: s.LineID}
		t.rep.Notes = append(t.rep.Notes, fmt.Sprintf("no run of line %s started by %s: samples of the line are read without a run filter", s.LineID, fmtMs(t.nowMs)))
		return nil
	}
	r := t.run
	var p []core.Problem
	if r.LineID != s.LineID {
		p = append(p, core.Problem{Field: "run", Message: fmt.Sprintf("run %s is on line %s, the scene on line %s", r.ID, r.LineID, s.LineID)})
	}
	if s.ProductID != "" && r.ProductID != s.ProductID {
		p = append(p, core.Problem{Field: "run", Message: fmt.Sprintf("run %s makes product %s, the scene is for product %s", r.ID, r.ProductID, s.ProductID)})
	}
	if s.RecipeID != "" && r.RecipeID != s.RecipeID {
		p = append(p, core.Problem{Field: "run", Message: fmt.Sprintf("run %s runs recipe %s, the scene is for recipe %s", r.ID, r.RecipeID, s.RecipeID)})
	}
	if len(p) > 0 {
		return core.Invalid(core.CodeInvalidArgument, p)
	}
	t.filter = core.ContextFilter{Run: r.ID}
	return nil
}

// resolveVars finds each scene variable's node.
func (t *taker) resolveVars(ctx context.Context) error {
	s := t.scene
	var p []core.Problem
	for _, k := range sortedKeys(t.o.Bindings) {
		if s.Variable(k) == nil {
			p = append(p, core.Problem{Field: "bind." + k, Message: fmt.Sprintf("%q is not a variable of scene %s", k, s.SceneID)})
		} else if t.o.Bindings[k] == "" {
			p = append(p, core.Problem{Field: "bind." + k, Message: "empty node id"})
		}
	}
	if len(p) > 0 {
		return core.Invalid(core.CodeInvalidArgument, p)
	}
	for _, l := range [][]contract.SceneVariable{s.Controls, s.States, s.Disturbances, s.Observations, s.Guards} {
		for i := range l {
			v := &l[i]
			b := &boundVar{v: v, nodeID: v.ID, boundBy: BoundBySameID}
			if n, ok := t.o.Bindings[v.ID]; ok {
				b.nodeID, b.boundBy = n, BoundByOption
			} else if v.NodeID != "" {
				b.nodeID, b.boundBy = v.NodeID, BoundBySceneNodeID
			}
			n, err := t.src.GetNode(ctx, b.nodeID)
			switch {
			case core.CodeOf(err) == core.CodeNotFound:
				if b.boundBy != BoundBySameID {
					p = append(p, core.Problem{Field: "variables." + v.ID, Message: fmt.Sprintf("bound (by %s) to node %s, which does not exist", b.boundBy, b.nodeID)})
				}
				b.nodeID, b.boundBy = "", ""
			case err != nil:
				return err
			default:
				b.node = &n
			}
			b.r = VariableReport{VariableID: v.ID, Role: string(v.Role), NodeID: b.nodeID, BoundBy: b.boundBy}
			t.vars = append(t.vars, b)
		}
	}
	if len(p) > 0 {
		return bindingErr(p)
	}
	return nil
}

// readAll reads and cleans every node in ids from loMs.
func (t *taker) readAll(ctx context.Context, ids []string, loMs int64) error {
	t.nodes = map[string]*nodeData{}
	for _, id := range ids {
		n, err := t.src.GetNode(ctx, id)
		if core.CodeOf(err) == core.CodeNotFound {
			return core.FieldErrorf(core.CodeInvalidArgument, "estimator.window", "the estimator's window asks for node %s, which does not exist", id)
		}
		if err != nil {
			return err
		}
		nd, err := t.readNode(ctx, n, loMs)
		if err != nil {
			return err
		}
		t.nodes[id] = nd
	}
	return nil
}

func (t *taker) readNode(ctx context.Context, n core.Node, loMs int64) (*nodeData, error) {
	o := t.o
	hi := t.nowMs + o.tolMs
	if o.Replay {
		hi = t.nowMs
	}
	nd := &nodeData{node: n}
	var pts []core.Point
	q := core.PageQuery{Node: n.ID, Filter: t.filter, FromMs: &loMs, ToMs: &hi, Limit: 100_000}
	for {
		pg, err := t.src.QueryPage(ctx, q)
		if err != nil {
			return nil, err
		}
		pts = append(pts, pg.Points...)
		if len(pts) > maxPointsPerNode {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "lookback", "node %s has more than %d samples in the lookback of %s: shorten it", n.ID, maxPointsPerNode, msAge(t.nowMs-loMs))
		}
		if !pg.HasMore {
			break
		}
		after := pg.NextAfterTs
		q.AfterTs = &after
	}
	if !o.Replay {
		from := hi + 1
		pg, err := t.src.QueryPage(ctx, core.PageQuery{Node: n.ID, Filter: t.filter, FromMs: &from, Limit: maxFutureRead})
		if err != nil {
			return nil, err
		}
		nd.future, nd.futureGE = len(pg.Points), pg.HasMore
	}
	cfg := dataset.CleanConfig{StateFilter: true, Min: n.Min, Max: n.Max, HampelWindowUs: o.HampelWindowMs * 1000, HampelThreshold: o.HampelThreshold}
	nd.kept, nd.counts = dataset.Clean(pts, cfg)
	nd.latest, nd.heldBack = t.current(nd.kept, n.Kind)
	return nd, nil
}

// current returns the current value of a cleaned series and how many
// newer samples were held back. The two-sided Hampel test of
// dataset.Clean cannot judge the newest samples (they have no right
// neighbours), so for a measured (daq) node the newest samples are also
// tested against their left neighbourhood alone: a sample that disagrees
// with its recent past is held back as a possible spike, and the newest
// one that agrees is used. A genuine level change is accepted once it is
// confirmed (the left window's median has moved, after about half a
// window); if no sample of the last half window agrees, the newest is used
// (the level changed). Setpoints (dcw) step on purpose and are not tested.
func (t *taker) current(kept []core.Point, kind string) (*core.Point, int) {
	n := len(kept)
	if n == 0 {
		return nil, 0
	}
	w, k := t.o.HampelWindowMs*1000, t.o.HampelThreshold // µs, as sample times
	if kind != core.NodeDAQ || w <= 0 || k <= 0 {
		p := kept[n-1]
		return &p, 0
	}
	newest := kept[n-1].TsUs
	for j := n - 1; j >= 0 && kept[j].TsUs >= newest-w; j-- {
		if agreesWithPast(kept, j, w, k) {
			p := kept[j]
			return &p, n - 1 - j
		}
	}
	p := kept[n-1]
	return &p, 0
}

// agreesWithPast applies dataset.Clean's Hampel rule to kept[j] with its
// left neighbourhood mirrored to the right, so that both sides are the
// past: the one-sided test expressed with the shared implementation. w is
// the half window in µs.
func agreesWithPast(kept []core.Point, j int, w int64, k float64) bool {
	t0 := kept[j].TsUs
	i := j
	for i > 0 && kept[i-1].TsUs >= t0-w {
		i--
	}
	left := kept[i:j]
	if len(left) < 2 {
		return true // cannot be judged
	}
	s := make([]core.Point, 0, 2*len(left)+1)
	s = append(s, left...)
	s = append(s, kept[j])
	for m := len(left) - 1; m >= 0; m-- {
		s = append(s, core.Point{TsUs: 2*t0 - left[m].TsUs, Value: left[m].Value, State: left[m].State})
	}
	out, _ := dataset.Clean(s, dataset.CleanConfig{HampelWindowUs: w, HampelThreshold: k})
	for _, p := range out {
		if p.TsUs == t0 {
			return true
		}
	}
	return false
}

// watermark is the newest cleaned sample time of every node read.
func (t *taker) watermark() int64 {
	var wm int64
	for _, nd := range t.nodes {
		if n := len(nd.kept); n > 0 {
			wm = max(wm, core.UsToMs(nd.kept[n-1].TsUs))
		}
	}
	return wm
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
