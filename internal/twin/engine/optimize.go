package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Tuning modes (the seed's chooseTuningMode).
const (
	ModeSafeSmallStep = eval.TuningSafeSmallStep
	ModePreciseSearch = eval.TuningPreciseSearch
)

// DefaultMaxCandidates bounds the candidates one optimisation evaluates.
const DefaultMaxCandidates = 200

// MaxCandidates is the most candidates a request may ask one
// optimisation to evaluate (each is a trial simulation): optimize
// refuses more before any work starts.
const MaxCandidates = 10_000

// ChooseMode is the tuning mode a twin gate report allows:
// precise_search when the gate passed, else safe_small_step.
func ChooseMode(r eval.TwinGateReport) string { return eval.ChooseTuningMode(r) }

// OptimizeInput is one optimisation's request.
type OptimizeInput struct {
	Scene     *contract.SceneContract
	Snapshot  *contract.TwinSnapshot
	Objective *contract.ObjectiveProfile
	// Mode is safe_small_step (default) or precise_search.
	Mode string
	// Seed orders the pattern search's polls (the result is a pure
	// function of the inputs and the seed).
	Seed uint64
	// MaxCandidates bounds the candidates evaluated (default 200).
	MaxCandidates int
	// TrialID, CreatedBy and Now are the best trial's record fields.
	TrialID   string
	CreatedBy string
	Now       time.Time
}

// CandidateSummary is one evaluated candidate.
type CandidateSummary struct {
	Rank int `json:"rank"`
	// Moves: the setpoints from each move step on (held until the next),
	// scene control id → value.
	MoveSteps      []int                `json:"moveSteps"`
	Setpoints      []map[string]float64 `json:"setpoints"`
	Cost           float64              `json:"cost"`
	Improvement    float64              `json:"improvement"`
	Passed         bool                 `json:"passed"`
	RejectCode     string               `json:"rejectCode,omitempty"`
	HardViolations int                  `json:"hardViolations"`
	OODDistance    float64              `json:"oodDistance"`
	Source         string               `json:"source"` // baseline, small_step, pattern
}

// OptimizeResult is an optimisation's outcome.
type OptimizeResult struct {
	Mode string `json:"mode"`
	// Best is the trial of the lowest-cost candidate that passes
	// constraints, UQ and OOD (nil when none does; holding the baseline is
	// always a candidate).
	Best       *contract.VirtualTrial `json:"best,omitempty"`
	BestDetail *TrialDetail           `json:"bestDetail,omitempty"`
	// Evaluated is the number of distinct candidates rolled out.
	Evaluated int `json:"evaluated"`
	// Ranked: every evaluated candidate, passing ones first by cost.
	Ranked []CandidateSummary `json:"ranked"`
	// MoveSteps are the horizon steps where the write policy lets the
	// candidates move (every control moves at most once per slot).
	MoveSteps []int `json:"moveSteps"`
	// NoPass explains an empty Best.
	NoPass string `json:"noPass,omitempty"`
}

// candidate is a point of the search: the setpoints per slot and control.
type candidate struct {
	x      []float64 // [slots][controls] flat
	source string
	res    *evalResult
}

// Optimize searches control moves within the trust region and the write
// policy and returns the lowest-cost candidate that passes. Candidates
// move every scene control only at the slots the write policy allows —
// steps 0, g, 2g, … with g = max(minNodeIntervalSec, minLineActionIntervalSec)
// in steps, at most maxActionsPerRun of them — and hold in between (60 s
// at a 1 s beat over a 60-step horizon: one move per control at step 0).
// Every setpoint stays in the scene range ∩ trust region window, within
// the trust region's maxDelta of the snapshot's value, and moves at most
// min(maxStep, maxDeltaPerAction, trust maxDelta) per slot.
//
// safe_small_step evaluates the seed's small-step candidates: holding the
// baseline, and each control alone moved by ± its step limit at step 0.
// precise_search starts from the best passing small-step candidate and
// runs a deterministic compass (pattern) search over all slots and
// controls: poll ±Δ along every coordinate (order shuffled by the seed),
// move to the best improving passing poll, halve Δ when none improves,
// until MaxCandidates distinct candidates were evaluated or Δ is below
// 1/1000 of the step limits. A candidate that fails constraints or OOD
// never becomes the incumbent. Candidates are evaluated in parallel on
// GOMAXPROCS goroutines, each with its own simulator and buffers; the
// result does not depend on the number of goroutines.
func (t *Twin) Optimize(ctx context.Context, in OptimizeInput) (*OptimizeResult, error) {
	mode := in.Mode
	if mode == "" {
		mode = ModeSafeSmallStep
	}
	if mode != ModeSafeSmallStep && mode != ModePreciseSearch {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "mode", "must be %s or %s, not %q", ModeSafeSmallStep, ModePreciseSearch, mode)
	}
	budget := in.MaxCandidates
	if budget <= 0 {
		budget = DefaultMaxCandidates
	}
	p, err := t.newPlan(in.Scene, in.Snapshot, in.Objective)
	if err != nil {
		return nil, err
	}
	o := &optimizer{p: p, ctx: ctx, seen: map[string]*candidate{}, budget: budget}
	o.slots = p.moveSlots()
	nc := len(p.sceneCtrl)
	// the seed's small-step candidates
	base := make([]float64, len(o.slots)*nc)
	for s := range o.slots {
		copy(base[s*nc:], p.baseline)
	}
	batch := []*candidate{{x: base, source: "baseline"}}
	for c := 0; c < nc; c++ {
		for _, sign := range []float64{-1, 1} {
			x := append([]float64(nil), base...)
			for s := range o.slots {
				x[s*nc+c] = p.baseline[c] + sign*p.stepMax[c]
			}
			batch = append(batch, &candidate{x: o.project(x), source: "small_step"})
		}
	}
	if err := o.run(batch); err != nil {
		return nil, err
	}
	if mode == ModePreciseSearch {
		if err := o.patternSearch(in.Seed); err != nil {
			return nil, err
		}
	}
	return o.result(in, mode)
}

