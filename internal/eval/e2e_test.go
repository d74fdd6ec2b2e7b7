package eval

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// builtInjection builds the example injection dataset over a simulated
// line (12 runs × 10 min at 1 s) and opens it.
func builtInjection(t *testing.T) *dataset.Bundle {
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
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	if _, err := out.Write(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	sb, err := os.ReadFile("../../examples/specs/injection.json")
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
	if _, err := dataset.Verify(dir, res.Dataset); err != nil {
		t.Fatal(err)
	}
	b, err := dataset.OpenBundle(filepath.Join(dir, res.Dataset.Path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEndToEndInjection(t *testing.T) {
	b := builtInjection(t)
	d, man := b.Dims(), b.Manifest
	ctx := context.Background()

	// Independent count of unique train steps: step index within the run.
	start := map[string]float64{}
	for _, r := range man.Runs {
		start[r.RunID] = float64(r.StartMs)
	}
	type key struct {
		run  string
		step int
	}
	uniq := map[key]bool{}
	trainLo, trainHi := b.Split("train")
	gridSteps := 0
	for _, r := range man.Runs {
		for _, id := range man.Split.Train.RunIDs {
			if id == r.RunID {
				gridSteps += r.GridSteps
			}
		}
	}
	for _, bw := range man.Split.Blocks {
		if bw.Split != dataset.SplitTrain {
			continue
		}
		for w := bw.WindowOffset; w < bw.WindowOffset+bw.WindowCount; w++ {
			for _, ts := range b.WindowTS(w) {
				uniq[key{bw.RunID, int((ts - start[bw.RunID]) / float64(man.BeatMs))}] = true
			}
		}
	}

	// Mean model on the train targets.
	means := make([]float64, d.YCols)
	for i, v := range b.Y[trainLo*d.YLen() : trainHi*d.YLen()] {
		means[i%d.YCols] += float64(v)
	}
	for k := range means {
		means[k] /= float64((trainHi - trainLo) * d.F)
	}
	mdir := t.TempDir()
	if err := model.WriteMean(mdir, means, d.F); err != nil {
		t.Fatal(err)
	}
	mp, err := model.Load(mdir, man, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mm, err := Evaluate(ctx, b, mp)
	if err != nil {
		t.Fatal(err)
	}
	if mm.TrainUniqueSteps != len(uniq) || mm.TrainUniqueSteps > gridSteps || mm.TrainUniqueSteps >= (trainHi-trainLo)*(d.H+d.F) || mm.TrainUniqueSteps < trainHi-trainLo {
		t.Fatalf("unique steps %d, independent %d, grid steps %d, train windows %d", mm.TrainUniqueSteps, len(uniq), gridSteps, trainHi-trainLo)
	}
	if mm.TrainRuns != 8 || mm.Test.Windows == 0 || mm.Val.Windows == 0 {
		t.Fatalf("%+v", mm)
	}
	prof, err := ProfileFor(man.Purpose)
	if err != nil {
		t.Fatal(err)
	}
	r := Gate(prof, mm, true)
	if r.Passed || checkByID(r, "G1").Passed || !checkByID(r, "G4a").Passed || !checkByID(r, "G4b").Passed || !checkByID(r, "G5").Passed {
		t.Fatalf("mean model gate: %+v", r)
	}

	// Persistence as a linear-window model: y[f,k] = x[H−1, col(target k)].
	col := map[string]int{}
	for j, n := range man.AllNodes {
		col[n] = j
	}
	nFeat := d.H*d.XCols + d.F*d.NCtrl + 1
	var weights [][]float64
	for f := 0; f < d.F; f++ {
		for _, tg := range man.Targets {
			row := make([]float64, nFeat)
			row[(d.H-1)*d.XCols+col[tg]] = 1
			weights = append(weights, row)
		}
	}
	js, _ := json.Marshal(map[string]any{"format": model.FormatLinearWindow, "history": d.H, "horizon": d.F,
		"xCols": d.XCols, "uCols": d.NCtrl, "yCols": d.YCols, "normalized": false, "weights": weights})
	pdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pdir, model.FileName), js, 0o644); err != nil {
		t.Fatal(err)
	}
	pp, err := model.Load(pdir, man, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pm, err := Evaluate(ctx, b, pp)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mean: one-step %.3f rollout %.3f; persistence: one-step %.3f rollout %.3f; unique steps %d",
		mm.Test.MeanOneStepNRMSE, mm.Test.MeanNRMSE, pm.Test.MeanOneStepNRMSE, pm.Test.MeanNRMSE, pm.TrainUniqueSteps)
	if pm.Test.MeanOneStepNRMSE >= mm.Test.MeanOneStepNRMSE {
		t.Fatalf("persistence (%v) not better than the mean (%v) one step ahead", pm.Test.MeanOneStepNRMSE, mm.Test.MeanOneStepNRMSE)
	}
	if pm.TrainUniqueSteps != mm.TrainUniqueSteps {
		t.Fatal("unique steps depend on the model")
	}
}
