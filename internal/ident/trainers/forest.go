package trainers

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/forest"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// FormatForest is the artifact of static_forest@1.
const FormatForest = "aml.static-forest/1"

// StaticForest ("static_forest@1") fits a random forest (package
// internal/ident/forest) per target of a static_response dataset: a
// classifier for a class target (predicted as the class label), a
// regression forest otherwise, with its out-of-bag estimate and feature
// importances in the artifact; or, with method boost, gradient-boosted
// regression trees.
type StaticForest struct{}

func (StaticForest) Ref() string           { return "static_forest@1" }
func (StaticForest) HasTrainingStep() bool { return true }

// ForestParams are static_forest@1's params (also read by the benchmark
// harness, internal/benchident).
type ForestParams struct {
	Method         string  `json:"method" jsonschema:"forest (random forest, trees grown in parallel), extra (extremely randomised trees: every tree on all rows without bootstrap, one random threshold per tried feature, maxFeatures 0 → √d for classification and d for regression; no out-of-bag estimate, estimate it by cross-validation) or boost (gradient-boosted regression trees on the squared error, trees = rounds; regression only)" param:"default=\"forest\";enum=forest|extra|boost"`
	LearningRate   float64 `json:"learningRate" jsonschema:"boost only: shrinkage of every tree (0: 0.05)" param:"default=0;min=0;max=1"`
	Task           string  `json:"task" jsonschema:"classification (targets are class labels, predicted as labels), regression, ordinal (ordered class labels, 2..100 of them: one regression forest per label but the highest estimating P(y > label) from the 0/1 target, trees trees each, and the class of highest implied probability is predicted; method forest or extra, no tune), or auto: classification when every train target value is an integer and there are at most 20 of them" param:"default=\"auto\";enum=auto|classification|regression|ordinal"`
	Trees          int     `json:"trees" jsonschema:"trees in the forest (boost: rounds, 300 when absent)" param:"default=500;min=1;max=100000"`
	MaxDepth       int     `json:"maxDepth" jsonschema:"maximum tree depth (0: unlimited)" param:"default=0;min=0"`
	MinLeaf        int     `json:"minLeaf" jsonschema:"least number of distinct rows in a leaf" param:"default=1;min=1"`
	MinSplit       int     `json:"minSplit" jsonschema:"least number of distinct rows in a node that is split" param:"default=2;min=2"`
	MaxFeatures    int     `json:"maxFeatures" jsonschema:"features tried at each split, mtry (0: √d for classification, d/3 for regression)" param:"default=0;min=0"`
	Bootstrap      *bool   `json:"bootstrap" jsonschema:"draw each tree's rows with replacement (needed for the out-of-bag estimate)" param:"default=true"`
	SampleFraction float64 `json:"sampleFraction" jsonschema:"rows drawn per tree as a fraction of the train rows" param:"default=1;min=0"`
	RandomSplits   bool    `json:"randomSplits" jsonschema:"extremely randomised trees: one random threshold per tried feature" param:"default=false"`
	Criterion      string  `json:"criterion" jsonschema:"classification split criterion: gini, entropy (information gain) or gain_ratio (information gain over the split's own entropy, C4.5's; what the published iGuzzini forest used); regression always uses squared error" param:"default=\"gini\";enum=gini|entropy|gain_ratio"`
	Tune           string  `json:"tune" jsonschema:"none, or oob: per target, grow a forest at every point of the declared grid (forest.TuneGrid: maxFeatures ⌊√d⌋, ⌊d/3⌋, ⌈d/2⌉ × minLeaf 1, 2, 4 × bootstrap of n rows or 0.632·n rows without replacement; the other params as given) on the train rows and keep the one of best out-of-bag accuracy (classification) or squared error (regression); maxFeatures, minLeaf, bootstrap and sampleFraction are then ignored; method forest only. cv (task regression: an ordinal class predicted as a number and rounded): per target, 2 × 5-fold inner cross-validation on the train rows over the declared grid forest.CVGrid (regression forests of 500 trees, maxFeatures ⌊√d⌋, ⌊d/3⌋ × minLeaf 1, 2 × bootstrap or 0.632·n rows without replacement; boosted trees, learning rate 0.05, 0.1 × depth 3, 5, rounds 25..1000 chosen on the inner folds), scored by the accuracy of the rounded out-of-fold predictions; keeps the best forest, the best boosted model and their blend weight w·forest + (1−w)·boost (w = 1, 0.9, …, 0), refitted on all train rows (the forest with trees trees); only task, trees and the seed are read" param:"default=\"none\";enum=none|oob|cv"`
	Grid           string  `json:"grid" jsonschema:"tune cv only: the declared grid, cv1 (forest.CVGrid, as described under tune) or cv2 (forest.CVGrid2: cv1's forests, extremely randomised regression trees maxFeatures ⌊√d⌋, d × minLeaf 1, 3, ordinal forests of 500 trees per part maxFeatures ⌊√d⌋, ⌊d/3⌋ × minLeaf 1, 5, and cv1's boosted trees; the best random or extra forest is blended with the best boosted model, and the best ordinal forest replaces the blend when its inner accuracy is higher; no cuts)" param:"default=\"cv1\";enum=cv1|cv2"`
	Cuts           bool    `json:"cuts" jsonschema:"tune cv only: also fit the class cut points (one between each two consecutive distinct train target values, 20–80 % of the way between them) on the chosen model's inner out-of-fold predictions for the best accuracy, and predict the class label between them instead of a number" param:"default=false"`
	Physics        any     `json:"physics" jsonschema:"ignored (accepted for benchmark tools, which pass it to every trainer)"`
	PhysicsSha256  any     `json:"physicsSha256" jsonschema:"ignored (pinned by job.submit beside physics)"`
}