type optimizer struct {
	p      *plan
	ctx    context.Context
	slots  []int
	seen   map[string]*candidate
	all    []*candidate
	budget int
	pool   []*scratch
}

// moveSlots are the steps where candidates may move.
func (p *plan) moveSlots() []int {
	g := max(p.nodeSteps, p.lineSteps)
	var out []int
	for k := 0; k < p.T && len(out) < max(1, p.maxMoves); k += g {
		out = append(out, k)
	}
	return out
}

// project makes x feasible, slot by slot: each setpoint within the
// allowed window, the trust region around the baseline and the step limit
// from the previous slot.
func (o *optimizer) project(x []float64) []float64 {
	p := o.p
	nc := len(p.sceneCtrl)
	for s := range o.slots {
		for c := 0; c < nc; c++ {
			prev := p.baseline[c]
			if s > 0 {
				prev = x[(s-1)*nc+c]
			}
			lo := math.Max(p.lo[c], math.Max(p.baseline[c]-p.trDelta[c], prev-p.stepMax[c]))
			hi := math.Min(p.hi[c], math.Min(p.baseline[c]+p.trDelta[c], prev+p.stepMax[c]))
			v := x[s*nc+c]
			if lo > hi { // cannot happen for a baseline inside its window; hold
				v = prev
			} else {
				v = math.Min(hi, math.Max(lo, v))
			}
			x[s*nc+c] = v
		}
	}
	return x
}

// expand turns slot setpoints into a [T][controls] trajectory.
func (o *optimizer) expand(x []float64) [][]float64 {
	p := o.p
	nc := len(p.sceneCtrl)
	out := make([][]float64, p.T)
	s := 0
	for k := 0; k < p.T; k++ {
		for s+1 < len(o.slots) && o.slots[s+1] <= k {
			s++
		}
		out[k] = x[s*nc : (s+1)*nc : (s+1)*nc]
	}
	return out
}

