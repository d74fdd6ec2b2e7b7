package trainers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/forest"
)

func TestAutoTask(t *testing.T) {
	if AutoTask([]float64{1, 2, 3, 4, 2}) != forest.Classification || AutoTask([]float64{1, 2.5}) != forest.Regression {
		t.Fatal("auto task")
	}
}

// TestStaticForestOnLegoThroughJobs: static_forest@1 on the Lego part
// through the platform (ingest → static dataset → job → evaluation).
func TestStaticForestOnLegoThroughJobs(t *testing.T) {
	j, r2, dir := legoPartJob(t, "static_forest@1", `{"trees":100,"minLeaf":2}`)
	if r2 < 0.5 {
		t.Fatalf("test R² %.3f", r2)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "jobs", j.ID, "artifacts", "model.json"))
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

// The criterion param reaches the forest's options (gini stays the
// default, written as nothing), and an information criterion for a
// regression target is refused.
func TestForestCriterionParam(t *testing.T) {
	y := []float64{1, 2, 1, 2, 1, 2}
	for crit, want := range map[string]string{"": "", "gini": "", "entropy": forest.CriterionEntropy, "gain_ratio": forest.CriterionGainRatio} {
		if got := (ForestParams{Criterion: crit}).Options(y, 1).Criterion; got != want {
			t.Errorf("criterion %q: options %q, want %q", crit, got, want)
		}
	}
	X := [][]float64{{1}, {2}, {3}, {4}, {5}, {6}}
	if _, err := (ForestParams{Task: "regression", Criterion: "entropy", Trees: 3}).Fit(X, []float64{0.1, 0.5, 0.2, 0.9, 0.3, 0.7}, 1); err == nil {
		t.Fatal("entropy for a regression target accepted")
	}
	if _, err := (ForestParams{Criterion: "gain_ratio", Trees: 3}).Fit(X, y, 1); err != nil {
		t.Fatal(err)
	}
}

// tune oob reaches forest.Tune (the kept forest has a grid point's knobs,
// not the params' maxFeatures / minLeaf) and is refused with method boost.
func TestForestTuneParam(t *testing.T) {
	var X [][]float64
	var y []float64
	for i := 0; i < 60; i++ {
		X = append(X, []float64{float64(i), float64(i%7) * 0.5, float64((i * 13) % 11)})
		y = append(y, float64(1+i/20))
	}
	f, err := (ForestParams{Trees: 20, MaxFeatures: 2, MinLeaf: 9, Tune: "oob"}).Fit(X, y, 1)
	if err != nil {
		t.Fatal(err)
	}
	inGrid := false
	for _, c := range forest.TuneGrid(3) {
		o := f.Options
		inGrid = inGrid || (o.MaxFeatures == c.MaxFeatures && o.MinLeaf == c.MinLeaf && o.Bootstrap == c.Bootstrap && o.SampleFraction == c.SampleFraction)
	}
	if !inGrid || f.Options.MinLeaf == 9 {
		t.Errorf("tuned options %+v are not a grid point", f.Options)
	}
	if _, err := (ForestParams{Method: "boost", Task: "regression", Trees: 5, Tune: "oob"}).Fit(X, y, 1); err == nil {
		t.Error("tune oob with method boost accepted")
	}
	// tune cv: the params' knobs are ignored, the model is TuneCV's.
	g, err := (ForestParams{Task: "regression", Trees: 20, MaxFeatures: 3, MinLeaf: 9, Tune: "cv"}).Fit(X, y, 1)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := forest.TuneCV(X, y, forest.Options{Task: forest.Regression, Trees: 20, MinLeaf: 1, MinSplit: 2, Bootstrap: true, SampleFraction: 1, Seed: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if g.Knobs() != want.Knobs() || g.Options.MinLeaf == 9 || g.Predict(X[5]) != want.Predict(X[5]) {
		t.Errorf("tune cv chose %s, TuneCV %s", g.Knobs(), want.Knobs())
	}
	if _, err := (ForestParams{Task: "classification", Trees: 5, Tune: "cv"}).Fit(X, y, 1); err == nil {
		t.Error("tune cv with task classification accepted")
	}
	if _, err := (ForestParams{Method: "boost", Task: "regression", Trees: 5, Tune: "cv"}).Fit(X, y, 1); err == nil {
		t.Error("tune cv with method boost accepted")
	}
	if _, err := (ForestParams{Task: "regression", Trees: 5, Cuts: true}).Fit(X, y, 1); err == nil {
		t.Error("cuts without tune cv accepted")
	}
	h, err := (ForestParams{Task: "regression", Trees: 20, Tune: "cv", Cuts: true}).Fit(X, y, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Cuts) != 2 || !slices.Contains([]float64{1, 2, 3}, h.Predict(X[7])) {
		t.Errorf("tune cv with cuts: cuts %v, prediction %v", h.Cuts, h.Predict(X[7]))
	}
}

// method extra grows extremely randomised trees on all rows (regression
// mtry d by default, no out-of-bag rows); task ordinal fits
// forest.FitOrdinal; grid cv2 reaches forest.TuneCVGrid; the combinations
// that make no sense are refused.
func TestForestExtraOrdinalParams(t *testing.T) {
	var X [][]float64
	var y []float64
	for i := 0; i < 60; i++ {
		X = append(X, []float64{float64(i), float64(i%7) * 0.5, float64((i * 13) % 11)})
		y = append(y, float64(1+i/20))
	}
	e, err := (ForestParams{Method: "extra", Task: "regression", Trees: 10}).Fit(X, y, 1)
	if err != nil {
		t.Fatal(err)
	}
	if o := e.Options; !o.RandomSplits || o.Bootstrap || o.SampleFraction != 1 || o.MaxFeatures != 3 || e.OOB.Rows != 0 {
		t.Errorf("method extra: options %+v, out-of-bag rows %d", o, e.OOB.Rows)
	}
	c, err := (ForestParams{Method: "extra", Task: "classification", Trees: 10, MaxFeatures: 2}).Fit(X, y, 1)
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Options; !o.RandomSplits || o.Bootstrap || o.MaxFeatures != 2 {
		t.Errorf("method extra classification: options %+v", o)
	}
	o, err := (ForestParams{Task: "ordinal", Trees: 10, MinLeaf: 2}).Fit(X, y, 4)
	if err != nil {
		t.Fatal(err)
	}
	want, err := forest.FitOrdinal(X, y, forest.Options{Task: forest.Regression, Trees: 10, MinLeaf: 2, MinSplit: 2, Bootstrap: true, SampleFraction: 1, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if o.Method != forest.MethodOrdinal || o.Knobs() != want.Knobs() {
		t.Fatalf("task ordinal: %s, want %s", o.Knobs(), want.Knobs())
	}
	for _, x := range X {
		if o.Predict(x) != want.Predict(x) {
			t.Fatal("task ordinal predicts differently from FitOrdinal")
		}
	}
	for name, p := range map[string]ForestParams{
		"ordinal boost":   {Task: "ordinal", Method: "boost", Trees: 5},
		"ordinal tune cv": {Task: "ordinal", Trees: 5, Tune: "cv"},
		"extra tune oob":  {Method: "extra", Task: "regression", Trees: 5, Tune: "oob"},
		"grid no tune":    {Task: "regression", Trees: 5, Grid: "cv2"},
		"grid cv2 cuts":   {Task: "regression", Trees: 5, Tune: "cv", Grid: "cv2", Cuts: true},
		"grid unknown":    {Task: "regression", Trees: 5, Tune: "cv", Grid: "cv7"},
	} {
		if _, err := p.Fit(X, y, 1); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
