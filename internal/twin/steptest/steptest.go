// Package steptest designs plant step tests for identification: per
// manipulated variable a sequence of steps or a pseudo-random binary
// sequence (PRBS/GBN) around the current operating point, with amplitudes
// and hold times chosen within the scene's write policy and the controls'
// ranges, optionally one variable at a time. Design is pure: it neither
// reads the line nor writes to it. What a plan would need that the write
// policy does not allow (more actions than maxActionsPerRun) is reported
// as a problem, never silently cut.
//
// A plan becomes a signed step-test certificate (Issue, contract
// StepTestCertificate) that a person other than its proposer, with the
// approver or admin role and not an agent's token name, approves
// (Approve). Execute runs it on the live line: at each move's time it
// asks the write guard, which checks the move against the certificate
// (value, time slot), the scene's write policy and the channel, writes it
// with readback and records it; after every sample it checks the scene's
// hard ranges on the measured outputs, and a refused move or a breached
// limit stops the test with nothing written after. Fit fits
// process_model@1 (FOPDT per input) to the recorded execution and
// compares its gains, time constants, dead times and step responses
// with a previous model; it also fits linear_state_space@1's model class
// (statespace.go: PO-MOESP, the input delays from the FOPDT dead times)
// and reports its gains, dead times and step responses beside them.
//
// Issue, approval, every move (decision, outcome, readback) and the end
// are recorded in the hash-chained audit log under signed checkpoints
// (record.go: RecordIssue, RecordApprove, Load replays and verifies;
// Auditor); RecordRevoke revokes a test (its proposer or an approver)
// and List lists a line's tests. Execute checks each move against the
// certificate ExecInput.Current returns at that moment (the application
// replays the trail), so a test revoked while it runs stops. PacedLine is the live line of a
// production run: a governed writer (OPC UA) sampled on the wall clock.
// The application (internal/app, steptest.*) stores the executed samples
// as an identification run.
package steptest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Signals.
const (
	SignalSteps = "steps" // up, back, down, back: four moves per variable
	SignalPRBS  = "prbs"  // a generalised binary noise sequence between base ± amplitude
)

// Options of Design.
type Options struct {
	// Signal is SignalSteps (default) or SignalPRBS.
	Signal string
	// Variables are the controls to excite (default: every scene control
	// with a maxDeltaPerAction).
	Variables []string
	// Base is the operating point each variable moves around (required
	// for every variable: the snapshot's control values).
	Base map[string]float64
	// Amplitude per variable (default: the largest the write policy and
	// the control's range allow: maxDeltaPerAction for steps, half of it
	// for PRBS, whose moves span twice the amplitude).
	Amplitude map[string]float64
	// HoldSec is the time between moves (default and minimum: the write
	// policy's max(minNodeIntervalSec, minLineActionIntervalSec)).
	HoldSec float64
	// Switches is the number of PRBS moves per variable (default 8).
	Switches int
	// OneAtATime moves one variable per action (default: all variables
	// of a step move together with independent sequences).
	OneAtATime bool
	// Seed orders the PRBS (default 1).
	Seed uint64
}

// Move is one action of a plan: at AtSec after the start, set each
// variable of Set (from the previous value, the base at first).
type Move struct {
	AtSec float64            `json:"atSec"`
	Set   map[string]float64 `json:"set"`
}

// Plan is a designed step test.
type Plan struct {
	SceneID      string             `json:"sceneId"`
	SceneVersion string             `json:"sceneVersion"`
	SceneHash    string             `json:"sceneHash"`
	LineID       string             `json:"lineId"`
	Signal       string             `json:"signal"`
	Variables    []string           `json:"variables"`
	Base         map[string]float64 `json:"base"`
	Amplitude    map[string]float64 `json:"amplitude"`
	HoldSec      float64            `json:"holdSec"`
	OneAtATime   bool               `json:"oneAtATime"`
	Moves        []Move             `json:"moves"`
	// DurationSec is the test's length: the last move (the return to
	// base) plus one hold to see its response.
	DurationSec float64 `json:"durationSec"`
	// Actions is the number of guarded write actions the plan needs
	// (its moves, the returns to base included); MaxActionsPerRun the write
	// policy's limit, and Problems why the plan cannot run as one run.
	Actions          int      `json:"actions"`
	MaxActionsPerRun int      `json:"maxActionsPerRun"`
	Problems         []string `json:"problems,omitempty"`
	// Notes say what Design chose and why.
	Notes []string `json:"notes,omitempty"`
}

