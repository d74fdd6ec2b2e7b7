package demo

import (
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/sim/opcuasrv"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
)

// liveInputs is what the offline part of the demo hands to the live part.
type liveInputs struct {
	scene   *contract.SceneContract
	obj     *contract.ObjectiveProfile
	bus     *events.Bus
	last    sim.RunData // the newest simulated run
	nextRun int         // the live line's first run number
}

// liveWindow is the part weight over a stretch of the live run.
type liveWindow struct {
	FromMs int64 `json:"fromMs"`
	ToMs   int64 `json:"toMs"`
	// Samples is the number of part-weight samples averaged.
	Samples int `json:"samples"`
	// MeanWeight and TargetError = mean |weight − target| in g.
	MeanWeight  float64 `json:"meanWeight"`
	TargetError float64 `json:"targetError"`
}

// liveSummary describes the live part.
type liveSummary struct {
	Endpoint string  `json:"endpoint"`
	Speed    float64 `json:"speed"`
	RunID    string  `json:"runId"`
	Target   float64 `json:"target"`
	// Ingested is the number of samples the connector stored; Gaps the
	// lost intervals it recorded; Backfilled the values of steps the live
	// subscription lost that it read back from the server's history.
	Ingested   int64 `json:"ingested"`
	Gaps       int   `json:"gaps"`
	Backfilled int64 `json:"backfilled"`
	// LineWrites are the setpoint writes the OPC UA server accepted.
	LineWrites int `json:"lineWrites"`
}

// liveSettleSteps is how long the after-window waits for the moved
// setpoints to act (the plant's pressure lag is about 6 s, the thermal lag
// about 30 s) and liveWindowSteps how many steps each window averages.
const (
	liveSettleSteps = 45
	liveWindowSteps = 45
	liveHistory     = 60 // steps ingested before the snapshot
)

func runLive(ctx context.Context, s store.Store, ap *amlapp.App, line *lineClock, o Options, res *Result, in liveInputs, logf func(string, ...any)) error {
	if o.Speed <= 0 || o.Speed > 200 {
		return core.FieldErrorf(core.CodeUsage, "speed", "--speed must be in (0, 200], got %g", o.Speed)
	}
	// The line runs on from the newest simulated run: same setpoints, the
	// next run number, a minute later.
	initial := map[string]float64{}
	for _, smp := range in.last.Samples {
		switch smp.Node {
		case "hold_pressure", "hold_time", "melt_temperature_setpoint":
			if smp.State == core.StateOK {
				initial[smp.Node] = smp.Value
			}
		}
	}
	// The OPC UA server library logs through the standard logger; keep
	// it off the terminal unless debugging.
	if !o.DebugLogs {
		log.SetOutput(io.Discard)
		defer log.SetOutput(os.Stderr)
	}
	age := 0
	if o.WearContinues {
		age = in.nextRun
	}
	srv, err := opcuasrv.Start(ctx, opcuasrv.Options{Addr: "127.0.0.1:0", Speed: o.Speed, StartMs: *in.last.Run.EndedMs + time.Minute.Milliseconds(),
		Seed: o.Seed, FirstRun: in.nextRun, WearRuns: float64(age), Initial: initial, Logger: o.Log})
	if err != nil {
		return err
	}
	defer func() { _ = srv.Close() }() // the simulated line: nothing of it outlives the demo
	m := &opcua.Map{Line: in.scene.LineID, Product: in.scene.ProductID, Recipe: in.scene.RecipeID,
		RunTag: srv.NodeID(opcuasrv.TagRunID), CycleTag: srv.NodeID(opcuasrv.TagCycle), PublishingIntervalMs: 20}
	for _, role := range []string{sim.RoleControl, sim.RoleState, sim.RoleDisturbance, sim.RoleObservation} {
		for _, n := range sim.NodesByRole(role) {
			m.Nodes = append(m.Nodes, opcua.MapEntry{OPCUA: srv.NodeID(n), Node: n})
		}
	}
	cctx, stopConn := context.WithCancel(ctx)
	defer stopConn()
	conn, err := opcua.New(s, opcua.Options{Endpoint: srv.Endpoint(), Map: m, Audit: s, Bus: in.bus, Logger: o.Log})
	if err != nil {
		return err
	}
	// The connector reports its state like aml connect does (aml connect
	// status, aml serve's Live page while the demo runs).
	rep, err := conn.Reporter(connect.NewStatusStore(s.SQL()), 0, o.Log)
	if err != nil {
		return err
	}
	connDone := make(chan error, 1)
	go func() { connDone <- connect.RunReported(cctx, rep, conn.Run, o.Log) }()
	runID := sim.RunID(in.scene.RecipeID, in.nextRun)
	sum := &liveSummary{Endpoint: srv.Endpoint(), Speed: o.Speed, RunID: runID, Target: weightTarget(in.obj)}
	res.Live = sum
	logf("7. live: simulated line served at %s (%.0f× real time), OPC UA connector ingesting run %s …", srv.Endpoint(), o.Speed, runID)

	// History for the snapshot window.
	if _, err := waitSamples(ctx, s, runID, liveHistory, connDone); err != nil {
		return err
	}
	before, err := weightWindow(ctx, s, runID, srv.Now().UnixMilli(), liveWindowSteps, sum.Target)
	if err != nil {
		return err
	}
	res.Before = before

	// Steps 7–8 on the live line's clock, writing over OPC UA.
	line.follow = srv.Now
	var writtenAt int64
	ok, err := recommend(ctx, ap, res, recommendInput{scene: in.scene, runID: runID, seed: o.Seed, tick: func() {},
		written: func() { writtenAt = srv.Now().UnixMilli() },
		writer: func(*contract.TwinSnapshot) (guard.Writer, func(), error) {
			w, err := opcua.DialWriter(ctx, srv.Endpoint(), m, opcua.Security{})
			if err != nil {
				return nil, nil, err
			}
			// Every write is read back before it counts: closing loses
			// nothing.
			return w, func() { _ = w.Close() }, nil
		}}, logf)
	if err != nil || !ok {
		if err == nil && res.Note == "" {
			res.Note = "no passing candidate improves on holding the setpoints on the live line"
		}
		return err
	}
	res.Writer = "opcua"
	logf("   certificate %s approved by %s, written over OPC UA by %s: %d setpoints (%s)", res.CertificateID, Approver.Name, Operator.Name, res.Written, res.WriteOutcome)

	// The line after the move: wait for the lag, then average a window.
	need := int(float64(liveSettleSteps+liveWindowSteps)) + 1
	if err := waitLineTime(ctx, srv, writtenAt+int64(need)*1000, connDone); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond) // the connector's last flush
	after, err := weightWindow(ctx, s, runID, writtenAt+int64(need)*1000, liveWindowSteps, sum.Target)
	if err != nil {
		return err
	}
	res.After = after
	stopConn()
	if err := <-connDone; err != nil {
		return err
	}
	st := conn.Stats()
	sum.Ingested, sum.Gaps, sum.Backfilled, sum.LineWrites = st.Stored, len(st.Gaps), st.Backfilled, srv.Stats().Writes
	logf("   part weight %.3f g → %.3f g (target %.1f g): mean distance to target %.3f g before, %.3f g after the move (%d samples ingested over OPC UA, %d of them read back from the server's history; %d gaps)",
		before.MeanWeight, after.MeanWeight, sum.Target, before.TargetError, after.TargetError, sum.Ingested, sum.Backfilled, sum.Gaps)
	return nil
}