func key(x []float64) string {
	b := make([]byte, 0, len(x)*8)
	for _, v := range x {
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
		b = append(b, ',')
	}
	return string(b)
}

// run evaluates the new candidates of batch (in parallel, results in
// batch order), skipping those already seen, within the budget. It
// returns the batch with every candidate resolved to its evaluated twin.
func (o *optimizer) run(batch []*candidate) error {
	var todo []*candidate
	for i, c := range batch {
		k := key(c.x)
		if old, ok := o.seen[k]; ok {
			batch[i] = old
			continue
		}
		if len(o.all)+len(todo) >= o.budget {
			batch[i] = nil
			continue
		}
		o.seen[k] = c
		todo = append(todo, c)
	}
	if len(todo) == 0 {
		return nil
	}
	if err := o.ctx.Err(); err != nil {
		return core.Wrap(core.CodeInternal, err, "optimisation cancelled")
	}
	workers := min(runtime.GOMAXPROCS(0), len(todo))
	for len(o.pool) < workers {
		o.pool = append(o.pool, o.p.newScratch())
	}
	var wg sync.WaitGroup
	next := make(chan int, len(todo))
	for i := range todo {
		next <- i
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(sc *scratch) {
			defer wg.Done()
			for i := range next {
				todo[i].res = o.p.evaluate(sc, o.expand(todo[i].x), false)
			}
		}(o.pool[w])
	}
	wg.Wait()
	o.all = append(o.all, todo...)
	return nil
}

// better reports whether a beats b as an incumbent: passing, and lower
// cost (ties broken by the earlier evaluation, i.e. never).
func better(a, b *candidate) bool {
	if a == nil || a.res == nil || !a.res.passed {
		return false
	}
	if b == nil || b.res == nil || !b.res.passed {
		return true
	}
	return a.res.cost < b.res.cost-1e-12*math.Max(1, math.Abs(b.res.cost))
}

// whyNot says why a candidate did not pass: its failed physics, the
// first failed constraints with their values, and the OOD check's code
// with its distance and threshold or the disturbance estimate beyond its
// scene limit — so a point where nothing passes names its cause.
func (o *optimizer) whyNot(res *evalResult) string {
	if res.modelErr != "" {
		return contract.RejectModelFailure + ": " + res.modelErr
	}
	var why []string
	for _, c := range res.cons {
		if !c.passed && len(why) < 3 {
			why = append(why, c.detail)
		}
	}
	if n := res.violations - len(why); n > 0 && len(why) == 3 {
		why = append(why, fmt.Sprintf("%d more", n))
	}
	if !res.oodAccepted {
		switch res.oodCode {
		case "OOD_DISTANCE":
			why = append(why, fmt.Sprintf("OOD_DISTANCE %.4g > threshold %.4g at horizon step %d", res.oodDist, o.p.t.ood.Threshold, res.oodStep))
		case "OOD_DISTURBANCE":
			for _, d := range o.p.dist {
				if d != nil && math.Abs(d.b) > d.decl.Limit() {
					why = append(why, fmt.Sprintf("OOD_DISTURBANCE %s estimate %.4g beyond maxAbs %.4g", d.decl.ID, d.b, d.decl.Limit()))
				}
			}
		case "OOD_DISAGREEMENT":
			why = append(why, fmt.Sprintf("OOD_DISAGREEMENT %.4g > %.4g", res.disagreement, MaxDisagreement))
		default:
			why = append(why, res.oodCode)
		}
	}
	if len(why) == 0 {
		return res.rejectCode
	}
	return strings.Join(why, "; ")
}

func (o *optimizer) best() *candidate {
	var b *candidate
	for _, c := range o.all {
		if better(c, b) {
			b = c
		}
	}
	return b
}

