package trainers

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/model"
)

// narxSystem is a two-input, two-output nonlinear process with small
// output noise (σ 0.02):
//
//	y1(t) = 0.6 y1(t−1) + tanh(u1(t−1)) + 0.2 u2(t−1)
//	y2(t) = 0.5 y2(t−1) + 0.3 u1(t−1)² − 0.1 y1(t−1)
func narxSystem(u [][]float64, r *rand.Rand) [][]float64 {
	x := make([][]float64, len(u))
	for k := range x {
		x[k] = []float64{0, 0}
		if k > 0 {
			p, q := x[k-1], u[k-1]
			x[k] = []float64{0.6*p[0] + math.Tanh(q[0]) + 0.2*q[1], 0.5*p[1] + 0.3*q[0]*q[0] - 0.1*p[0]}
		}
	}
	out := make([][]float64, len(u))
	for k := range out {
		out[k] = []float64{x[k][0] + 0.02*r.NormFloat64(), x[k][1] + 0.02*r.NormFloat64()}
	}
	return out
}

func narxBundle(t *testing.T) (*dataset.Bundle, []linSynRun) {
	runs := linSynRuns(11, narxSystem, []linSynSpec{{dataset.SplitTrain, 1500, nil}, {dataset.SplitTrain, 1500, []int{700}}, {dataset.SplitVal, 300, nil}, {dataset.SplitTest, 800, nil}})
	return linSynBundle(t, runs, 4, 3), runs
}

const narxTestParams = `{"na":2,"nb":2,"nk":1,"hidden":[16],"epochs":40,"batch":32,"lr":0.003,"patience":15}`

// narx_mlp@1 on a nonlinear process: a loadable artifact that beats ARX
// (one_step@1 of the same orders) in free run on the test run, never
// worse than its ARX start on the validation block, the same bytes for
// the same seed, and a run simulator the platform's free run uses.
func TestNARXMLPTrains(t *testing.T) {
	b, runs := narxBundle(t)
	dir, err := linTrainNative(t, NARXMLP{}, b, narxTestParams)
	if err != nil {
		t.Fatal(err)
	}
	var a narxArtifact
	raw := linReadArtifact(t, dir, &a)
	if a.Format != FormatNARX || a.Training == nil || len(a.Layers) != 2 {
		t.Fatalf("artifact %.300s", raw)
	}
	if a.Training.ValNRMSE > a.Training.ARXValNRMSE {
		t.Fatalf("validation free-run NRMSE %g worse than the ARX start %g", a.Training.ValNRMSE, a.Training.ARXValNRMSE)
	}
	dir2, err := linTrainNative(t, NARXMLP{}, b, narxTestParams)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, linReadArtifact(t, dir2, nil)) {
		t.Fatal("two trainings with one seed wrote different artifacts")
	}
	p, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
	if err != nil {
		t.Fatal(err)
	}
	arxDir, err := linTrainNative(t, OneStep{}, b, `{"na":2,"nb":2,"nk":1,"select":false}`)
	if err != nil {
		t.Fatal(err)
	}
	arx, err := model.Load(arxDir, b.Manifest, model.LoadOptions{Formats: Formats()})
	if err != nil {
		t.Fatal(err)
	}
	test := runs[3]
	rn, ra := freeRunRMSE(t, p, test, 4), freeRunRMSE(t, arx, test, 4)
	t.Logf("free-run RMSE on the test run: NARX %.4f, ARX %.4f; training %+v", rn, ra, *a.Training)
	for o := range rn {
		if !(rn[o] < 0.7*ra[o]) {
			t.Errorf("output %d: NARX free-run RMSE %.4f not below 0.7 × ARX %.4f", o, rn[o], ra[o])
		}
	}
	// windows: the window predictor is the free run over the horizon
	if w := linWindowRMSE(t, b, p, 0, b.Manifest.Split.Train.Count); !(w[0] < 0.2 && w[1] < 0.2) {
		t.Errorf("window RMSE %v", w)
	}
	fr, err := eval.FreeRun(t.Context(), b, p.(eval.RunSimulator), dataset.SplitTest, 4)
	if err != nil {
		t.Fatal(err)
	}
	if n := fr.Targets[0].NRMSE; !(n < 0.3) {
		t.Errorf("platform free-run NRMSE %g", n)
	}
}

// A tampered artifact is refused at load.
func TestNARXLoaderRefusesBadShapes(t *testing.T) {
	b, _ := narxBundle(t)
	dir, err := linTrainNative(t, NARXMLP{}, b, `{"na":1,"nb":1,"hidden":[3],"epochs":1}`)
	if err != nil {
		t.Fatal(err)
	}
	var a narxArtifact
	linReadArtifact(t, dir, &a)
	a.Layers[0].W = a.Layers[0].W[:2]
	bad := t.TempDir()
	if err := writeJSON(bad+"/"+model.FileName, &a); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(bad, b.Manifest, model.LoadOptions{Formats: Formats()}); err == nil {
		t.Fatal("a layer with missing rows loaded")
	}
	if _, err := linTrainNative(t, NARXMLP{}, b, `{"na":9}`); err == nil {
		t.Fatal("a lag longer than the history accepted")
	}
}

