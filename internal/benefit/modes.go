package benefit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/recal"
)

// studyStartMs is the study's first sample (2026-11-01 00:00 UTC): a
// fixed instant, so a study does not depend on when it runs.
const studyStartMs = 1_793_491_200_000

// loop is one mode's run over the line.
type loop struct {
	o        Options
	name     string
	tw       *engine.Twin
	scene    *contract.SceneContract
	obj      *contract.ObjectiveProfile
	testRMSE float64
	line     *sim.ClosedLine
	res      *ModeResult
	u        sim.Controls

	// base is the mode's first sample (ms): every mode runs on its own
	// span of the study's clock, whole days apart (see modeBaseMs)
	base    int64
	nodes   []string
	colOf   []int // twin window column → ClosedNodes index
	hist    [][]float64
	gov     *governor
	pending *pendingCert
	// write history (global steps): the line's last write
	lastLine       int
	runActions     int
	lastDrift      float64
	haveDrift      bool
	lastRecalStep  int
	recalCooldown  int
	violationCheck []hardRange
}

// modeBaseMs is the first sample of mode i (0: fixed, 1: per_move, …):
// studyStartMs plus i times the study's span rounded up to whole days and
// one day more. The governed modes share the study's store, whose write
// history is kept on the clock (an entry dated after a write would be a
// clock fault), so each mode runs on its own span; whole days keep the
// line's daily ambient cycle, and so its disturbances, the same in every
// mode.
func modeBaseMs(o Options, i int) int64 {
	const day = 86_400_000
	span := int64(o.Runs) * int64(o.RunSteps) * 1000
	return studyStartMs + int64(i)*((span+day-1)/day+1)*day
}

// at is global step g of the mode on the study's clock.
func (l *loop) at(g int) time.Time { return time.UnixMilli(l.base + int64(g)*1000).UTC() }

// runID is the id of the mode's study run r: the governed modes' actions
// count against it (maxActionsPerRun); the envelope mode stores its runs
// under it.
func (l *loop) runID(r int) string {
	if l.name == ModeEnvelope {
		return sim.RunID(sim.DefaultRecipeID, l.o.HistoryRuns+r)
	}
	return fmt.Sprintf("benefit-%s-run-%03d", l.name, r)
}

func controlsMap(u sim.Controls) map[string]float64 {
	return map[string]float64{sim.NodeHoldPressure: u.HoldPressure, sim.NodeHoldTime: u.HoldTime, sim.NodeMeltTemperatureSetpoint: u.MeltTemperatureSetpoint}
}

func controlsOf(m map[string]float64, base sim.Controls) sim.Controls {
	if v, ok := m[sim.NodeHoldPressure]; ok {
		base.HoldPressure = v
	}
	if v, ok := m[sim.NodeHoldTime]; ok {
		base.HoldTime = v
	}
	if v, ok := m[sim.NodeMeltTemperatureSetpoint]; ok {
		base.MeltTemperatureSetpoint = v
	}
	return base
}