// Fit fits one target's model: a random forest, or with method boost
// gradient-boosted trees (maxDepth 0 → 4, minLeaf → 3, sampleFraction → 0.8,
// maxFeatures 0 → all).
func (p ForestParams) Fit(X [][]float64, y []float64, seed uint64) (*forest.Forest, error) {
	if p.Grid != "" && p.Grid != forest.GridCV1 && p.Tune != "cv" {
		return nil, fmt.Errorf("grid %s needs tune cv", p.Grid)
	}
	if p.Task == forest.Ordinal && (p.Method == "boost" || (p.Tune != "" && p.Tune != "none")) {
		return nil, fmt.Errorf("task ordinal fits forests (method forest or extra) without tune (tune cv with grid cv2 chooses ordinal forests itself)")
	}
	if p.Method == "extra" && p.Tune != "" && p.Tune != "none" {
		return nil, fmt.Errorf("tune %s needs method forest (tune cv with grid cv2 chooses extremely randomised trees itself)", p.Tune)
	}
	if p.Method != "boost" {
		o := p.Options(y, seed)
		if p.Method == "extra" && p.MaxFeatures == 0 && len(X) > 0 {
			o.MaxFeatures = forest.ExtraOptions(o.Task, len(X[0])).MaxFeatures
		}
		if p.Tune == "oob" {
			f, _, err := forest.Tune(X, y, o)
			return f, err
		}
		if p.Tune == "cv" {
			f, _, err := forest.TuneCVGrid(X, y, o, p.Grid, p.Cuts)
			return f, err
		}
		if p.Cuts {
			return nil, fmt.Errorf("cuts needs tune cv")
		}
		if p.Task == forest.Ordinal {
			return forest.FitOrdinal(X, y, o)
		}
		return forest.Fit(X, y, o)
	}
	if p.Tune == "oob" || p.Tune == "cv" {
		return nil, fmt.Errorf("tune %s needs method forest (tune cv chooses boosted trees itself)", p.Tune)
	}
	if t := p.Options(y, seed).Task; t != forest.Regression {
		return nil, fmt.Errorf("method boost fits regression trees; the task is %s (set task regression to regress a class label)", t)
	}
	bo := forest.BoostOptions{Rounds: p.Trees, LearningRate: p.LearningRate, MaxDepth: p.MaxDepth, MinLeaf: p.MinLeaf, MaxFeatures: p.MaxFeatures, Subsample: p.SampleFraction, Seed: seed}
	if bo.Subsample > 1 {
		bo.Subsample = 1
	}
	return forest.Boost(X, y, bo)
}

// Options returns the forest options for a target with values y (to
// resolve task auto) and a seed. Task ordinal gives the options of its
// parts (regression forests); method extra grows extremely randomised
// trees on all rows unless bootstrap or sampleFraction say otherwise (its
// regression default maxFeatures d is set by Fit, which knows d).
func (p ForestParams) Options(y []float64, seed uint64) forest.Options {
	task := p.Task
	if task == "" || task == "auto" {
		task = AutoTask(y)
	}
	if task == forest.Ordinal {
		task = forest.Regression
	}
	o := forest.DefaultOptions(task)
	if p.Method == "extra" {
		o = forest.ExtraOptions(task, 0)
		o.MaxFeatures = 0
	}
	if p.Trees > 0 {
		o.Trees = p.Trees
	}
	o.MaxDepth, o.MaxFeatures, o.Seed = p.MaxDepth, p.MaxFeatures, seed
	o.RandomSplits = o.RandomSplits || p.RandomSplits
	if p.Criterion != "" && p.Criterion != forest.CriterionGini {
		o.Criterion = p.Criterion
	}
	if p.MinLeaf > 0 {
		o.MinLeaf = p.MinLeaf
	}
	if p.MinSplit > 0 {
		o.MinSplit = p.MinSplit
	}
	if p.Bootstrap != nil {
		o.Bootstrap = *p.Bootstrap
	}
	if p.SampleFraction > 0 {
		o.SampleFraction = p.SampleFraction
	}
	return o
}