// The twin's view of a narx_mlp@1 model (HistoryTwin): a start from a
// dataset window's H rows continued by one roller over the window's
// future controls is PredictBatch of the window, to the last float32 bit,
// for both outputs, without spread; the roller is reused across windows.
func TestNARXHistoryTwinMatchesPredictBatch(t *testing.T) {
	b, _ := narxBundle(t)
	dir, err := linTrainNative(t, NARXMLP{}, b, `{"na":2,"nb":3,"nk":1,"hidden":[6],"epochs":3,"fineTuneEpochs":1,"seqLen":8}`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
	if err != nil {
		t.Fatal(err)
	}
	ht, ok := AsHistoryTwin(p)
	if !ok {
		t.Fatalf("%T is no HistoryTwin", p)
	}
	if _, ok := AsLinearTwin(p); ok {
		t.Fatal("a NARX model also passes for a linear twin")
	}
	if ht.WindowEstimator() != "narx-history/1" || ht.Members() != 1 {
		t.Fatalf("estimator %s, %d members", ht.WindowEstimator(), ht.Members())
	}
	historyTwinMatchesPredictBatch(t, b, p, ht, false)
}

// historyTwinMatchesPredictBatch: a start from a dataset window's H rows
// continued by one roller over the window's future controls is
// PredictBatch of the window, to the last float32 bit, for both outputs;
// the spread is 0 without an ensemble (spread false), non-negative and
// somewhere positive with one; the roller is reused across windows; what
// it cannot start from or run is refused.
func historyTwinMatchesPredictBatch(t *testing.T, b *dataset.Bundle, p model.Predictor, ht HistoryTwin, spreads bool) {
	t.Helper()
	man, d := b.Manifest, b.Dims()
	in, out := ht.LinearLayout()
	uCol := map[string]int{}
	for j, n := range man.Controls {
		uCol[n] = j
	}
	r := ht.NewHistoryRoller()
	positive := false
	n := b.Manifest.Split.Train.Count
	for _, w := range []int{0, n / 2, n - 1} {
		xw := b.X[w*d.XLen() : (w+1)*d.XLen()]
		uw := b.U[w*d.ULen() : (w+1)*d.ULen()]
		U, Y, Uf := make([][]float64, d.H), make([][]float64, d.H), make([][]float64, d.F)
		for k := 0; k < d.H; k++ {
			for _, c := range in {
				U[k] = append(U[k], float64(xw[k*d.XCols+c.Col]))
			}
			for _, c := range out {
				Y[k] = append(Y[k], float64(xw[k*d.XCols+c.Col]))
			}
		}
		for f := 0; f < d.F; f++ {
			for _, c := range in {
				Uf[f] = append(Uf[f], float64(uw[f*d.UCols+uCol[man.AllNodes[c.Col]]]))
			}
		}
		s, err := ht.StartHistory(U, Y)
		if err != nil {
			t.Fatal(err)
		}
		ny := len(out)
		y, spread := make([]float64, d.F*ny), make([]float64, d.F*ny)
		for i := range spread {
			spread[i] = -1 // overwritten
		}
		fail, err := r.Roll(s, Uf, y, spread)
		if err != nil || fail != d.F {
			t.Fatalf("window %d: fail %d, %v", w, fail, err)
		}
		want, err := p.PredictBatch(t.Context(), xw, uw, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range want {
			if float32(y[i]) != v || (!spreads && spread[i] != 0) || !(spread[i] >= 0) {
				t.Fatalf("window %d value %d: rollout %v (spread %v), PredictBatch %v", w, i, y[i], spread[i], v)
			}
			positive = positive || spread[i] > 0
		}
	}
	if spreads && !positive {
		t.Fatal("an ensemble's members never disagree")
	}
	// what it cannot start from or run is refused
	bad := [][]float64{{math.NaN(), 0}}
	if _, err := ht.StartHistory(bad, [][]float64{{0, 0}}); err == nil {
		t.Fatal("a NaN input row started the model")
	}
	s, err := ht.StartHistory([][]float64{{0, 0}}, [][]float64{{0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Roll(s, bad, make([]float64, 2), make([]float64, 2)); err == nil {
		t.Fatal("a NaN control rolled out")
	}
	if _, err := r.Roll(&HistoryStart{Impl: "x"}, [][]float64{{0, 0}}, make([]float64, 2), make([]float64, 2)); err == nil {
		t.Fatal("a start of another class rolled out")
	}
}