func runMode(ctx context.Context, o Options, idx int, name string, tw *engine.Twin, scene *contract.SceneContract, obj *contract.ObjectiveProfile, testRMSE float64, gov *governor) (*ModeResult, error) {
	l := &loop{o: o, name: name, base: modeBaseMs(o, idx), tw: tw, scene: scene, obj: obj, testRMSE: testRMSE, res: &ModeResult{Name: name}, u: nominal(), gov: gov,
		lastLine: math.MinInt32, lastRecalStep: math.MinInt32, violationCheck: sceneRanges(scene)}
	l.recalCooldown = recal.DefaultPolicy().CooldownSec // steps of 1 s
	l.line = sim.NewClosedLine(sim.ClosedLoopConfig{Seed: o.Seed, RunSteps: o.RunSteps, AgeRuns: o.HistoryRuns, Wear: o.Wear,
		MaterialLots: o.MaterialLots, StartMs: l.base})
	_, _, l.nodes = tw.Window()
	closed := map[string]int{}
	for j, n := range sim.ClosedNodes() {
		closed[n] = j
	}
	for _, n := range l.nodes {
		j, ok := closed[n]
		if !ok {
			return nil, fmt.Errorf("the twin's window needs node %s, which the line does not have", n)
		}
		l.colOf = append(l.colOf, j)
	}
	if (name == ModeEnvelope || name == ModePerMove) && gov == nil {
		return nil, fmt.Errorf("the %s mode needs the governed write path", name)
	}
	if gov != nil {
		switch name {
		case ModePerMove:
			if err := gov.setPolicy(ctx, contract.PolicyHITLGoverned); err != nil {
				return nil, err
			}
		case ModeEnvelope:
			if err := gov.setPolicy(ctx, contract.PolicyBoundedAuto); err != nil {
				return nil, err
			}
		}
	}
	var rc *recalibrator
	if name == ModeEnvelope && o.Retrains > 0 {
		rc = newRecalibrator(o, gov.scene, gov.objID, gov.modelID)
	}
	weightCol := closed[sim.NodePartWeight]
	H, _, _ := tw.Window()
	inSpec, samples := 0, 0
	sumAbs := 0.0
	for r := 0; r < o.Runs; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l.line.StartRun(r, l.u)
		l.hist, l.runActions = l.hist[:0], 0
		sum := 0.0
		for k := 0; k < o.RunSteps; k++ {
			g := r*o.RunSteps + k
			// a pending certificate is approved after the approval delay
			// and executed once the run has a full snapshot window
			if l.pending != nil && g >= l.pending.at && len(l.hist) >= H {
				p := l.pending
				l.pending = nil
				if err := l.gov.execute(ctx, l, g, p); err != nil {
					return nil, err
				}
			}
			if name != ModeFixed && k >= H && (k-H)%o.CycleSteps == 0 {
				if err := l.decide(ctx, g); err != nil {
					return nil, err
				}
			}
			s := l.line.Step(l.u)
			if rc != nil {
				rc.record(l, s)
			}
			row := make([]float64, len(l.colOf))
			for i, j := range l.colOf {
				row[i] = s.Measured[j]
			}
			l.hist = append(l.hist, row)
			if len(l.hist) > H {
				l.hist = l.hist[1:]
			}
			w := s.Measured[weightCol]
			sum += w
			samples++
			if w >= l.o.SpecHalfWidth*-1+l.obj.Targets["weight"] && w <= l.obj.Targets["weight"]+l.o.SpecHalfWidth {
				inSpec++
			}
			for _, h := range l.violationCheck {
				if v := s.Truth[h.col]; v < h.lo || v > h.hi {
					l.res.Violations++
					break
				}
			}
		}
		mean := sum / float64(o.RunSteps)
		l.res.RunMeans = append(l.res.RunMeans, mean)
		sumAbs += math.Abs(mean - l.obj.Targets["weight"])
		// the recalibration scheduler's disturbance trigger on the twin's
		// drift estimate at the run's end, with the policy's cooldown
		// (envelope: the run is stored first, and the trigger
		// recalibrates through the scheduler)
		if rc != nil {
			if err := rc.endRun(ctx, l, r); err != nil {
				return nil, err
			}
		}
		g := (r + 1) * o.RunSteps
		if l.haveDrift && finite(l.testRMSE) && math.Abs(l.lastDrift) > recal.DisturbanceScoreMax*l.testRMSE && g-l.lastRecalStep >= l.recalCooldown {
			l.res.RecalibrationTriggers++
			l.lastRecalStep = g
			if rc != nil {
				if err := rc.trigger(ctx, l, r, l.lastDrift); err != nil {
					return nil, err
				}
			}
		}
	}
	if rc != nil {
		if err := rc.finish(ctx, l); err != nil {
			return nil, err
		}
		l.res.RecalibrationDetails = rc.out
		for _, d := range rc.out {
			if d.NewModelID != "" {
				l.res.Recalibrations++
			}
		}
	}
	l.res.MeanAbsError = sumAbs / float64(o.Runs)
	l.res.InSpecFraction = float64(inSpec) / float64(samples)
	return l.res, nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// decide runs the mode's controller at global step g.
func (l *loop) decide(ctx context.Context, g int) error {
	switch l.name {
	case ModeOracle:
		l.oracle()
		return nil
	case ModePerMove:
		if l.pending != nil || l.runActions >= l.scene.WritePolicy.MaxActionsPerRun {
			return nil
		}
	case ModeEnvelope:
		// the supervisor does not ask the guard for an action the run's
		// maxActionsPerRun no longer allows (the denial would stop the
		// envelope); the twin still estimates the drift
		if l.runActions >= l.scene.WritePolicy.MaxActionsPerRun {
			_, _, _, err := l.recommend(ctx, g)
			return err
		}
	}
	to, snap, trial, err := l.recommend(ctx, g)
	if err != nil || to == nil {
		return err
	}
	switch l.name {
	case ModePerMove:
		// a recommendation certificate requested by the engineer; another
		// person approves it after the approval delay (execute)
		p, err := l.gov.issue(ctx, l, g, snap, trial)
		if err != nil || p == nil {
			return err
		}
		l.pending = p
	case ModeEnvelope:
		written, err := l.gov.cycle(ctx, l, l.at(g), snap, trial)
		if err != nil {
			return err
		}
		if written {
			l.lastLine = g
			l.runActions++
			l.res.Writes++
		}
	}
	return nil
}