// DefaultSwitches is the default number of PRBS moves per variable.
const DefaultSwitches = 8

// MaxMoves bounds a plan's moves.
const MaxMoves = 1000

// Design designs a step test on a frozen scene (see Options). Bad options
// are refused with AML_INVALID_ARGUMENT naming the field; a plan the write
// policy cannot run in one run is returned with Problems.
func Design(s *contract.SceneContract, o Options) (*Plan, error) {
	if s == nil || s.Status != contract.SceneFrozen {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "scene", "a frozen scene is required")
	}
	h, err := s.Hash()
	if err != nil {
		return nil, err
	}
	wp := s.WritePolicy
	p := &Plan{SceneID: s.SceneID, SceneVersion: s.SceneVersion, SceneHash: h, LineID: s.LineID, Signal: o.Signal,
		Base: map[string]float64{}, Amplitude: map[string]float64{}, OneAtATime: o.OneAtATime, MaxActionsPerRun: wp.MaxActionsPerRun}
	switch p.Signal {
	case "":
		p.Signal = SignalSteps
	case SignalSteps, SignalPRBS:
	default:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "signal", "signal %q: want %s or %s", o.Signal, SignalSteps, SignalPRBS)
	}
	minHold := math.Max(wp.MinNodeIntervalSec, wp.MinLineActionIntervalSec)
	p.HoldSec = o.HoldSec
	switch {
	case math.IsNaN(o.HoldSec) || o.HoldSec < 0:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "holdSec", "holdSec must be ≥ 0")
	case o.HoldSec == 0:
		p.HoldSec = minHold
		p.Notes = append(p.Notes, fmt.Sprintf("hold %gs: the write policy's shortest interval between actions", minHold))
	case o.HoldSec < minHold:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "holdSec", "holdSec %g is shorter than the write policy's interval %g s", o.HoldSec, minHold)
	}
	if p.HoldSec <= 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "holdSec", "the scene's write policy has no interval: give holdSec")
	}
	vars := o.Variables
	if len(vars) == 0 {
		for _, c := range s.Controls {
			if _, ok := wp.MaxDeltaPerAction[c.ID]; ok {
				vars = append(vars, c.ID)
			}
		}
	}
	vars = append([]string(nil), vars...)
	sort.Strings(vars)
	for i, v := range vars {
		c := s.Control(v)
		if c == nil {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "variables", "%s is not a control of scene %s", v, s.SceneID)
		}
		if i > 0 && vars[i-1] == v {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "variables", "%s is given twice", v)
		}
		limit, ok := wp.MaxDeltaPerAction[v]
		if !ok || !(limit > 0) {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "variables", "the write policy has no maxDeltaPerAction for %s: it cannot be moved", v)
		}
		base, ok := o.Base[v]
		if !ok || math.IsNaN(base) || math.IsInf(base, 0) {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "base."+v, "the operating point of %s is required", v)
		}
		span := 2.0 // a PRBS move spans twice the amplitude
		if p.Signal == SignalSteps {
			span = 1
		}
		room := math.Inf(1) // how far the range lets the variable go both ways
		if c.Min != nil {
			room = math.Min(room, base-*c.Min)
		}
		if c.Max != nil {
			room = math.Min(room, *c.Max-base)
		}
		if room <= 0 {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "base."+v, "%s = %g is at the edge of its range: no room for a test", v, base)
		}
		a, given := o.Amplitude[v]
		if !given {
			a = math.Min(limit/span, room)
			p.Notes = append(p.Notes, fmt.Sprintf("%s: amplitude %g (maxDeltaPerAction %g%s, range room %g)", v, a, limit, map[bool]string{true: "/2 for PRBS", false: ""}[span == 2], room))
		}
		switch {
		case math.IsNaN(a) || !(a > 0):
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "amplitude."+v, "the amplitude must be positive")
		case a*span > limit*(1+1e-12):
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "amplitude."+v, "amplitude %g moves %s by %g per action, more than maxDeltaPerAction %g", a, v, a*span, limit)
		case a > room:
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "amplitude."+v, "amplitude %g takes %s outside its range (room %g around %g)", a, v, room, base)
		}
		p.Base[v], p.Amplitude[v] = base, a
	}
	if len(vars) == 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "variables", "no control to excite")
	}
	p.Variables = vars
	switches := o.Switches
	if switches == 0 {
		switches = DefaultSwitches
	}
	if switches < 2 || switches > MaxMoves {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "switches", "switches must be 2…%d", MaxMoves)
	}
	seed := o.Seed
	if seed == 0 {
		seed = 1
	}
	// Per variable its events: at hold index idx, move to level x.
	type event struct {
		idx int
		x   float64
	}
	events := map[string][]event{}
	rng := rand.New(rand.NewPCG(seed, 0x5a5a))
	for _, v := range vars {
		b, a := p.Base[v], p.Amplitude[v]
		if p.Signal == SignalSteps {
			events[v] = []event{{0, b + a}, {1, b}, {2, b - a}, {3, b}}
			continue
		}
		// GBN: start on a random side, then switch sides after 1, 2 or 3
		// holds (each hold switches with probability ½, at the latest
		// after three): `switches` moves, the last followed by a return to
		// the base (one amplitude, within the policy).
		cur := 1.0
		if rng.IntN(2) == 0 {
			cur = -1
		}
		idx := 0
		ev := []event{{idx, b + cur*a}}
		for len(ev) < switches {
			k := 1
			for k < 3 && rng.IntN(2) == 0 {
				k++
			}
			idx += k
			cur = -cur
			ev = append(ev, event{idx, b + cur*a})
		}
		ev = append(ev, event{idx + 1, b})
		events[v] = ev
	}
	if p.OneAtATime {
		off := 0 // each variable's test starts after the previous one's
		for _, v := range vars {
			ev := events[v]
			for i := range ev {
				ev[i].idx += off
			}
			off = ev[len(ev)-1].idx + 1
		}
	}
	byIdx := map[int]map[string]float64{}
	for _, v := range vars {
		for _, e := range events[v] {
			if byIdx[e.idx] == nil {
				byIdx[e.idx] = map[string]float64{}
			}
			byIdx[e.idx][v] = e.x
		}
	}
	idxs := make([]int, 0, len(byIdx))
	for i := range byIdx {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	for _, i := range idxs {
		p.Moves = append(p.Moves, Move{AtSec: float64(i) * p.HoldSec, Set: byIdx[i]})
	}
	if len(p.Moves) > MaxMoves {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "switches", "the plan has %d moves, at most %d", len(p.Moves), MaxMoves)
	}
	p.DurationSec = p.Moves[len(p.Moves)-1].AtSec + p.HoldSec
	p.Actions = len(p.Moves)
	if wp.MaxActionsPerRun > 0 && p.Actions > wp.MaxActionsPerRun {
		p.Problems = append(p.Problems, fmt.Sprintf("the plan needs %d write actions; the scene's write policy allows %d per run (maxActionsPerRun): run it over %d runs, shorten it (switches, fewer variables) or raise the limit in a new scene version",
			p.Actions, wp.MaxActionsPerRun, (p.Actions+wp.MaxActionsPerRun-1)/wp.MaxActionsPerRun))
	}
	if err := p.check(s); err != nil {
		return nil, err
	}
	return p, nil
}

