package trainers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ident/forest"
	"github.com/aml-project/aml/internal/ingest"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/store/sqlite"
)

func TestAutoTask(t *testing.T) {
	if AutoTask([]float64{1, 2, 3, 4, 2}) != forest.Classification || AutoTask([]float64{1, 2.5}) != forest.Regression {
		t.Fatal("auto task")
	}
}

// TestStaticForestOnLegoThroughJobs runs the whole platform path on real
// data: CSV ingest (one row per moulded part) → static dataset → job with
// static_response@1 → platform evaluation and gates.
func TestStaticForestOnLegoThroughJobs(t *testing.T) {
	if _, err := os.Stat(lego); err != nil {
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
	// One part (6x2 brick): its 77 rows as one run of cycles.
	raw, _ := os.ReadFile(lego)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var part []string
	part = append(part, lines[0])
	for _, l := range lines[1:] {
		if strings.HasSuffix(l, ",6x2_Lego") {
			part = append(part, l)
		}
	}
	if len(part) != 78 {
		t.Fatalf("%d rows of part 6x2", len(part)-1)
	}
	partCSV := filepath.Join(dir, "lego_6x2.csv")
	if err := os.WriteFile(partCSV, []byte(strings.Join(part, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ingest.IngestFiles(ctx, st, []string{partCSV}, ingest.CSVOptions{Line: "lego", Product: "bricks", Recipe: "ccd", Run: "lego-6x2",
		Period: time.Second, IgnoreCols: []string{"row", "part"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := &dataset.Spec{LineID: "lego", ProductID: "bricks", RecipeID: "ccd", BeatMs: 1000, Purpose: dataset.PurposeStaticResponse,
		Nodes: []dataset.NodeSpec{
			{NodeID: "holding_pressure_bar", Role: dataset.RoleControl}, {NodeID: "holding_pressure_time_s", Role: dataset.RoleControl},
			{NodeID: "melt_temp_C", Role: dataset.RoleControl}, {NodeID: "mold_temp_C", Role: dataset.RoleControl},
			{NodeID: "cooling_time_s", Role: dataset.RoleControl}, {NodeID: "volume_flow_cm3_s", Role: dataset.RoleControl},
			{NodeID: "max_deformation_mm", Role: dataset.RoleTarget}},
		Split: dataset.Split{ValRatio: 0.15, TestRatio: 0.2, Seed: 3}}
	off := false
	spec.Cleaning.Hampel = &dataset.Hampel{WindowMs: 1000, Threshold: 0} // static rows: no time-series outlier filter
	spec.Cleaning.Range = &off
	ds, err := dataset.Build(ctx, st, spec, dataset.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := jobs.NewRunner(st, jobs.Options{DataDir: dir, Trainers: jobs.NewTrainers(All()...).WithFormats(Formats()), Bus: events.New()})
	j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: ds.Dataset.ID, TrainerRef: "static_forest@1", Params: json.RawMessage(`{"trees":100,"minLeaf":2}`), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
	j, _ = st.GetJob(ctx, j.ID)
	if j.Status != core.JobDone {
		t.Fatalf("job %s: %s %s", j.Status, j.ErrorCode, j.Error)
	}
	var m struct {
		Test struct {
			MeanR2 float64 `json:"meanR2"`
		} `json:"test"`
	}
	if err := json.Unmarshal(j.Metrics, &m); err != nil {
		t.Fatal(err)
	}
	t.Logf("lego part 6x2, random row split, forest: platform test R² %.4f, gates passed %v", m.Test.MeanR2, j.GatePassed)
	if m.Test.MeanR2 < 0.5 {
		t.Fatalf("test R² %.3f", m.Test.MeanR2)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "jobs", j.ID, "artifacts", "model.json"))
	if err != nil {
		t.Fatal(err)
	}
	var art forestArtifact
	if err := json.Unmarshal(raw, &art); err != nil || art.Format != FormatForest || len(art.Forests) != 1 {
		t.Fatalf("artifact: %v %+v", err, art.Format)
	}
	f, err := forest.Parse(art.Forests[0])
	if err != nil {
		t.Fatal(err)
	}
	if f.Task != forest.Regression || len(f.Trees) != 100 || f.OOB.R2 == nil {
		t.Fatalf("forest task %s, %d trees, OOB %+v", f.Task, len(f.Trees), f.OOB)
	}
	t.Logf("OOB R² %.4f over %d rows, importances %.3f", *f.OOB.R2, f.OOB.Rows, f.Importances)
}

// TestForestLoader: an aml.static-forest/1 artifact loads through
// loadForest and predicts class labels in a batch; a forest whose node
// points at a missing feature is refused as an invalid model.
func TestForestLoader(t *testing.T) {
	var X [][]float64
	var y []float64
	for i := 0; i < 60; i++ {
		a, b := float64(i%10), float64(i/10)
		X = append(X, []float64{a, b})
		y = append(y, map[bool]float64{true: 2, false: 1}[a+b > 7])
	}
	o := forest.DefaultOptions(forest.Classification)
	o.Trees = 20
	f, err := forest.Fit(X, y, o)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(f)
	man := &dataset.Manifest{Kind: dataset.KindStatic, Inputs: []string{"a", "b"}, Targets: []string{"q"}}
	art, _ := json.Marshal(forestArtifact{Format: FormatForest, Inputs: man.Inputs, Outputs: man.Targets, Forests: []json.RawMessage{raw}, TrainRows: 60})
	p, err := loadForest(art, t.TempDir(), man)
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{0, 0, 9, 5}
	out, err := p.PredictBatch(context.Background(), x, make([]float32, 2*man.Dims().ULen()), 2)
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != 1 || out[1] != 2 {
		t.Fatalf("predicted %v, want [1 2]", out)
	}
	f.Trees[0].Feature[0] = 5
	raw, _ = json.Marshal(f)
	art, _ = json.Marshal(forestArtifact{Format: FormatForest, Inputs: man.Inputs, Outputs: man.Targets, Forests: []json.RawMessage{raw}})
	if _, err := loadForest(art, t.TempDir(), man); err == nil || !strings.Contains(err.Error(), "feature 5 out of range") {
		t.Fatalf("a corrupt forest loaded: %v", err)
	}
}
