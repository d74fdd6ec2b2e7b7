package snapshot_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/snapshot"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func fp(x float64) *float64 { return &x }

// wantCode fails t unless err has code and mentions every fragment.
func wantCode(t *testing.T, err error, code string, frags ...string) {
	t.Helper()
	_ = codeErr(t, err, code, frags...)
}

// codeErr is wantCode returning the error (nil if it is not a *core.Error)
// for further checks.
func codeErr(t *testing.T, err error, code string, frags ...string) *core.Error {
	t.Helper()
	if core.CodeOf(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	for _, f := range frags {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not mention %q", err, f)
		}
	}
	e, _ := err.(*core.Error)
	return e
}

// --- the simulated injection line -------------------------------------

func simStore(t *testing.T) (*sqlite.Store, *sim.Output) {
	t.Helper()
	s := openStore(t)
	cfg := sim.DefaultInjectionConfig()
	cfg.Runs, cfg.Seed, cfg.RunDuration = 2, 3, 6*time.Minute
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(context.Background(), s, nil); err != nil {
		t.Fatal(err)
	}
	return s, out
}

func TestTakeSimulatedInjectionLine(t *testing.T) {
	s, out := simStore(t)
	ctx := context.Background()
	last := out.Runs[len(out.Runs)-1]
	now := time.UnixMilli(*last.Run.EndedMs + 5000).UTC()
	scene := contract.DefaultInjectionScene()
	opts := snapshot.Options{Now: now, Clock: func() time.Time { return now.Add(time.Second) }}

	// The scene's target "weight" is node part_weight: without a binding
	// the snapshot is refused, naming the variable.
	_, _, err := snapshot.Take(ctx, s, scene, opts)
	e := codeErr(t, err, snapshot.CodeBindingMismatch, "weight")
	if e.Kind() != core.KindUnprocessable || e.Field != "variables.weight" {
		t.Fatalf("error %+v", e)
	}

	opts.Bindings = map[string]string{"weight": sim.NodePartWeight}
	snap, rep, err := snapshot.Take(ctx, s, scene, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RunID != last.Run.ID || snap.Window.RunID != last.Run.ID {
		t.Fatalf("run %q, want the newest %q", rep.RunID, last.Run.ID)
	}
	if err := snap.CheckAgainst(scene); err != nil {
		t.Fatal(err)
	}
	if h, _ := snap.Hash(); h != snap.SnapshotHash || snap.BindingSnapshotHash == "" || rep.Binding == nil || rep.Binding.SnapshotHash != snap.BindingSnapshotHash {
		t.Fatalf("hashes: %s %s %+v", snap.SnapshotHash, snap.BindingSnapshotHash, rep.Binding)
	}
	if snap.EstimatorVersion != "last-valid/v1+no-model" || snap.Phase != "startup" || rep.PhaseSource != "default" {
		t.Fatalf("version %q phase %q", snap.EstimatorVersion, snap.Phase)
	}
	if _, ok := snap.StateEstimate["fill_fraction"]; ok {
		t.Fatal("unmeasured state estimated without a model")
	}
	// Controls are the last logged setpoints of the run.
	lastVal := map[string]core.Sample{}
	for _, sm := range last.Samples {
		lastVal[sm.Node] = sm
	}
	for _, c := range scene.Controls {
		if got, want := snap.ControlValues[c.ID], lastVal[c.ID].Value; got != want {
			t.Errorf("control %s = %v, want %v", c.ID, got, want)
		}
	}
	for _, id := range []string{"melt_temperature", "cavity_pressure"} {
		if _, ok := snap.StateEstimate[id]; !ok {
			t.Errorf("measured state %s missing", id)
		}
	}
	// 5 s after the run: every bound variable is fresh (the sim leaves
	// gaps and dropouts, but not 60 s at the end of this run).
	if rep.Bound != 10 || rep.Fresh != rep.Bound || !snap.DataQuality.Fresh || rep.FutureSamples != 0 {
		t.Fatalf("bound %d fresh %d future %d: %+v", rep.Bound, rep.Fresh, rep.FutureSamples, rep.Variables)
	}
	if snap.DAQWatermark != lastVal["hold_pressure"].TsUs/1000 {
		t.Fatalf("watermark %d, want the run's last sample %d µs", snap.DAQWatermark, lastVal["hold_pressure"].TsUs)
	}
	// Window: 30 rows ending at the watermark's second, one per bound node,
	// each value the sample at that instant (1 s sampling, 1 s beat).
	w := snap.Window
	if w.Steps != 30 || w.BeatMs != 1000 || w.EndMs != snap.DAQWatermark/1000*1000 || len(w.Values) != 10 {
		t.Fatalf("window %d×%d end %d nodes %d", w.Steps, w.BeatMs, w.EndMs, len(w.Values))
	}
	at := map[int64]float64{}
	for _, sm := range last.Samples {
		if sm.Node == "hold_pressure" {
			at[sm.TsUs/1000] = sm.Value
		}
	}
	for k, v := range w.Values["hold_pressure"] {
		ts := w.EndMs - int64(w.Steps-1-k)*w.BeatMs
		if want, ok := at[ts]; !ok || v == nil || *v != want {
			t.Fatalf("hold_pressure row %d (ts %d) = %v, want %v", k, ts, v, want)
		}
	}
	// The material batch factor's node unit "ratio" is the scene's "1".
	if !strings.Contains(strings.Join(rep.Notes, "\n"), `"ratio"`) {
		t.Fatalf("notes %v", rep.Notes)
	}
	// Stored and read back verified.
	if err := s.PutSnapshot(ctx, snap, false); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSnapshot(ctx, snap.SnapshotID)
	if err != nil || got.SnapshotHash != snap.SnapshotHash {
		t.Fatalf("read back: %v", err)
	}

	// Three minutes later everything is stale: non-strict records it, strict refuses.
	later := snapshot.Options{Now: now.Add(3 * time.Minute), Bindings: opts.Bindings}
	snap2, rep2, err := snapshot.Take(ctx, s, scene, later)
	if err != nil {
		t.Fatal(err)
	}
	if snap2.DataQuality.Fresh || len(snap2.DataQuality.StaleNodeIDs) != 10 || rep2.Fresh != 0 || snap2.DataQuality.Completeness != 0 {
		t.Fatalf("quality %+v", snap2.DataQuality)
	}
	later.Strict = true
	_, _, err = snapshot.Take(ctx, s, scene, later)
	e = codeErr(t, err, snapshot.CodeSnapshotQuality, "stale", "node hold_pressure")
	if len(e.Problems) != 10 {
		t.Fatalf("%d problems, want one per bound variable: %v", len(e.Problems), e)
	}
}

// --- crafted series ---------------------------------------------------

const (
	line = "L1"
	run  = "R1"
	t0   = int64(1_800_000_000_000) // a whole second
)

// craftedScene: control u, measured state x, unmeasured state h,
// disturbance d, target y.
func craftedScene() *contract.SceneContract {
	return &contract.SceneContract{
		SchemaVersion: 1, CreatedAt: time.UnixMilli(t0).UTC(), CreatedBy: "alice",
		SceneID: "crafted", SceneVersion: "1.0.0", LineID: line,
		Phases:           []string{"run", "unknown"},
		Controls:         []contract.SceneVariable{{ID: "u", Role: contract.RoleControl, PhysicalMeaning: "setpoint", Unit: "bar", Min: fp(0), Max: fp(10), MaxStep: fp(1)}},
		States:           []contract.SceneVariable{{ID: "x", Role: contract.RoleState, PhysicalMeaning: "state", Unit: "bar"}, {ID: "h", Role: contract.RoleState, PhysicalMeaning: "hidden", Unit: "1"}},
		Disturbances:     []contract.SceneVariable{{ID: "d", Role: contract.RoleDisturbance, PhysicalMeaning: "ambient", Unit: "degC"}},
		Observations:     []contract.SceneVariable{{ID: "y", NodeID: "y_node", Role: contract.RoleTarget, PhysicalMeaning: "quality", Unit: "g"}},
		PhysicsProfileID: "p",
		WritePolicy:      contract.WritePolicy{MinNodeIntervalSec: 60, MinLineActionIntervalSec: 60, MaxActionsPerRun: 1, MaxDeltaPerAction: map[string]float64{"u": 1}},
		Status:           contract.SceneDraft,
	}
}

// series is one node's samples: value per second offset from t0 (NaN:
// no sample), with optional states.
type series struct {
	node   string
	kind   string
	unit   string
	lo, hi float64
	vals   map[int64]float64
	states map[int64]string
}

func flat(n int, v float64) map[int64]float64 {
	m := map[int64]float64{}
	for i := 0; i < n; i++ {
		// a little noise so the Hampel scale is not degenerate
		m[int64(i)] = v + 0.01*float64(i%3)
	}
	return m
}

func craftedStore(t *testing.T, ss []series) *sqlite.Store {
	t.Helper()
	s := openStore(t)
	ctx := context.Background()
	err := s.Ingest(ctx, func(tx core.IngestTx) error {
		_, err := tx.EnsureRun(core.Run{ID: run, LineID: line, ProductID: "P", RecipeID: "Rc", StartedMs: t0, Status: core.RunActive})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ss {
		if err := s.UpsertNode(ctx, core.Node{ID: x.node, LineID: line, Unit: x.unit, Min: fp(x.lo), Max: fp(x.hi), Kind: x.kind}); err != nil {
			t.Fatal(err)
		}
		var sm []core.Sample
		for off, v := range x.vals {
			sm = append(sm, core.Sample{Node: x.node, TsUs: (t0 + off*1000) * 1000, Value: v, State: x.states[off], Line: line, Product: "P", Recipe: "Rc", Run: run})
		}
		if _, err := s.WriteSamples(ctx, sm); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// base: 120 s of data for every node, now = t0 + 120 s.
func base() []series {
	return []series{
		{node: "u", kind: core.NodeDCW, unit: "bar", lo: 0, hi: 10, vals: flat(120, 5)},
		{node: "x", kind: core.NodeDAQ, unit: "bar", lo: 0, hi: 100, vals: flat(120, 50)},
		{node: "d", kind: core.NodeDAQ, unit: "degC", lo: -20, hi: 60, vals: flat(120, 20)},
		{node: "y_node", kind: core.NodeDAQ, unit: "g", lo: 0, hi: 100, vals: flat(120, 30)},
	}
}

var now = time.UnixMilli(t0 + 120_000).UTC()

func take(t *testing.T, ss []series, o snapshot.Options) (*contract.TwinSnapshot, *snapshot.Report, error) {
	t.Helper()
	s := craftedStore(t, ss)
	if o.Now.IsZero() {
		o.Now = now
	}
	return snapshot.Take(context.Background(), s, craftedScene(), o)
}

func varRep(t *testing.T, r *snapshot.Report, id string) snapshot.VariableReport {
	t.Helper()
	for _, v := range r.Variables {
		if v.VariableID == id {
			return v
		}
	}
	t.Fatalf("no variable %s in the report", id)
	return snapshot.VariableReport{}
}

func TestTakeCleanSeries(t *testing.T) {
	snap, rep, err := take(t, base(), snapshot.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if snap.ControlValues["u"] != 5+0.01*float64(119%3) || snap.DataQuality.Completeness != 1 || !snap.DataQuality.Fresh {
		t.Fatalf("snapshot %+v", snap)
	}
	if snap.Phase != "unknown" || rep.RunID != run || varRep(t, rep, "y").NodeID != "y_node" || varRep(t, rep, "y").BoundBy != snapshot.BoundBySceneNodeID {
		t.Fatalf("report %+v", rep)
	}
	if v := varRep(t, rep, "h"); v.Status != snapshot.StatusUnbound {
		t.Fatalf("h: %+v", v)
	}
	if got := varRep(t, rep, "x").AgeMs; got != 1000 {
		t.Fatalf("age %d, want 1000", got)
	}
	if len(rep.Unobservable) != 2 || rep.Duplicates != 0 || rep.OutOfOrder != 0 {
		t.Fatalf("observability %+v", rep)
	}
}

func TestTakeStaleNode(t *testing.T) {
	ss := base()
	ss[2].vals = flat(40, 20) // d stops 80 s before now
	snap, rep, err := take(t, ss, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := varRep(t, rep, "d"); v.Status != snapshot.StatusStale || v.AgeMs != 81_000 {
		t.Fatalf("d %+v", v)
	}
	if snap.DataQuality.Fresh || len(snap.DataQuality.StaleNodeIDs) != 1 || snap.DataQuality.StaleNodeIDs[0] != "d" || rep.VariableCompleteness != 0.75 {
		t.Fatalf("quality %+v %v", snap.DataQuality, rep.VariableCompleteness)
	}
	if snap.Disturbances["d"] != 20+0.01*float64(39%3) {
		t.Fatalf("d = %v: the stale value is still the last valid one", snap.Disturbances["d"])
	}
	// A max age that tolerates it.
	if _, rep, err := take(t, ss, snapshot.Options{MaxAge: 2 * time.Minute}); err != nil || rep.Fresh != 4 {
		t.Fatalf("max age 2m: %v %+v", err, rep)
	}
	_, _, err = take(t, ss, snapshot.Options{Strict: true})
	e := codeErr(t, err, snapshot.CodeSnapshotQuality, "stale", "node d", "1m21s")
	if e.Field != "variables.d" || len(e.Problems) != 1 {
		t.Fatalf("%+v", e)
	}
}

func TestTakeGapGivesNullsNotValues(t *testing.T) {
	ss := base()
	for off := int64(100); off < 110; off++ {
		delete(ss[1].vals, off) // x silent for 10 s
	}
	ss[1].states = map[int64]string{115: "bad"} // and one bad sample
	snap, rep, err := take(t, ss, snapshot.Options{Strict: true})
	if err != nil {
		t.Fatal(err) // a gap inside the window is not stale data
	}
	xs := snap.Window.Values["x"]
	end := snap.Window.EndMs
	if end != t0+119_000 {
		t.Fatalf("end %d", end)
	}
	nulls := 0
	for k, v := range xs {
		off := (end-t0)/1000 - int64(len(xs)-1-k)
		gap := (off >= 100 && off < 110) || off == 115
		if gap != (v == nil) {
			t.Fatalf("row %d (t0+%ds) = %v, gap %v", k, off, v, gap)
		}
		if v == nil {
			nulls++
		} else if *v != ss[1].vals[off] {
			t.Fatalf("row %d = %v, want the sample %v", k, *v, ss[1].vals[off])
		}
	}
	if nulls != 11 || rep.WindowFilled != rep.WindowCells-11 || snap.DataQuality.Completeness != float64(rep.WindowCells-11)/float64(rep.WindowCells) {
		t.Fatalf("nulls %d filled %d/%d completeness %v", nulls, rep.WindowFilled, rep.WindowCells, snap.DataQuality.Completeness)
	}
	if varRep(t, rep, "x").Clean.State != 1 {
		t.Fatalf("clean %+v", varRep(t, rep, "x").Clean)
	}
	// The window round-trips through JSON with its nulls.
	b, _ := json.Marshal(snap.Window)
	if !strings.Contains(string(b), "null") {
		t.Fatal(string(b))
	}
}

func TestTakeFutureSample(t *testing.T) {
	ss := base()
	ss[3].vals[150] = 99 // y stamped 30 s after now
	snap, rep, err := take(t, ss, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FutureSamples != 1 || len(rep.FutureNodeIDs) != 1 || rep.FutureNodeIDs[0] != "y_node" || varRep(t, rep, "y").Future != 1 {
		t.Fatalf("future %+v", rep)
	}
	if snap.DAQWatermark != t0+119_000 {
		t.Fatalf("the future sample was used: watermark %d", snap.DAQWatermark)
	}
	_, _, err = take(t, ss, snapshot.Options{Strict: true})
	e := codeErr(t, err, snapshot.CodeSnapshotQuality, "future", "y_node")
	if e.Field != "nodes.y_node" {
		t.Fatalf("%+v", e)
	}
	// Within the tolerance it is not a future sample.
	ss = base()
	ss[3].vals[121] = 30
	if _, rep, err := take(t, ss, snapshot.Options{Strict: true}); err != nil || rep.FutureSamples != 0 {
		t.Fatalf("within tolerance: %v", err)
	}
	// In a replay, later samples have not arrived yet: ignored, not future.
	ss = base()
	snap, rep, err = take(t, ss, snapshot.Options{Strict: true, Replay: true, Now: time.UnixMilli(t0 + 60_000)})
	if err != nil || rep.FutureSamples != 0 || snap.DAQWatermark != t0+60_000 {
		t.Fatalf("replay: %v %+v", err, rep)
	}
}

func TestTakeCleaning(t *testing.T) {
	ss := base()
	ss[1].vals[119] = 999 // out of x's range [0, 100]
	snap, rep, err := take(t, ss, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if x := snap.StateEstimate["x"]; x != ss[1].vals[118] || varRep(t, rep, "x").Clean.Range != 1 {
		t.Fatalf("x = %v, want the last in-range value %v (%+v)", x, ss[1].vals[118], varRep(t, rep, "x"))
	}
	if snap.Window.Values["x"][29] != nil {
		t.Fatal("the cleaned value is in the window")
	}
	// An in-range spike as the newest sample: held back until confirmed.
	ss = base()
	ss[1].vals[119] = 80
	snap, rep, err = take(t, ss, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if x, v := snap.StateEstimate["x"], varRep(t, rep, "x"); x != ss[1].vals[118] || v.HeldBack != 1 || v.TsMs != t0+118_000 {
		t.Fatalf("x = %v %+v", x, v)
	}
	// A spike in the middle is removed by the two-sided test.
	ss = base()
	ss[1].vals[110] = 80
	snap, rep, _ = take(t, ss, snapshot.Options{})
	if varRep(t, rep, "x").Clean.Hampel != 1 || snap.Window.Values["x"][29-9] != nil {
		t.Fatalf("hampel %+v", varRep(t, rep, "x").Clean)
	}
	// A level change is accepted once confirmed.
	ss = base()
	for off := int64(112); off < 120; off++ {
		ss[1].vals[off] = 70
	}
	snap, _, _ = take(t, ss, snapshot.Options{})
	if snap.StateEstimate["x"] != 70 {
		t.Fatalf("level change: x = %v", snap.StateEstimate["x"])
	}
	// A setpoint step is taken at once (controls are not held back).
	ss = base()
	ss[0].vals[119] = 6
	snap, _, _ = take(t, ss, snapshot.Options{})
	if snap.ControlValues["u"] != 6 {
		t.Fatalf("u = %v", snap.ControlValues["u"])
	}
}

func TestTakeMissing(t *testing.T) {
	ss := base()
	ss[0].vals = map[int64]float64{} // no control value at all
	_, _, err := take(t, ss, snapshot.Options{})
	wantCode(t, err, snapshot.CodeSnapshotQuality, "controlValues.u", "missing")
	ss = base()
	ss[2].vals = map[int64]float64{-3600: 20} // d only an hour ago: beyond the lookback
	snap, rep, err := take(t, ss, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := varRep(t, rep, "d"); v.Status != snapshot.StatusMissing || v.NewestTsMs != t0-3_600_000 || snap.Disturbances != nil {
		t.Fatalf("d %+v", v)
	}
	_, _, err = take(t, ss, snapshot.Options{Strict: true})
	wantCode(t, err, snapshot.CodeSnapshotQuality, "variables.d", "missing")
}

func TestTakeBindingMismatch(t *testing.T) {
	cases := []struct {
		name  string
		mut   func(ss []series)
		frags []string
	}{
		{"unit", func(ss []series) { ss[1].unit = "psi" }, []string{"variables.x", `"psi"`}},
		{"kind", func(ss []series) { ss[0].kind = core.NodeDAQ }, []string{"variables.u", "dcw"}},
		{"range", func(ss []series) { ss[0].hi = 8 }, []string{"variables.u", "max 10"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ss := base()
			c.mut(ss)
			_, _, err := take(t, ss, snapshot.Options{})
			wantCode(t, err, snapshot.CodeBindingMismatch, c.frags...)
		})
	}
	_, _, err := take(t, base(), snapshot.Options{Bindings: map[string]string{"y": "nope"}})
	wantCode(t, err, snapshot.CodeBindingMismatch, "nope")
	_, _, err = take(t, base(), snapshot.Options{Bindings: map[string]string{"zz": "x"}})
	wantCode(t, err, core.CodeInvalidArgument, "zz")
	_, _, err = take(t, base(), snapshot.Options{RunID: "nope"})
	wantCode(t, err, core.CodeNotFound)
}

type fakeEstimator struct {
	got   *contract.SnapshotWindow
	calls int
}

func (f *fakeEstimator) Window() (int, int64, []string) { return 5, 2000, []string{"x", "u"} }

func (f *fakeEstimator) EstimateState(ctx context.Context, w *contract.SnapshotWindow) (map[string]float64, string, error) {
	f.calls++
	f.got = w
	return map[string]float64{"h": 0.25, "x": -1, "bogus": 3}, "fake/1", nil
}

func TestTakeWithEstimator(t *testing.T) {
	ss := base()
	delete(ss[1].vals, 112)
	delete(ss[1].vals, 113)
	f := &fakeEstimator{}
	snap, rep, err := take(t, ss, snapshot.Options{Estimator: f})
	if err != nil {
		t.Fatal(err)
	}
	w := f.got
	if f.calls != 1 || w != snap.Window || w.Steps != 5 || w.BeatMs != 2000 || w.EndMs != t0+118_000 || len(w.Values) != 2 {
		t.Fatalf("window given to the estimator: %+v", w)
	}
	// 2 s buckets: row k covers [end-(4-k)·2s, +2s); the bucket of 112/113
	// is empty, the others are the mean of their two samples.
	for k, v := range w.Values["x"] {
		off := (w.EndMs-t0)/1000 - int64(4-k)*2
		if off == 112 {
			if v != nil {
				t.Fatalf("gap bucket = %v", *v)
			}
			continue
		}
		want := (ss[1].vals[off] + ss[1].vals[off+1]) / 2
		if v == nil || math.Abs(*v-want) > 1e-12 {
			t.Fatalf("row %d = %v, want %v", k, v, want)
		}
	}
	if snap.StateEstimate["h"] != 0.25 || snap.StateEstimate["x"] != ss[1].vals[119] || snap.EstimatorVersion != "last-valid/v1+fake/1" {
		t.Fatalf("estimate %+v %q", snap.StateEstimate, snap.EstimatorVersion)
	}
	if v := varRep(t, rep, "h"); v.Status != snapshot.StatusEstimated || *v.Value != 0.25 {
		t.Fatalf("h %+v", v)
	}
	if n := strings.Join(rep.Notes, "\n"); !strings.Contains(n, "bogus") || !strings.Contains(n, "state x is measured") {
		t.Fatalf("notes %v", rep.Notes)
	}
}

func TestHashStableAndSealed(t *testing.T) {
	clock := func() time.Time { return now.Add(time.Second) }
	o := snapshot.Options{SnapshotID: "snap-fixed", Clock: clock}
	s := craftedStore(t, base())
	a, _, err := snapshot.Take(context.Background(), s, craftedScene(), withNow(o))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := snapshot.Take(context.Background(), s, craftedScene(), withNow(o))
	if err != nil {
		t.Fatal(err)
	}
	if a.SnapshotHash == "" || a.SnapshotHash != b.SnapshotHash {
		t.Fatalf("same data, same options: %s vs %s", a.SnapshotHash, b.SnapshotHash)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	*a.Window.Values["x"][3] += 1e-9
	if err := a.Validate(); contract.ProblemsOf(err) == nil || !strings.Contains(err.Error(), "snapshotHash") {
		t.Fatalf("a changed window value is not detected: %v", err)
	}
	// Generated ids differ.
	c, _, _ := snapshot.Take(context.Background(), s, craftedScene(), snapshot.Options{Now: now})
	d, _, _ := snapshot.Take(context.Background(), s, craftedScene(), snapshot.Options{Now: now})
	if c.SnapshotID == d.SnapshotID || !strings.HasPrefix(c.SnapshotID, "snap-") {
		t.Fatalf("ids %s %s", c.SnapshotID, d.SnapshotID)
	}
}

func withNow(o snapshot.Options) snapshot.Options { o.Now = now; return o }

func TestOptionsRefused(t *testing.T) {
	s := craftedStore(t, base())
	ctx := context.Background()
	for _, o := range []snapshot.Options{
		{Now: now, MaxAge: -time.Second},
		{Now: now, WindowSteps: -1},
		{Now: now, BeatMs: -5},
		{Replay: true},
		{Now: now, HampelThreshold: math.NaN()},
	} {
		if _, _, err := snapshot.Take(ctx, s, craftedScene(), o); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if _, _, err := snapshot.Take(ctx, s, nil, snapshot.Options{}); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Error(err)
	}
}
