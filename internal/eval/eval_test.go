package eval

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
)

// dynBundle is an in-memory dynamic bundle with zero arrays of the right
// sizes; windows are train | val | test.
func dynBundle(t *testing.T, H, F int, all, ctrl, tgt []string, train, val, test int) *dataset.Bundle {
	t.Helper()
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindDynamic, Purpose: dataset.PurposeMPCSurrogate,
		AllNodes: all, Controls: ctrl, Targets: tgt, HistorySteps: H, HorizonSteps: F, Stride: 1, BeatMs: 1000,
		Split: dataset.ManifestSplit{
			Train: dataset.SplitPart{RunIDs: []string{"r1"}, Offset: 0, Count: train},
			Val:   dataset.SplitPart{RunIDs: []string{"r2"}, Offset: train, Count: val},
			Test:  dataset.SplitPart{RunIDs: []string{"r3"}, Offset: train + val, Count: test}}}
	d := m.Dims()
	b := &dataset.Bundle{Manifest: m,
		X: make([]float32, d.N*d.XLen()), U: make([]float32, d.N*d.ULen()), Y: make([]float32, d.N*d.YLen()),
		TS: make([]float64, d.N*(H+F)), Mask: make([]float32, d.N*(H+F))}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	return b
}

// constPred predicts c[k] for target k at every step.
type constPred struct {
	c []float32
	F int
}

func (p constPred) Format() string { return "test.const" }
func (p constPred) Horizon() int   { return p.F }
func (p constPred) PredictBatch(_ context.Context, _, _ []float32, n int) ([]float32, error) {
	out := make([]float32, 0, n*p.F*len(p.c))
	for i := 0; i < n*p.F; i++ {
		out = append(out, p.c...)
	}
	return out, nil
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-12*max(1, math.Abs(want)) {
		t.Fatalf("%s = %.15g, want %.15g", what, got, want)
	}
}

// setY sets window w's y[f,k] values (F·nTgt values).
func setY(b *dataset.Bundle, w int, vals ...float32) {
	yl := b.Dims().YLen()
	copy(b.Y[w*yl:(w+1)*yl], vals)
}