func (o *optimizer) patternSearch(seed uint64) error {
	p := o.p
	nc := len(p.sceneCtrl)
	dim := len(o.slots) * nc
	inc := o.best()
	if inc == nil {
		return nil // nothing passes: no incumbent to search from
	}
	step := make([]float64, dim)
	minStep := make([]float64, dim)
	for i := range step {
		c := i % nc
		s := p.stepMax[c]
		if math.IsInf(s, 0) {
			s = math.Min(p.hi[c]-p.lo[c], 2*math.Abs(p.baseline[c])+1) / 4
		}
		step[i], minStep[i] = s/2, s/1000
	}
	rng := rand.New(rand.NewPCG(seed, 0x74776e))
	order := make([]int, dim)
	for i := range order {
		order[i] = i
	}
	for len(o.all) < o.budget {
		rng.Shuffle(dim, func(i, j int) { order[i], order[j] = order[j], order[i] })
		var polls []*candidate
		for _, d := range order {
			for _, sign := range []float64{1, -1} {
				x := append([]float64(nil), inc.x...)
				x[d] += sign * step[d]
				polls = append(polls, &candidate{x: o.project(x), source: "pattern"})
			}
		}
		if err := o.run(polls); err != nil {
			return err
		}
		var win *candidate
		for _, c := range polls {
			if c != nil && better(c, inc) && better(c, win) {
				win = c
			}
		}
		if win != nil {
			inc = win
			continue
		}
		done := true
		for i := range step {
			step[i] /= 2
			done = done && step[i] < minStep[i]
		}
		if done || o.exhausted(polls) {
			break
		}
	}
	return nil
}

// exhausted reports a poll that added nothing because the budget is spent.
func (o *optimizer) exhausted(polls []*candidate) bool {
	for _, c := range polls {
		if c == nil {
			return true
		}
	}
	return false
}

func (o *optimizer) result(in OptimizeInput, mode string) (*OptimizeResult, error) {
	p := o.p
	nc := len(p.sceneCtrl)
	r := &OptimizeResult{Mode: mode, Evaluated: len(o.all), MoveSteps: o.slots}
	sorted := append([]*candidate(nil), o.all...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i].res, sorted[j].res
		if a.passed != b.passed {
			return a.passed
		}
		return a.cost < b.cost
	})
	for i, c := range sorted {
		cs := CandidateSummary{Rank: i + 1, MoveSteps: o.slots, Cost: c.res.cost, Improvement: p.base.cost - c.res.cost, Passed: c.res.passed,
			RejectCode: c.res.rejectCode, HardViolations: c.res.violations, OODDistance: finiteOr(c.res.oodDist, math.MaxFloat64), Source: c.source}
		if c.res.modelErr != "" {
			cs.RejectCode = contract.RejectModelFailure
		}
		for s := range o.slots {
			m := map[string]float64{}
			for ci, id := range p.sceneCtrl {
				m[id] = c.x[s*nc+ci]
			}
			cs.Setpoints = append(cs.Setpoints, m)
		}
		r.Ranked = append(r.Ranked, cs)
	}
	best := o.best()
	if best == nil {
		r.NoPass = fmt.Sprintf("none of the %d candidates (holding the baseline included) passes the constraints and the OOD check", len(o.all))
		for _, c := range o.all {
			if c.source == "baseline" {
				r.NoPass += "; holding the baseline: " + o.whyNot(c.res)
				break
			}
		}
		return r, nil
	}
	traj := o.expand(best.x)
	cand := make([]map[string]float64, p.T)
	for k := range cand {
		cand[k] = map[string]float64{}
		for ci, id := range p.sceneCtrl {
			cand[k][id] = traj[k][ci]
		}
	}
	tr, d, err := p.trial(TrialInput{Scene: in.Scene, Snapshot: in.Snapshot, Objective: in.Objective, Candidate: cand,
		TrialID: in.TrialID, CreatedBy: in.CreatedBy, Now: in.Now})
	if err != nil {
		return nil, err
	}
	tr.Provenance["optimizer"] = mode
	tr.Provenance["candidatesEvaluated"] = strconv.Itoa(len(o.all))
	r.Best, r.BestDetail = tr, d
	return r, nil
}