// waitSamples waits until run runID has n part-weight samples stored.
func waitSamples(ctx context.Context, s store.Store, runID string, n int64, connDone <-chan error) (int64, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := s.CountRunSamples(ctx, runID)
		if err != nil {
			return 0, err
		}
		if c["part_weight"] >= n {
			return c["part_weight"], nil
		}
		select {
		case err := <-connDone:
			return 0, fmt.Errorf("the OPC UA connector stopped: %v", err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, core.Errorf(core.CodeInternal, "live line: run %s has %d part-weight samples after 2 minutes, want %d", runID, c["part_weight"], n)
		}
	}
}

// waitLineTime waits until the line's clock reaches ms.
func waitLineTime(ctx context.Context, srv *opcuasrv.Server, ms int64, connDone <-chan error) error {
	for srv.Now().UnixMilli() < ms {
		select {
		case err := <-connDone:
			return fmt.Errorf("the OPC UA connector stopped: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// weightWindow averages the stored part weight of run runID over the
// steps samples ending at toMs.
func weightWindow(ctx context.Context, s store.Store, runID string, toMs int64, steps int, target float64) (*liveWindow, error) {
	from := toMs - int64(steps)*1000
	p, err := s.QueryPage(ctx, core.PageQuery{Node: "part_weight", Filter: core.ContextFilter{Run: runID}, FromMs: &from, ToMs: &toMs, Limit: 10 * steps})
	if err != nil {
		return nil, err
	}
	w := &liveWindow{FromMs: from, ToMs: toMs}
	sum, dist := 0.0, 0.0
	for _, smp := range p.Points {
		if smp.State != core.StateOK || math.IsNaN(smp.Value) {
			continue
		}
		sum += smp.Value
		dist += math.Abs(smp.Value - target)
		w.Samples++
	}
	if w.Samples == 0 {
		return nil, core.Errorf(core.CodeInternal, "live line: no part-weight samples of run %s between %d and %d", runID, from, toMs)
	}
	w.MeanWeight, w.TargetError = sum/float64(w.Samples), dist/float64(w.Samples)
	return w, nil
}

// weightTarget is the objective's part-weight target: "weight" on the
// hybrid's scene, "part_weight" on ColumnScene.
func weightTarget(obj *contract.ObjectiveProfile) float64 {
	if v, ok := obj.Targets["weight"]; ok {
		return v
	}
	return obj.Targets["part_weight"]
}
