package trainers

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

// A 3-input, 1-output furnace-like ARX system whose third input acts
// without delay and the others with one:
//
//	y(k) = 0.6 y(k−1) − 0.2 y(k−2) + Σ_a Σ_{j<2} b_{a,j} u_a(k−nk_a−j) + 0.5
var (
	delTruthNK = []int{1, 1, 0}
	delTruthB  = [][]float64{{0.8, 0.3}, {-0.5, 0.2}, {0.7, -0.4}}
)

var delNodes = []string{"u1", "u2", "u3", "y"}

func delSystem(u [][]float64, noise float64, r *rand.Rand) []float64 {
	y := make([]float64, len(u))
	for k := range y {
		v := 0.5
		if k >= 1 {
			v += 0.6 * y[k-1]
		}
		if k >= 2 {
			v -= 0.2 * y[k-2]
		}
		for a, nk := range delTruthNK {
			for j, b := range delTruthB[a] {
				if t := k - nk - j; t >= 0 {
					v += b * u[t][a]
				}
			}
		}
		y[k] = v + noise*r.NormFloat64()
	}
	return y
}

// delSpec is one run: its split, length, and every nanEvery-th step of y
// missing (0: none).
type delSpec struct {
	split    string
	T        int
	nanEvery int
}

// delBundle builds a dynamic bundle of the 3-input system (controls u1 u2
// u3, target y; the same window rules as linSynBundle).
func delBundle(t *testing.T, seed uint64, noise float64, specs []delSpec, H, F int) *dataset.Bundle {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 3))
	m := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindDynamic, Purpose: dataset.PurposeMPCSurrogate,
		AllNodes: delNodes, Controls: []string{"u1", "u2", "u3"}, Targets: []string{"y"}, HistorySteps: H, HorizonSteps: F, Stride: 1, BeatMs: 1000}
	b := &dataset.Bundle{Manifest: m}
	type run struct {
		id, split string
		rows      [][]float64
	}
	var runs []run
	for i, s := range specs {
		u := make([][]float64, s.T)
		for k := range u {
			u[k] = []float64{r.NormFloat64(), 2*r.NormFloat64() + 1, r.NormFloat64() - 0.5}
		}
		y := delSystem(u, noise, r)
		rows := make([][]float64, s.T)
		for k := range rows {
			rows[k] = []float64{u[k][0], u[k][1], u[k][2], y[k]}
			if s.nanEvery > 0 && k > 0 && k%s.nanEvery == 0 {
				rows[k][3] = math.NaN()
			}
		}
		runs = append(runs, run{id: "run-" + string(rune('a'+i)), split: s.split, rows: rows})
	}
	nAll := len(delNodes)
	for _, r := range runs {
		m.Runs = append(m.Runs, dataset.ManifestRun{RunID: r.id, Split: r.split, GridOffset: len(b.GridTS), GridSteps: len(r.rows)})
		for _, row := range r.rows {
			for _, v := range row {
				b.Grid = append(b.Grid, float32(v))
			}
			b.GridTS = append(b.GridTS, float64(len(b.GridTS))*1000)
		}
	}
	parts := map[string]*dataset.SplitPart{dataset.SplitTrain: &m.Split.Train, dataset.SplitVal: &m.Split.Val, dataset.SplitTest: &m.Split.Test}
	n := 0
	for _, s := range []string{dataset.SplitTrain, dataset.SplitVal, dataset.SplitTest} {
		p := parts[s]
		p.Offset = n
		for _, r := range runs {
			if r.split != s {
				continue
			}
			p.RunIDs = append(p.RunIDs, r.id)
			ts, vals, _ := b.RunGrid(r.id)
			T := len(ts)
			bad := func(k int) bool {
				for j := 0; j < nAll; j++ {
					if math.IsNaN(float64(vals[k*nAll+j])) {
						return true
					}
				}
				return false
			}
		windows:
			for w := H; w+F <= T; w++ {
				for k := w - H; k < w+F; k++ {
					if bad(k) {
						continue windows
					}
				}
				b.X = append(b.X, vals[(w-H)*nAll:w*nAll]...)
				for k := w; k < w+F; k++ {
					b.U = append(b.U, vals[k*nAll:k*nAll+3]...)
					b.Y = append(b.Y, vals[k*nAll+3])
				}
				for k := w - H; k < w+F; k++ {
					b.TS = append(b.TS, ts[k])
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

// one_step@1 estimates the per-input delays when nk is not given, records
// the sweep in the training info, and the fit with the estimated list
// recovers the truth coefficients within the noise; the default
// selection uses them too.
func TestOneStepEstimatesPerInputDelays(t *testing.T) {
	b := delBundle(t, 1, 0.02, []delSpec{{"train", 1500, 0}, {"val", 300, 0}, {"test", 300, 0}}, 8, 4)
	for _, params := range []string{`{"na":2,"nb":2}`, `{"maxOrder":4,"lambdas":[0]}`} {
		dir, err := linTrainNative(t, OneStep{}, b, params)
		if err != nil {
			t.Fatal(err)
		}
		var a arxArtifact
		linReadArtifact(t, dir, &a)
		if a.Training.Delays == nil {
			t.Fatalf("%s: no delay estimation recorded", params)
		}
		for _, s := range a.Training.Delays.Scores {
			t.Logf("%s: %s nk=%d one-step mean NRMSE %.4f", params, s.Input, s.NK, float64(s.Value))
		}
		if !slices.Equal(a.Training.Delays.Estimated, delTruthNK) || !slices.Equal(a.NK.List, delTruthNK) {
			t.Errorf("%s: estimated delays %v, artifact nk %v, truth %v", params, a.Training.Delays.Estimated, a.NK.List, delTruthNK)
		}
		t.Logf("%s: chosen %q by %q, nb %v nk %v", params, a.Training.Chosen, a.Training.Selection, a.NB.List, a.NK.List)
		if params[2] == 'm' {
			if !strings.Contains(a.Training.Selection, "cross-validation") || len(a.Training.Scores) != 4 || a.NA < 2 {
				t.Errorf("selection %q, %d scores, na %d", a.Training.Selection, len(a.Training.Scores), a.NA)
			}
			continue
		}
		m, err := a.model()
		if err != nil {
			t.Fatal(err)
		}
		A, B, c := m.Coefficients()
		if math.Abs(A[0].At(0, 0)-0.6) > 0.02 || math.Abs(A[1].At(0, 0)+0.2) > 0.02 || math.Abs(c[0]-0.5) > 0.05 {
			t.Errorf("a1 %.4f a2 %.4f c %.4f", A[0].At(0, 0), A[1].At(0, 0), c[0])
		}
		for a, nk := range delTruthNK {
			for j := range B { // B[j] multiplies u(k−j): the smallest delay is 0
				want := 0.0
				if i := j - nk; i >= 0 && i < 2 {
					want = delTruthB[a][i]
				}
				if got := B[j].At(0, a); math.Abs(got-want) > 0.02 {
					t.Errorf("b[u%d][lag %d] = %.4f, want %.4f", a+1, j, got, want)
				}
			}
		}
	}
}

// An integer nk keeps its meaning, and an artifact written with scalar nb
// and nk (the format before per-input orders) loads and predicts exactly
// like the per-input-list artifact of the same model.
func TestOneStepScalarNKAndOldArtifact(t *testing.T) {
	b := delBundle(t, 2, 0.02, []delSpec{{"train", 600, 0}, {"test", 200, 0}}, 6, 3)
	dir, err := linTrainNative(t, OneStep{}, b, `{"na":2,"nb":3,"nk":1}`)
	if err != nil {
		t.Fatal(err)
	}
	var a arxArtifact
	raw := linReadArtifact(t, dir, &a)
	if a.Training.Delays != nil || !slices.Equal(a.NK.List, []int{1, 1, 1}) || !slices.Equal(a.NB.List, []int{3, 3, 3}) || a.MaxLag != 3 {
		t.Fatalf("nk 1: delays %v, nb %v nk %v, maxLag %d", a.Training.Delays, a.NB.List, a.NK.List, a.MaxLag)
	}
	// the old format: scalars
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	obj["nb"], obj["nk"] = json.RawMessage(`3`), json.RawMessage(`1`)
	old, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	oldDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(oldDir, model.FileName), old, 0o644); err != nil {
		t.Fatal(err)
	}
	pNew, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
	if err != nil {
		t.Fatal(err)
	}
	pOld, err := model.Load(oldDir, b.Manifest, model.LoadOptions{Formats: Formats()})
	if err != nil {
		t.Fatalf("old scalar artifact: %v", err)
	}
	lo, hi := b.Split("test")
	d := b.Dims()
	x, u := b.X[lo*d.XLen():hi*d.XLen()], b.U[lo*d.ULen():hi*d.ULen()]
	yn, err := pNew.PredictBatch(context.Background(), x, u, hi-lo)
	if err != nil {
		t.Fatal(err)
	}
	yo, err := pOld.PredictBatch(context.Background(), x, u, hi-lo)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(yn, yo) {
		t.Error("the scalar artifact predicts differently")
	}
}

// A per-input list of the wrong length is refused before the job is
// queued, naming the field, and by the trainer itself.
func TestOneStepPerInputListLength(t *testing.T) {
	b := delBundle(t, 3, 0.02, []delSpec{{"train", 300, 0}, {"test", 100, 0}}, 6, 3)
	for _, c := range []struct {
		check  func() error
		params string
		field  string
	}{
		{func() error { return OneStep{}.CheckDatasetParams(json.RawMessage(`{"na":2,"nk":[1,0]}`), b.Manifest) }, `{"na":2,"nk":[1,0]}`, "params.nk"},
		{func() error {
			return OneStep{}.CheckDatasetParams(json.RawMessage(`{"na":2,"nb":[1,2,3,4]}`), b.Manifest)
		}, `{"na":2,"nb":[1,2,3,4]}`, "params.nb"},
		{func() error {
			return LinearStateSpace{}.CheckDatasetParams(json.RawMessage(`{"delays":[1]}`), b.Manifest)
		}, `{"order":2,"delays":[1]}`, "params.delays"},
	} {
		err := c.check()
		var ce *core.Error
		if !errors.As(err, &ce) || ce.Field != c.field || ce.Code != core.CodeInvalidArgument {
			t.Errorf("%s: %v, want AML_INVALID_ARGUMENT on %s", c.params, err, c.field)
		}
		var tr trainer.Trainer = OneStep{}
		if c.field == "params.delays" {
			tr = LinearStateSpace{}
		}
		if _, err := linTrainNative(t, tr, b, c.params); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("train %s: %v", c.params, err)
		}
	}
	if err := (OneStep{}).CheckDatasetParams(json.RawMessage(`{"nk":[1,1,0],"nb":2}`), b.Manifest); err != nil {
		t.Errorf("a list of the right length: %v", err)
	}
}

// A short record (300 samples cut into pieces by missing values) with
// order 0 and maxOrder 10 trains: the orders the data cannot support are
// skipped and reported, with block cross-validation and with the val
// selection.
func TestLinearStateSpaceShortRecordShrinksGrid(t *testing.T) {
	b := delBundle(t, 4, 0.02, []delSpec{{"train", 300, 30}, {"test", 100, 0}}, 8, 4)
	for _, params := range []string{`{"order":0,"maxOrder":10}`, `{"order":0,"maxOrder":10,"selection":"val"}`} {
		dir, err := linTrainNative(t, LinearStateSpace{}, b, params)
		if err != nil {
			t.Fatalf("%s: %v", params, err)
		}
		var a ssArtifact
		linReadArtifact(t, dir, &a)
		skipped := 0
		for _, s := range a.Training.Scores {
			if s.Skipped != "" {
				skipped++
				t.Logf("%s: order %d skipped: %s", params, s.Order, s.Skipped)
			} else {
				t.Logf("%s: order %d mean NRMSE %.4f", params, s.Order, float64(s.Value))
			}
		}
		t.Logf("%s: chose %s (%s)", params, a.Training.Chosen, a.Training.Selection)
		if len(a.Training.Scores) != 10 || skipped == 0 || a.Order > 10-skipped {
			t.Errorf("%s: %d scores, %d skipped, order %d", params, len(a.Training.Scores), skipped, a.Order)
		}
	}
}

// linear_state_space@1 with explicit input delays: the window predictor,
// the run simulator and the twin path (StartWindow/Continue) agree.
func TestLinearStateSpaceDelays(t *testing.T) {
	b := delBundle(t, 5, 0.01, []delSpec{{"train", 800, 0}, {"val", 200, 0}, {"test", 200, 0}}, 8, 4)
	var rms [2]float64
	// with D: u3 acts at once (and so do u1, u2 once delayed by one step)
	for i, params := range []string{`{"order":2,"feedthrough":true}`, `{"order":2,"feedthrough":true,"delays":[1,1,0]}`} {
		dir, err := linTrainNative(t, LinearStateSpace{}, b, params)
		if err != nil {
			t.Fatal(err)
		}
		var a ssArtifact
		linReadArtifact(t, dir, &a)
		p, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := b.Split("test")
		rms[i] = linWindowRMSE(t, b, p, lo, hi)[0]
		t.Logf("%s: delays %v, test window RMSE %.4f", params, a.Delays, rms[i])
		if i == 1 && !slices.Equal(a.Delays, delTruthNK) {
			t.Errorf("artifact delays %v", a.Delays)
		}
		// the twin path equals PredictBatch window by window
		lt, ok := AsLinearTwin(p)
		if !ok {
			t.Fatal("not a LinearTwin")
		}
		d := b.Dims()
		for w := lo; w < lo+20; w++ {
			pred, err := p.PredictBatch(context.Background(), b.X[w*d.XLen():(w+1)*d.XLen()], b.U[w*d.ULen():(w+1)*d.ULen()], 1)
			if err != nil {
				t.Fatal(err)
			}
			u, y := make([][]float64, d.H), make([][]float64, d.H)
			for k := range u {
				row := b.X[w*d.XLen()+k*d.XCols : w*d.XLen()+(k+1)*d.XCols]
				u[k] = []float64{float64(row[0]), float64(row[1]), float64(row[2])}
				y[k] = []float64{float64(row[3])}
			}
			fu := make([][]float64, d.F)
			for k := range fu {
				row := b.U[w*d.ULen()+k*d.UCols : w*d.ULen()+(k+1)*d.UCols]
				fu[k] = []float64{float64(row[0]), float64(row[1]), float64(row[2])}
			}
			st, err := lt.StartWindow(u, y)
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]float64, d.F)
			if err := lt.Continue(st, fu, dst); err != nil {
				t.Fatal(err)
			}
			for k := range dst {
				if math.Abs(dst[k]-float64(pred[k])) > 1e-4*(1+math.Abs(dst[k])) {
					t.Fatalf("%s window %d step %d: twin %.6f, PredictBatch %.6f", params, w, k, dst[k], pred[k])
				}
			}
		}
	}
	if rms[1] > 0.05 {
		t.Errorf("with the true delays the test window RMSE is %.4f (noise 0.01)", rms[1])
	}
}
