package trainers

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/ingest"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/physics"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/trainer"
)

const (
	hybTanksDir   = "../../../../shared/datasets/cascaded_tanks"
	hybPhysicsDir = "../../../examples/physics"
	hybTestdata   = "../hybrid/testdata"
)

// hybTanksBundle ingests the cascaded tanks records (estimation = train,
// validation = test) into a dataset with a 4 s grid and H = F = 10.
func hybTanksBundle(t *testing.T) *dataset.Bundle {
	t.Helper()
	if _, err := os.Stat(filepath.Dir(hybTanksDir)); err != nil {
		t.Skip("shared datasets folder absent")
	}
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	for i, f := range []string{"cascaded_tanks_estimation.csv", "cascaded_tanks_validation.csv"} {
		_, err := ingest.IngestFiles(ctx, st, []string{filepath.Join(hybTanksDir, f)}, ingest.CSVOptions{Line: "tanks", Product: "water", Recipe: "multisine",
			TimeCol: "time_s", TimeUnit: "s", IgnoreCols: []string{"k"}, TimeOffsetMs: int64(i) * int64(2*time.Hour/time.Millisecond)}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	off := false
	spec := &dataset.Spec{LineID: "tanks", ProductID: "water", RecipeID: "multisine", BeatMs: 4000, HistorySteps: 10, HorizonSteps: 10,
		Purpose: dataset.PurposeMPCSurrogate,
		Nodes:   []dataset.NodeSpec{{NodeID: "u_V", Role: dataset.RoleControl}, {NodeID: "y_V", Role: dataset.RoleTarget}},
		Split: dataset.Split{Mode: dataset.SplitModeExplicit, TrainRunIDs: []string{"cascaded_tanks_estimation"},
			TestRunIDs: []string{"cascaded_tanks_validation"}}}
	spec.Cleaning.Hampel = &dataset.Hampel{WindowMs: 4000, Threshold: 0}
	spec.Cleaning.Range = &off
	ds, err := dataset.Build(ctx, st, spec, dataset.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, err := dataset.OpenBundle(filepath.Join(dir, ds.Dataset.Path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hybInjectionBundle simulates the injection line (12 runs of 10 min at
// 1 s) and builds examples/specs/injection.json over it.
func hybInjectionBundle(t *testing.T) *dataset.Bundle {
	t.Helper()
	dir := t.TempDir()
	cfg := sim.DefaultInjectionConfig()
	cfg.Seed, cfg.RunDuration = 7, 10*time.Minute
	out, err := sim.GenerateInjection(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	if _, err := out.Write(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	sb, err := os.ReadFile("../../../examples/specs/injection.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := dataset.ParseSpec(sb)
	if err != nil {
		t.Fatal(err)
	}
	res, err := dataset.Build(ctx, st, spec, dataset.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, err := dataset.OpenBundle(filepath.Join(dir, res.Dataset.Path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hybTrain trains hybrid_residual@1 on b and loads the artifact.
func hybTrain(t *testing.T, b *dataset.Bundle, params string) (model.Predictor, *hybridArtifact, []byte) {
	t.Helper()
	dir := t.TempDir()
	last := 0.0
	tc := &trainer.TrainContext{ArtifactsDir: dir, Dataset: b, Params: json.RawMessage(params), Seed: 1,
		Progress: func(f float64, stage string) {
			if f < last {
				t.Errorf("progress went back from %v to %v (%s)", last, f, stage)
			}
			last = f
		}}
	if err := (HybridResidual{}).Train(context.Background(), tc); err != nil {
		t.Fatalf("train %s: %v", params, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, model.FileName))
	if err != nil {
		t.Fatal(err)
	}
	var a hybridArtifact
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	p, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(eval.RunSimulator); !ok {
		t.Fatal("the hybrid predictor is not a RunSimulator")
	}
	return p, &a, raw
}

func hybFreeRun(t *testing.T, b *dataset.Bundle, p model.Predictor, nInit int) *eval.FreeRunMetrics {
	t.Helper()
	fr, err := eval.FreeRun(context.Background(), b, p.(eval.RunSimulator), dataset.SplitTest, nInit)
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

func hybCheckPriors(t *testing.T, a *hybridArtifact) {
	t.Helper()
	for _, q := range a.Params {
		if !(q.Value >= q.Lo && q.Value <= q.Hi) {
			t.Errorf("param %s = %v outside its prior [%v, %v]", q.Name, q.Value, q.Lo, q.Hi)
		}
	}
}

// TestHybridResidualOnCascadedTanks runs the platform path on the cascaded
// tanks benchmark with three physics files: the two-tank prior
// (cascaded_tanks.aml), its overflow-aware variant
// (cascaded_tanks_overflow.aml) and examples/physics/cascaded_tanks_offsets.aml (overflow of
// both tanks, level offsets in the Torricelli outflows). For each:
// physics alone (ensemble 0) and the hybrid, free-run RMSE on the test
// record after 4 measured samples. Full settings (200 epochs, 5 members).
func TestHybridResidualOnCascadedTanks(t *testing.T) {
	if testing.Short() {
		t.Skip("trains hybrid models end to end; runs without -short")
	}
	b := hybTanksBundle(t)
	results := map[string][2]float64{}
	for _, f := range []string{hybPhysicsDir + "/cascaded_tanks.aml", hybPhysicsDir + "/cascaded_tanks_overflow.aml", hybPhysicsDir + "/cascaded_tanks_offsets.aml"} {
		name := filepath.Base(f)
		start := time.Now()
		pp, pa, _ := hybTrain(t, b, `{"physics":"`+f+`","ensemble":0}`)
		phys := hybFreeRun(t, b, pp, 4).Targets[0].RMSE
		hp, ha, _ := hybTrain(t, b, `{"physics":"`+f+`"}`)
		hyb := hybFreeRun(t, b, hp, 4)
		hybCheckPriors(t, pa)
		hybCheckPriors(t, ha)
		results[name] = [2]float64{phys, hyb.Targets[0].RMSE}
		var ps []string
		for _, q := range ha.Params {
			ps = append(ps, q.Name+"="+strconvG(q.Value))
		}
		t.Logf("%s: free-run test RMSE physics %.4f V, hybrid %.4f V (NRMSE %.4f); x0 %s, weights run %g window %g; calibration cost %.5f (nominal %.4f), params %s, inactive %v, train RMSE physics %.4f hybrid %.4f; %v",
			name, phys, hyb.Targets[0].RMSE, hyb.Targets[0].NRMSE, ha.Training.X0Mode, ha.X0Weight, ha.WindowX0Weight, float64(ha.Training.Cost), float64(ha.Training.NominalCost), strings.Join(ps, " "),
			ha.Training.Inactive, float64(ha.Training.Train.Physics[0]), float64(ha.Training.Train.Hybrid[0]), time.Since(start).Round(time.Millisecond))
		if !(hyb.Targets[0].RMSE < phys) {
			t.Errorf("%s: the hybrid (%.4f V) is not better than the physics alone (%.4f V)", name, hyb.Targets[0].RMSE, phys)
		}
	}
	if r := results["cascaded_tanks_offsets.aml"][1]; r > 0.30 {
		t.Errorf("hybrid with cascaded_tanks_offsets.aml: free-run RMSE %.4f V > 0.30 (published best NLSS2 0.343)", r)
	}
	if r := results["cascaded_tanks_overflow.aml"][1]; r > 0.40 {
		t.Errorf("hybrid with cascaded_tanks_overflow.aml: free-run RMSE %.4f V > 0.40", r)
	}
}

func strconvG(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestHybridResidualOnInjection trains on the simulated injection line with
// examples/physics/injection.aml: the window NRMSE of the hybrid is better
// than that of the calibrated physics alone, and the artifact round-trips
// (loaded predictions equal a second load's; training is deterministic).
func TestHybridResidualOnInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("trains hybrid models end to end; runs without -short")
	}
	b := hybInjectionBundle(t)
	const mapping = `"mapping":{"outputs":{"weight":"part_weight"}}`
	phys := hybridPhysics(t, "injection.aml")
	ctx := context.Background()
	pp, pa, _ := hybTrain(t, b, `{"physics":"`+phys+`",`+mapping+`,"ensemble":0}`)
	pm, err := eval.Evaluate(ctx, b, pp)
	if err != nil {
		t.Fatal(err)
	}
	hp, ha, raw := hybTrain(t, b, `{"physics":"`+phys+`",`+mapping+`,"epochs":60}`)
	hm, err := eval.Evaluate(ctx, b, hp)
	if err != nil {
		t.Fatal(err)
	}
	hybCheckPriors(t, pa)
	hybCheckPriors(t, ha)
	for i, tg := range b.Manifest.Targets {
		t.Logf("%s: test window RMSE physics %.4f, hybrid %.4f (NRMSE %.4f → %.4f)", tg, pm.Test.Targets[i].RMSE, hm.Test.Targets[i].RMSE, pm.Test.Targets[i].NRMSE, hm.Test.Targets[i].NRMSE)
	}
	t.Logf("mean window NRMSE: test physics %.4f hybrid %.4f; val physics %.4f hybrid %.4f; x0 %s, weights run %g window %g; params %+v; segments %d (val %d), %v",
		pm.Test.MeanNRMSE, hm.Test.MeanNRMSE, pm.Val.MeanNRMSE, hm.Val.MeanNRMSE, ha.Training.X0Mode, ha.X0Weight, ha.WindowX0Weight, ha.Params, ha.Training.Segments, ha.Training.ValSegments, ha.Training.Seconds)
	if !(hm.Test.MeanNRMSE < pm.Test.MeanNRMSE) || !(hm.Val.MeanNRMSE < pm.Val.MeanNRMSE) {
		t.Errorf("hybrid window NRMSE test %.4f val %.4f, physics alone %.4f %.4f", hm.Test.MeanNRMSE, hm.Val.MeanNRMSE, pm.Test.MeanNRMSE, pm.Val.MeanNRMSE)
	}
	// deterministic: the same seed gives the same model (timings aside)
	_, _, raw2 := hybTrain(t, b, `{"physics":"`+phys+`",`+mapping+`,"epochs":60}`)
	if !bytes.Equal(hybStripSeconds(t, raw), hybStripSeconds(t, raw2)) {
		t.Error("two trainings with one seed gave different artifacts")
	}
}

func hybridPhysics(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(hybPhysicsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func hybStripSeconds(t *testing.T, raw []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if tr, ok := m["training"].(map[string]any); ok {
		delete(tr, "seconds")
	}
	b, _ := json.Marshal(m)
	return b
}

// hybSynBundle is an in-memory dynamic dataset simulated with the
// cascaded tanks model (control u_V, target y_V, 4 s beat, H history and F
// horizon steps): three train runs, one val run and one test run, windows
// with stride 1.
func hybSynBundle(t *testing.T, H, F int) *dataset.Bundle {
	t.Helper()
	pm, err := physics.ParseFile(filepath.Join(hybPhysicsDir, "cascaded_tanks.aml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := pm.NewSim([]float64{0.06, 0.045, 0.04, 0.03, 5, 5})
	if err != nil {
		t.Fatal(err)
	}
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindDynamic, Purpose: dataset.PurposeMPCSurrogate,
		AllNodes: []string{"u_V", "y_V"}, Controls: []string{"u_V"}, Targets: []string{"y_V"}, HistorySteps: H, HorizonSteps: F, Stride: 1, BeatMs: 4000}
	b := &dataset.Bundle{Manifest: m}
	rng := rand.New(rand.NewPCG(9, 9))
	splits := []string{dataset.SplitTrain, dataset.SplitTrain, dataset.SplitTrain, dataset.SplitVal, dataset.SplitTest}
	parts := map[string]*dataset.SplitPart{dataset.SplitTrain: &m.Split.Train, dataset.SplitVal: &m.Split.Val, dataset.SplitTest: &m.Split.Test}
	type run struct {
		id    string
		split string
		rows  [][2]float64
	}
	var runs []run
	for r, sp := range splits {
		T := 150
		U := make([][]float64, T)
		lvl := 3.0
		for k := range U {
			if k%20 == 0 {
				lvl = 1 + 5*rng.Float64()
			}
			U[k] = []float64{lvl}
		}
		_, Y, err := s.Simulate([]float64{3 + float64(r), 4}, U, nil, 4)
		if err != nil {
			t.Fatal(err)
		}
		rr := run{id: "run-" + string(rune('a'+r)), split: sp}
		for k := range U {
			rr.rows = append(rr.rows, [2]float64{U[k][0], Y[k][0] + 0.1*math.Tanh(Y[k][0]-5) + 0.005*rng.NormFloat64()})
		}
		runs = append(runs, rr)
		m.Runs = append(m.Runs, dataset.ManifestRun{RunID: rr.id, Split: sp, GridOffset: len(b.GridTS), GridSteps: T})
		for _, row := range rr.rows {
			b.Grid = append(b.Grid, float32(row[0]), float32(row[1]))
			b.GridTS = append(b.GridTS, float64(len(b.GridTS))*4000)
		}
	}
	n := 0
	for _, sp := range []string{dataset.SplitTrain, dataset.SplitVal, dataset.SplitTest} {
		p := parts[sp]
		p.Offset = n
		for _, r := range runs {
			if r.split != sp {
				continue
			}
			p.RunIDs = append(p.RunIDs, r.id)
			for w := H; w+F <= len(r.rows); w++ {
				for k := w - H; k < w; k++ {
					b.X = append(b.X, float32(r.rows[k][0]), float32(r.rows[k][1]))
				}
				for k := w; k < w+F; k++ {
					b.U = append(b.U, float32(r.rows[k][0]))
					b.Y = append(b.Y, float32(r.rows[k][1]))
				}
				for k := w - H; k < w+F; k++ {
					b.TS = append(b.TS, float64(k)*4000)
					b.Mask = append(b.Mask, 1)
				}
				p.Count++
				n++
			}
		}
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	return b
}

// Windows and whole runs go through the same simulation: with one prior
// weight for both, PredictBatch of a window equals SimulateRun over the
// window's H+F rows with nInit = H. The artifact embeds the physics source
// and its hash, keeps the parameters inside their priors, and a tampered
// source is refused.
func TestHybridResidualWindowsEqualRuns(t *testing.T) {
	const H, F = 6, 4
	b := hybSynBundle(t, H, F)
	phys := hybridPhysics(t, "cascaded_tanks.aml")
	p, a, raw := hybTrain(t, b, `{"physics":"`+phys+`","x0Weight":1,"epochs":30,"ensemble":2,"starts":2}`)
	hybCheckPriors(t, a)
	if a.Physics.Source == "" || a.Physics.Model != "cascaded_tanks" || len(a.Residual.Members) != 2 || a.Outputs[0].Model != "y" || a.Controls[0].Column != "u_V" {
		t.Fatalf("artifact: %+v", a)
	}
	if a.X0Weight != 1 || a.WindowX0Weight != 1 {
		t.Fatalf("weights %g %g, want the given 1", a.X0Weight, a.WindowX0Weight)
	}
	lo, hi := b.Split(dataset.SplitTest)
	d := b.Dims()
	pred, err := p.PredictBatch(context.Background(), b.X[lo*d.XLen():hi*d.XLen()], b.U[lo*d.ULen():hi*d.ULen()], hi-lo)
	if err != nil {
		t.Fatal(err)
	}
	sim := p.(eval.RunSimulator)
	for _, w := range []int{0, 17, hi - lo - 1} {
		x, u, _ := b.Window(lo + w)
		var in, out [][]float64
		for k := 0; k < H; k++ {
			in = append(in, []float64{float64(x[k*2])})
			out = append(out, []float64{float64(x[k*2+1])})
		}
		for f := 0; f < F; f++ {
			in = append(in, []float64{float64(u[f])})
		}
		res, err := sim.SimulateRun(in, out, H)
		if err != nil {
			t.Fatal(err)
		}
		for f := 0; f < F; f++ {
			if got, want := pred[(w*F+f)], float32(res[H+f][0]); got != want {
				t.Fatalf("window %d step %d: PredictBatch %v, SimulateRun %v", w, f, got, want)
			}
		}
	}
	// spread
	mean, spread, err := p.(*hybridPredictor).SimulateRunSpread([][]float64{{2}, {3}, {4}, {5}}, [][]float64{{5}, {5.1}}, 2)
	if err != nil || len(mean) != 4 || len(spread) != 4 || spread[3][0] < 0 {
		t.Fatalf("spread: %v %v %v", mean, spread, err)
	}
	// tampering with the embedded source is detected
	dir := t.TempDir()
	bad := bytes.Replace(raw, []byte(`d(x2) = k2 * sqrt(x1)`), []byte(`d(x2) = k2 * sqrt(x1) * 2`), 1)
	if bytes.Equal(bad, raw) {
		t.Fatal("source not found in the artifact")
	}
	if err := os.WriteFile(filepath.Join(dir, model.FileName), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()}); err == nil || !model.IsModelInvalid(err) {
		t.Fatalf("tampered source loaded: %v", err)
	}
}

func TestHybridResidualErrors(t *testing.T) {
	b := hybSynBundle(t, 4, 2)
	phys := hybridPhysics(t, "cascaded_tanks.aml")
	for _, c := range []struct{ params, want string }{
		{`{}`, "physics"},
		{`{"physics":"/nonexistent/x.aml"}`, "physics"},
		{`{"physics":"` + phys + `","bogus":1}`, "bogus"},
		{`{"physics":"` + phys + `","mapping":{"controls":{"u":"y_V"}}}`, "not a control of the dataset"},
		{`{"physics":"` + phys + `","mapping":{"controls":{"nope":"u_V"}}}`, "not a control of model"},
		{`{"physics":"` + phys + `","mapping":{"outputs":{"x1":"zz"}}}`, "not a target"},
		{`{"physics":"` + phys + `","x0":"sometimes"}`, "initial-state mode"},
		{`{"physics":"` + hybridPhysics(t, "injection.aml") + `"}`, "no dataset control"},
		{`{"physics":"` + phys + `","ensemble":-1}`, "ensemble"},
	} {
		tc := &trainer.TrainContext{ArtifactsDir: t.TempDir(), Dataset: b, Params: json.RawMessage(c.params), Seed: 1}
		err := (HybridResidual{}).Train(context.Background(), tc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.params, err, c.want)
		}
	}
}