// AutoTask is task auto: classification when every value is an integer
// and there are at most 20 distinct values, regression otherwise.
func AutoTask(y []float64) string {
	seen := map[float64]bool{}
	for _, v := range y {
		if v != math.Trunc(v) {
			return forest.Regression
		}
		seen[v] = true
		if len(seen) > 20 {
			return forest.Regression
		}
	}
	return forest.Classification
}

type forestArtifact struct {
	Format    string            `json:"format"`
	Inputs    []string          `json:"inputs"`
	Outputs   []string          `json:"outputs"`
	Forests   []json.RawMessage `json:"forests"` // one forest.Forest per output
	TrainRows int               `json:"trainRows"`
}

func (StaticForest) Train(ctx context.Context, tc *trainer.TrainContext) error {
	b := tc.Dataset
	m := b.Manifest
	if m.Kind != dataset.KindStatic {
		return fmt.Errorf("static_forest@1 needs a static_response dataset (one row per cycle); this one is %s", m.Kind)
	}
	var p ForestParams
	if len(tc.Params) > 0 {
		if err := json.Unmarshal(tc.Params, &p); err != nil {
			return fmt.Errorf("params: %w", err)
		}
	}
	lo, hi := b.Split("train")
	X := make([][]float64, 0, hi-lo)
	var Y [][]float64
	for n := lo; n < hi; n++ {
		x, _, y := b.Window(n)
		X = append(X, f64(x))
		if Y == nil {
			Y = make([][]float64, len(y))
		}
		for o, v := range y {
			Y[o] = append(Y[o], float64(v))
		}
	}
	art := forestArtifact{Format: FormatForest, Inputs: m.Inputs, Outputs: m.Targets, TrainRows: len(X)}
	for o, y := range Y {
		if err := ctx.Err(); err != nil {
			return err
		}
		tc.Progress(0.05+0.9*float64(o)/float64(len(Y)), fmt.Sprintf("forest for %s", m.Targets[o]))
		f, err := p.Fit(X, y, uint64(tc.Seed)+uint64(o))
		if err != nil {
			return err
		}
		raw, err := json.Marshal(f)
		if err != nil {
			return err
		}
		art.Forests = append(art.Forests, raw)
	}
	tc.Progress(0.95, "writing")
	return writeJSON(filepath.Join(tc.ArtifactsDir, model.FileName), art)
}

type forestPredictor struct {
	d dataset.Dims
	f []*forest.Forest
}

func loadForest(b []byte, dir string, man *dataset.Manifest) (model.Predictor, error) {
	var a forestArtifact
	if err := model.Decode(b, &a); err != nil {
		return nil, err
	}
	if man.Kind != dataset.KindStatic {
		return nil, model.Invalid("format", "%s predicts one row per cycle; the dataset is %s", FormatForest, man.Kind)
	}
	d := man.Dims()
	if len(a.Inputs) != d.XCols || len(a.Outputs) != d.YCols || len(a.Forests) != d.YCols {
		return nil, model.Invalid("inputs", "the model has %d inputs, %d outputs and %d forests, the dataset %d inputs and %d outputs", len(a.Inputs), len(a.Outputs), len(a.Forests), d.XCols, d.YCols)
	}
	p := &forestPredictor{d: d}
	for o, raw := range a.Forests {
		f, err := forest.Parse(raw)
		if err != nil {
			return nil, model.Invalid(fmt.Sprintf("forests[%d]", o), "%v", err)
		}
		if f.NFeatures != d.XCols {
			return nil, model.Invalid(fmt.Sprintf("forests[%d]", o), "the forest has %d features, the dataset %d inputs", f.NFeatures, d.XCols)
		}
		p.f = append(p.f, f)
	}
	return p, nil
}

func (p *forestPredictor) Format() string { return FormatForest }
func (p *forestPredictor) Horizon() int   { return 1 }

func (p *forestPredictor) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	if err := model.CheckBatch(p.d, x, u, n); err != nil {
		return nil, err
	}
	out := make([]float32, n*p.d.YCols)
	row := make([]float64, p.d.XCols)
	for i := 0; i < n; i++ {
		for j := range row {
			row[j] = float64(x[i*p.d.XCols+j])
		}
		for o, f := range p.f {
			out[i*p.d.YCols+o] = float32(f.Predict(row))
		}
	}
	return out, nil
}

var forestSchema = sync.OnceValue(trainer.MustParamSchema[ForestParams])

var _ trainer.Described = StaticForest{}

func (StaticForest) Summary() string {
	return "random forest of CART trees (classification by soft vote, or regression) with out-of-bag estimate and feature importances, for static_response datasets; the twin runs its models (each step predicted from that step's settings)"
}
func (StaticForest) Formats() []string               { return []string{FormatForest} }
func (StaticForest) ParamSchema() *jsonschema.Schema { return forestSchema() }