// oracle sets the hold pressure at which the true plant settles at the
// target (bisection; the weight rises with the pressure over the range),
// within the scene's range and below the flash limit.
func (l *loop) oracle() {
	target := l.obj.Targets["weight"]
	lo, hi := 50.0, 86.0 // flash_rate = (p − 78)·0.12 ≤ 1 below 86.3 bar
	u := l.u
	for range 30 {
		u.HoldPressure = (lo + hi) / 2
		if l.line.SteadyWeight(u) < target {
			lo = u.HoldPressure
		} else {
			hi = u.HoldPressure
		}
	}
	u.HoldPressure = (lo + hi) / 2
	if u != l.u {
		l.u = u
		l.res.Writes++
	}
}

// recommend takes a snapshot of the window and asks the twin for the best
// passing move; nil when it recommends holding. It returns the sealed
// snapshot and the best trial with it.
func (l *loop) recommend(ctx context.Context, g int) (map[string]float64, *contract.TwinSnapshot, *contract.VirtualTrial, error) {
	snap, err := l.snapshot(ctx, g, "")
	if err != nil {
		return nil, nil, nil, err
	}
	now := snap.CapturedAt
	sc := l.scene
	res, err := l.tw.Optimize(ctx, engine.OptimizeInput{Scene: sc, Snapshot: snap, Objective: l.obj, Mode: "safe_small_step",
		TrialID: snap.SnapshotID, CreatedBy: Engineer, Now: now})
	if err != nil {
		return nil, nil, nil, err
	}
	if res.BestDetail != nil {
		for _, d := range res.BestDetail.Disturbances {
			l.lastDrift, l.haveDrift = d.Estimate, true
			l.res.MaxDrift = math.Max(l.res.MaxDrift, math.Abs(d.Estimate))
		}
	}
	if res.Best == nil || len(res.Ranked) == 0 || !res.Ranked[0].Passed || len(res.Ranked[0].Setpoints) == 0 {
		return nil, nil, nil, nil
	}
	to := res.Ranked[0].Setpoints[0]
	cur := controlsMap(l.u)
	moved := false
	for id, v := range to {
		moved = moved || v != cur[id]
	}
	if !moved {
		return nil, nil, nil, nil
	}
	return to, snap, res.Best, nil
}

// snapshot is the sealed snapshot of the line at global step g: the
// twin's window of the run's last H steps (g must be at least H steps
// into the run), the current controls, the twin's state estimate, the
// run's id. suffix ends its id.
func (l *loop) snapshot(ctx context.Context, g int, suffix string) (*contract.TwinSnapshot, error) {
	H, beat, _ := l.tw.Window()
	if len(l.hist) < H {
		return nil, fmt.Errorf("snapshot at step %d: %d of the window's %d steps", g, len(l.hist), H)
	}
	now := l.at(g)
	tMs := now.UnixMilli()
	w := &contract.SnapshotWindow{BeatMs: beat, EndMs: tMs - 1000, Steps: H, RunID: l.runID(g / l.o.RunSteps), Values: map[string][]*float64{}}
	for i, n := range l.nodes {
		vs := make([]*float64, H)
		for k := 0; k < H; k++ {
			v := l.hist[k][i]
			vs[k] = &v
		}
		w.Values[n] = vs
	}
	sc := l.scene
	snap := &contract.TwinSnapshot{SchemaVersion: contract.TwinSnapshotSchemaVersion, CreatedAt: now, CreatedBy: Engineer,
		SnapshotID: fmt.Sprintf("benefit-%s-%d%s", l.name, g, suffix), SceneID: sc.SceneID, SceneVersion: sc.SceneVersion, LineID: sc.LineID,
		Phase: "holding", CapturedAt: now, DAQWatermark: w.EndMs, ControlValues: controlsMap(l.u),
		DataQuality: contract.DataQuality{Fresh: true, Completeness: 1}, Window: w}
	est, ver, err := l.tw.EstimateState(ctx, w)
	if err != nil {
		return nil, err
	}
	snap.StateEstimate, snap.EstimatorVersion = est, ver
	if err := snap.Seal(); err != nil {
		return nil, err
	}
	return snap, nil
}