func TestEvaluateHandComputed(t *testing.T) {
	// H=1, F=2, two targets; 1 train, 2 val, 2 test windows.
	b := dynBundle(t, 1, 2, []string{"a", "p", "q"}, nil, []string{"p", "q"}, 1, 2, 2)
	// Layout per window: [f0: p q][f1: p q].
	setY(b, 0, 9, 9, 9, 9)
	// val: p = [2,2],[4,4]; q = [0,2],[2,0]
	setY(b, 1, 2, 0, 2, 2)
	setY(b, 2, 4, 2, 4, 0)
	// test: p = [1,3],[5,7]; q = [0,2],[4,2]
	setY(b, 3, 1, 0, 3, 2)
	setY(b, 4, 5, 4, 7, 2)
	m, err := Evaluate(context.Background(), b, constPred{c: []float32{3, 1}, F: 2})
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != "test.const" || m.Val.Windows != 2 || m.Test.Windows != 2 || m.TrainRuns != 1 {
		t.Fatalf("%+v", m)
	}
	// Val, p: errors 1, 1, −1, −1 → RMSE 1, one-step 1, mean 3, std 1.
	vp, vq := m.Val.Targets[0], m.Val.Targets[1]
	near(t, "val p RMSE", vp.RMSE, 1)
	near(t, "val p NRMSE", vp.NRMSE, 1)
	near(t, "val p one-step", vp.OneStepRMSE, 1)
	near(t, "val p R2", vp.R2, 0)
	// Val, q: errors ±1 → RMSE 1; mean 1, std 1.
	near(t, "val q NRMSE", vq.NRMSE, 1)
	near(t, "val mean NRMSE", m.Val.MeanNRMSE, 1)
	// Test, p: pred 3 vs 1,3,5,7 → e = 2,0,−2,−4: SSE 24, N 4 → RMSE √6;
	// step 0: e = 2, −2 → √4 = 2; mean 4, SST 20 → std √5; MAE 2; R2 −0.2.
	tp, tq := m.Test.Targets[0], m.Test.Targets[1]
	if tp.Target != "p" || tq.Target != "q" || tp.N != 4 {
		t.Fatalf("targets %+v", m.Test.Targets)
	}
	near(t, "test p RMSE", tp.RMSE, math.Sqrt(6))
	near(t, "test p one-step RMSE", tp.OneStepRMSE, 2)
	near(t, "test p NRMSE", tp.NRMSE, math.Sqrt(6)/math.Sqrt(5))
	near(t, "test p one-step NRMSE", tp.OneStepNRMSE, 2/math.Sqrt(5))
	near(t, "test p MAE", tp.MAE, 2)
	near(t, "test p R2", tp.R2, -0.2)
	// Test, q: pred 1 vs 0,2,4,2 → e = 1,−1,−3,−1: SSE 12 → RMSE √3;
	// step 0: e = 1, −3 → √5; mean 2, SST 8 → std √2; MAE 1.5; R2 −0.5.
	near(t, "test q RMSE", tq.RMSE, math.Sqrt(3))
	near(t, "test q one-step RMSE", tq.OneStepRMSE, math.Sqrt(5))
	near(t, "test q NRMSE", tq.NRMSE, math.Sqrt(1.5))
	near(t, "test q one-step NRMSE", tq.OneStepNRMSE, math.Sqrt(2.5))
	near(t, "test q MAE", tq.MAE, 1.5)
	near(t, "test q R2", tq.R2, -0.5)
	near(t, "test mean NRMSE", m.Test.MeanNRMSE, (math.Sqrt(1.2)+math.Sqrt(1.5))/2)
	near(t, "test mean one-step NRMSE", m.Test.MeanOneStepNRMSE, (2/math.Sqrt(5)+math.Sqrt(2.5))/2)
	near(t, "test mean R2", m.Test.MeanR2, -0.35)
	near(t, "gap", m.ValTestGap, (math.Sqrt(1.2)+math.Sqrt(1.5))/2-1)
	// JSON round trip.
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"meanNrmse"`, `"oneStepNrmse"`, `"trainUniqueSteps"`, `"valTestGap"`, `"target":"p"`} {
		if !strings.Contains(string(js), key) {
			t.Fatalf("JSON lacks %s: %s", key, js)
		}
	}
	var back Metrics
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Test.Targets[1].OneStepNRMSE != tq.OneStepNRMSE || back.ValTestGap != m.ValTestGap || back.Format != m.Format {
		t.Fatalf("round trip %+v", back)
	}
}

// oracle reads the window index from x[0] of each window and returns the
// bundle's true y, recording batch sizes.
type oracle struct {
	b       *dataset.Bundle
	batches []int
}

func (o *oracle) Format() string { return "test.oracle" }
func (o *oracle) Horizon() int   { return o.b.Dims().F }
func (o *oracle) PredictBatch(_ context.Context, x, u []float32, n int) ([]float32, error) {
	o.batches = append(o.batches, n)
	d := o.b.Dims()
	var out []float32
	for i := 0; i < n; i++ {
		w := int(x[i*d.XLen()])
		_, _, y := o.b.Window(w)
		out = append(out, y...)
	}
	return out, nil
}

func TestEvaluatePerfectBatched(t *testing.T) {
	b := dynBundle(t, 2, 3, []string{"a", "c", "p"}, []string{"c"}, []string{"p"}, 100, 1000, 9000)
	d := b.Dims()
	for w := 0; w < d.N; w++ {
		b.X[w*d.XLen()] = float32(w)
		for f := 0; f < d.F; f++ {
			b.Y[w*d.YLen()+f] = float32(math.Sin(float64(w+f) / 7))
		}
	}
	o := &oracle{b: b}
	m, err := Evaluate(context.Background(), b, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range o.batches {
		if n > BatchSize || n < 1 {
			t.Fatalf("batch of %d", n)
		}
	}
	if len(o.batches) != 1+3 { // val 1000; test 4096+4096+808
		t.Fatalf("batches %v", o.batches)
	}
	for _, s := range []SplitMetrics{m.Val, m.Test} {
		tm := s.Targets[0]
		if tm.RMSE != 0 || tm.NRMSE != 0 || tm.OneStepRMSE != 0 || tm.OneStepNRMSE != 0 || tm.MAE != 0 || tm.R2 != 1 || s.MeanR2 != 1 || s.MeanNRMSE != 0 {
			t.Fatalf("%s not perfect: %+v", s.Split, s)
		}
	}
	if m.ValTestGap != 0 || m.Test.Windows != 9000 || m.Test.Targets[0].N != 27000 {
		t.Fatalf("%+v", m)
	}
}

func TestEvaluateDegenerate(t *testing.T) {
	// Constant targets (std 0): exact → NRMSE 0, R2 1; off → +Inf / −Inf.
	b := dynBundle(t, 1, 1, []string{"p", "q"}, nil, []string{"p", "q"}, 1, 1, 2)
	for w := 0; w < 4; w++ {
		setY(b, w, 5, 5)
	}
	m, err := Evaluate(context.Background(), b, constPred{c: []float32{5, 6}, F: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, q := m.Test.Targets[0], m.Test.Targets[1]
	if p.NRMSE != 0 || p.R2 != 1 || !math.IsInf(q.NRMSE, 1) || !math.IsInf(q.OneStepNRMSE, 1) || !math.IsInf(q.R2, -1) || q.RMSE != 1 {
		t.Fatalf("p %+v q %+v", p, q)
	}
	if !math.IsInf(m.Test.MeanNRMSE, 1) || !math.IsNaN(m.ValTestGap) {
		t.Fatalf("means %+v gap %v", m.Test, m.ValTestGap)
	}
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"nrmse":null`) || !strings.Contains(string(js), `"valTestGap":null`) {
		t.Fatalf("non-finite not null: %s", js)
	}
	var back Metrics
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(back.Test.Targets[1].NRMSE) || back.Test.Targets[0].NRMSE != 0 {
		t.Fatalf("null must read back as NaN: %+v", back.Test.Targets)
	}
	// A gate on it fails, before and after the round trip.
	prof, _ := ProfileFor(dataset.PurposeMPCSurrogate)
	for _, mm := range []*Metrics{m, &back} {
		if r := Gate(prof, mm, true); r.Passed || checkByID(r, "G2").Passed || checkByID(r, "G3").Passed {
			t.Fatalf("degenerate metrics passed: %+v", r)
		}
	}
	// Empty val split: NaN metrics.
	b = dynBundle(t, 1, 1, []string{"p"}, nil, []string{"p"}, 1, 0, 2)
	setY(b, 1, 1)
	setY(b, 2, 3)
	m, err = Evaluate(context.Background(), b, constPred{c: []float32{2}, F: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m.Val.Windows != 0 || !math.IsNaN(m.Val.MeanNRMSE) || !math.IsNaN(m.ValTestGap) || m.Test.MeanNRMSE != 1 {
		t.Fatalf("%+v", m)
	}
	if _, err := json.Marshal(m); err != nil {
		t.Fatal(err)
	}
}

type badPred struct {
	constPred
	out []float32
}

func (p badPred) PredictBatch(_ context.Context, _, _ []float32, n int) ([]float32, error) {
	return p.out, nil
}

func TestEvaluateRejectsBadPredictions(t *testing.T) {
	b := dynBundle(t, 1, 1, []string{"p"}, nil, []string{"p"}, 1, 1, 1)
	for _, c := range []struct {
		name string
		p    model.Predictor
	}{
		{"NaN", badPred{constPred{F: 1}, []float32{float32(math.NaN())}}},
		{"Inf", badPred{constPred{F: 1}, []float32{float32(math.Inf(1))}}},
		{"short", badPred{constPred{F: 1}, []float32{}}},
		{"long", badPred{constPred{F: 1}, []float32{1, 2}}},
		{"horizon", constPred{c: []float32{1}, F: 2}},
	} {
		_, err := Evaluate(context.Background(), b, c.p)
		var ae *core.Error
		if core.CodeOf(err) != model.CodeModelInvalid || !asCore(err, &ae) || ae.Kind() != core.KindUnprocessable {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Evaluate(ctx, b, constPred{c: []float32{1}, F: 1}); err == nil {
		t.Fatal("cancelled evaluation succeeded")
	}
	b.Y[2] = float32(math.NaN())
	if _, err := Evaluate(context.Background(), b, constPred{c: []float32{1}, F: 1}); core.CodeOf(err) != core.CodeDatasetTampered {
		t.Fatalf("NaN in y: %v", err)
	}
	b.Y = b.Y[:2]
	if _, err := Evaluate(context.Background(), b, constPred{c: []float32{1}, F: 1}); core.CodeOf(err) != core.CodeDatasetTampered {
		t.Fatalf("short y: %v", err)
	}
}

func asCore(err error, ae **core.Error) bool {
	e, ok := err.(*core.Error)
	*ae = e
	return ok
}

func TestTrainUniqueSteps(t *testing.T) {
	// One run of 10 steps, H=3, F=2, stride 1: windows start their future
	// at steps 3..8 → 6 windows covering steps 0..9 → 10 unique steps.
	const H, F = 3, 2
	b := dynBundle(t, H, F, []string{"p"}, nil, []string{"p"}, 6, 1, 1)
	for w := 0; w < 8; w++ {
		for i := 0; i < H+F; i++ {
			b.TS[w*(H+F)+i] = float64(1000 * (w%6 + i))
		}
	}
	m, err := Evaluate(context.Background(), b, constPred{c: []float32{0}, F: F})
	if err != nil {
		t.Fatal(err)
	}
	if m.TrainUniqueSteps != 10 {
		t.Fatalf("unique steps %d, want 10 (6 windows)", m.TrainUniqueSteps)
	}
	// Two runs with the same timestamps (3 windows each): the blocks tell
	// the runs apart.
	b.Manifest.Split.Blocks = []dataset.BlockWindow{
		{Block: dataset.Block{RunID: "r1", Split: dataset.SplitTrain}, WindowOffset: 0, WindowCount: 3},
		{Block: dataset.Block{RunID: "r1b", Split: dataset.SplitTrain}, WindowOffset: 3, WindowCount: 3},
		{Block: dataset.Block{RunID: "r2", Split: dataset.SplitVal}, WindowOffset: 6, WindowCount: 1},
	}
	for w := 3; w < 6; w++ {
		for i := 0; i < H+F; i++ {
			b.TS[w*(H+F)+i] = float64(1000 * (w - 3 + i))
		}
	}
	// r1 windows cover steps 0..6, r1b windows steps 0..6 of another run.
	if got := trainUniqueSteps(b); got != 14 {
		t.Fatalf("two runs: %d, want 14", got)
	}
	b.Manifest.Split.Blocks = nil
	if got := trainUniqueSteps(b); got != 7 {
		t.Fatalf("without blocks: %d, want 7", got)
	}
}

// Static datasets: rows, F = 1, evaluated through a real linear artifact.
func TestEvaluateStaticLinear(t *testing.T) {
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindStatic, Purpose: dataset.PurposeStaticResponse,
		AllNodes: []string{"b", "a", "q"}, Controls: []string{"b"}, Inputs: []string{"b", "a"}, Targets: []string{"q"},
		Split: dataset.ManifestSplit{Train: dataset.SplitPart{RunIDs: []string{"x", "y"}, Count: 60},
			Val: dataset.SplitPart{Offset: 60, Count: 20}, Test: dataset.SplitPart{Offset: 80, Count: 20}}}
	b := &dataset.Bundle{Manifest: m, TS: make([]float64, 100)}
	for i := 0; i < 100; i++ {
		bv, av := float32(i%5), float32(i%7)
		b.X = append(b.X, bv, av)
		b.Y = append(b.Y, 2*av-bv)
	}
	dir := t.TempDir()
	js := `{"format":"aml.linear-window/1","history":1,"horizon":1,"xCols":2,"uCols":0,"yCols":1,"normalized":false,"weights":[[-1,2,0]]}`
	if err := os.WriteFile(filepath.Join(dir, "model.json"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := model.Load(dir, m, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	met, err := Evaluate(context.Background(), b, p)
	if err != nil {
		t.Fatal(err)
	}
	if met.Test.MeanR2 != 1 || met.Test.MeanNRMSE != 0 || met.TrainUniqueSteps != 60 || met.TrainRuns != 2 || met.Format != model.FormatLinearWindow {
		t.Fatalf("%+v", met)
	}
	prof, err := ProfileFor(m.Purpose)
	if err != nil {
		t.Fatal(err)
	}
	if r := Gate(prof, met, true); !r.Passed || r.Profile != ProfileStatic {
		t.Fatalf("%+v", r)
	}
	// The mean model explains nothing: R2 ≤ 0 fails S1.
	mdir := t.TempDir()
	if err := model.WriteMean(mdir, []float64{4}, 1); err != nil {
		t.Fatal(err)
	}
	mp, err := model.Load(mdir, m, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	met, err = Evaluate(context.Background(), b, mp)
	if err != nil {
		t.Fatal(err)
	}
	if r := Gate(prof, met, true); r.Passed || checkByID(r, "S1").Passed || met.Test.MeanR2 > 0.1 {
		t.Fatalf("mean model passed: %+v %+v", met.Test, r)
	}
}

func checkByID(r GateReport, id string) Check {
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	return Check{ID: "missing"}
}

func passing() *Metrics {
	return &Metrics{
		// (test − val) / val = 0.2 (one-sided G3 at its threshold); |gap| too
		Val:              SplitMetrics{Split: "val", Windows: 10, MeanNRMSE: 0.25 / 1.2, MeanR2: 0.8},
		Test:             SplitMetrics{Split: "test", Windows: 10, MeanOneStepNRMSE: 0.10, MeanNRMSE: 0.25, MeanR2: 0.8},
		ValTestGap:       0.20,
		TrainUniqueSteps: 500,
		TrainRuns:        3,
	}
}

// G3 of the v2 profiles is one-sided: a test error below the validation
// error passes (v1's |gap| failed it), one more than 20 % above fails.
func TestGateOneSidedGap(t *testing.T) {
	mpc, _ := ProfileFor("mpc_surrogate")
	v1, _ := LookupProfile(ProfileUpstreamMPCV1)
	m := passing()
	m.Val.MeanNRMSE, m.ValTestGap = 0.038, 0.29 // test 0.25: better on test than val
	m.Test.MeanNRMSE = 0.027
	if c := checkByID(Gate(mpc, m, true), "G3"); !c.Passed || !(c.Value < 0) {
		t.Fatalf("v2 G3 on a better test split: %+v", c)
	}
	if c := checkByID(Gate(v1, m, true), "G3"); c.Passed {
		t.Fatalf("v1 G3 is two-sided: %+v", c)
	}
	m.Test.MeanNRMSE = 0.038 * 1.3
	if c := checkByID(Gate(mpc, m, true), "G3"); c.Passed {
		t.Fatalf("v2 G3 on a test split 30 %% worse: %+v", c)
	}
}

func TestGateThresholds(t *testing.T) {
	mpc, err := ProfileFor("mpc_surrogate")
	if err != nil {
		t.Fatal(err)
	}
	ev := synthetic(0.9, 1000, 1000)
	gate := func(p Profile, m *Metrics, art bool) GateReport {
		e := ev
		e.ArtifactPresent = art
		return GateEvidence(p, m, e)
	}
	r := gate(mpc, passing(), true)
	if !r.Passed || r.Profile != "upstream-mpc-v2" || r.Version != 2 || len(r.Checks) != 9 {
		t.Fatalf("at the thresholds: %+v", r)
	}
	for _, c := range r.Checks {
		if !c.Passed || c.Detail == "" || c.Name == "" {
			t.Fatalf("check %+v", c)
		}
	}
	up := func(v float64) float64 { return math.Nextafter(v, math.Inf(1)) }
	for _, c := range []struct {
		id   string
		edit func(m *Metrics)
	}{
		{"G1", func(m *Metrics) { m.Test.MeanOneStepNRMSE = up(0.10) }},
		{"G2", func(m *Metrics) { m.Test.MeanNRMSE, m.Val.MeanNRMSE = up(0.25), 0.22 }},
		{"G3", func(m *Metrics) { m.Val.MeanNRMSE = 0.2083 }},
		{"G3", func(m *Metrics) { m.Val.MeanNRMSE = math.NaN() }},
		{"G4a", func(m *Metrics) { m.TrainUniqueSteps = 499 }},
		{"G4b", func(m *Metrics) { m.TrainRuns = 2 }},
		{"G1", func(m *Metrics) { m.Test.MeanOneStepNRMSE = math.Inf(1) }},
	} {
		m := passing()
		c.edit(m)
		r := gate(mpc, m, true)
		if r.Passed {
			t.Fatalf("%s: report passed", c.id)
		}
		for _, ch := range r.Checks {
			if ch.Passed == (ch.ID == c.id) {
				t.Fatalf("%s edited: check %s passed=%v (%s)", c.id, ch.ID, ch.Passed, ch.Detail)
			}
		}
	}
	r = gate(mpc, passing(), false)
	if g5 := checkByID(r, "G5"); r.Passed || g5.Passed || g5.Value != 0 || g5.Threshold != 1 || g5.Op != "==" {
		t.Fatalf("no artifact: %+v", r)
	}
	g1 := checkByID(gate(mpc, passing(), true), "G1")
	if g1.Value != 0.10 || g1.Threshold != 0.10 || g1.Op != "<=" || !strings.Contains(g1.Detail, "0.1") {
		t.Fatalf("G1 %+v", g1)
	}
	if r := gate(mpc, nil, true); r.Passed || !checkByID(r, "G5").Passed || checkByID(r, "G1").Passed || !checkByID(r, "G6").Passed {
		t.Fatalf("nil metrics: %+v", r)
	}

	// quality: no G2.
	q, _ := ProfileFor("quality_predict")
	m := passing()
	m.Test.MeanNRMSE, m.Val.MeanNRMSE = 5, 5
	m.ValTestGap = 0
	if r := gate(q, m, true); !r.Passed || r.Profile != "upstream-quality-v2" || len(r.Checks) != 8 || checkByID(r, "G2").ID != "missing" {
		t.Fatalf("quality: %+v", r)
	}

	// static: R2 ≥ 0.8, G3, rows ≥ 50, G5.
	st, _ := ProfileFor("static_response")
	m = passing()
	m.TrainUniqueSteps, m.TrainRuns = 50, 1
	m.Test.MeanOneStepNRMSE = 9
	if r := Gate(st, m, true); !r.Passed || r.Profile != "static-v1" || len(r.Checks) != 4 {
		t.Fatalf("static at thresholds: %+v", r)
	}
	m.Test.MeanR2 = math.Nextafter(0.8, 0)
	if r := Gate(st, m, true); r.Passed || checkByID(r, "S1").Passed {
		t.Fatalf("static R2 below: %+v", r)
	}
	m.Test.MeanR2 = 0.8
	m.TrainUniqueSteps = 49
	if r := Gate(st, m, true); r.Passed || checkByID(r, "G4a").Passed {
		t.Fatalf("static rows below: %+v", r)
	}

	js, err := json.Marshal(Gate(mpc, &Metrics{Test: SplitMetrics{MeanNRMSE: math.Inf(1), MeanOneStepNRMSE: math.NaN()}, ValTestGap: math.NaN()}, true))
	if err != nil || !strings.Contains(string(js), `"value":null`) {
		t.Fatalf("gate JSON %s %v", js, err)
	}
	var back GateReport
	if err := json.Unmarshal(js, &back); err != nil || !math.IsNaN(back.Checks[0].Value) || back.Checks[0].Threshold != 0.10 {
		t.Fatalf("gate JSON round trip %+v %v", back, err)
	}
}

func TestProfileFor(t *testing.T) {
	for purpose, id := range map[string]string{"mpc_surrogate": "upstream-mpc-v2", "quality_predict": "upstream-quality-v2", "static_response": "static-v1"} {
		p, err := ProfileFor(purpose)
		if err != nil || p.ID != id || p.Purpose != purpose || (p.Version != 1) != (id != "static-v1") {
			t.Fatalf("%s: %+v %v", purpose, p, err)
		}
	}
	for _, bad := range []string{"", "mpc", "mpc_surrogate_v2", "MPC_SURROGATE", " static_response", "upstream-mpc-v1"} {
		if _, err := ProfileFor(bad); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	if _, err := LookupProfile("upstream-mpc-v3"); err == nil {
		t.Fatal("unknown profile found")
	}
	// Profiles returns copies.
	ps := Profiles()
	ps[0].Rules[0].Threshold = 99
	if p, _ := LookupProfile(ps[0].ID); p.Rules[0].Threshold == 99 {
		t.Fatal("Profiles shares the rules")
	}
}