// check verifies the invariants every plan keeps (property-tested): each
// move changes each variable it sets by at most maxDeltaPerAction from
// its previous value, within the control's range, and moves are HoldSec
// apart (≥ the write policy's intervals).
func (p *Plan) check(s *contract.SceneContract) error {
	cur := map[string]float64{}
	for v, b := range p.Base {
		cur[v] = b
	}
	var bad []string
	for i, m := range p.Moves {
		if i > 0 && m.AtSec-p.Moves[i-1].AtSec < p.HoldSec-1e-9 {
			bad = append(bad, fmt.Sprintf("move %d is %gs after the previous", i, m.AtSec-p.Moves[i-1].AtSec))
		}
		for v, x := range m.Set {
			c := s.Control(v)
			if d := math.Abs(x - cur[v]); d > s.WritePolicy.MaxDeltaPerAction[v]*(1+1e-12) {
				bad = append(bad, fmt.Sprintf("move %d changes %s by %g", i, v, d))
			}
			if c == nil || (c.Min != nil && x < *c.Min) || (c.Max != nil && x > *c.Max) {
				bad = append(bad, fmt.Sprintf("move %d sets %s to %g outside its range", i, v, x))
			}
			cur[v] = x
		}
	}
	if len(bad) > 0 {
		return core.Errorf(core.CodeInternal, "step test plan breaks its invariants: %s", strings.Join(bad, "; "))
	}
	return nil
}
