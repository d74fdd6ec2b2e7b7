package trainers

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/ident/nss"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/trainer"
)

const nssTestParams = `{"order":3,"na":3,"nb":3,"hidden":[16],"feedthrough":false,"epochs":50,"seqLen":20,"batch":8,"lr":0.005,"patience":20}`

// neural_state_space@1 on a nonlinear process: a loadable artifact that
// beats the linear state-space model of the same order (by half) in free run on
// the test run, never worse than its linear start on the validation
// block, the same bytes for the same seed, and a run simulator the
// platform's free run uses.
func TestNeuralStateSpaceTrains(t *testing.T) {
	b, runs := narxBundle(t)
	dir, err := linTrainNative(t, NeuralStateSpace{}, b, nssTestParams)
	if err != nil {
		t.Fatal(err)
	}
	var a nssArtifact
	raw := linReadArtifact(t, dir, &a)
	if a.Format != FormatNSS || len(a.Members) != 1 || a.Members[0].Training == nil || !a.Members[0].Training.LinearInit {
		t.Fatalf("artifact %.300s", raw)
	}
	tr := a.Members[0].Training
	if tr.ValNRMSE > tr.InitValNRMSE {
		t.Fatalf("validation free-run NRMSE %g worse than the linear start %g", tr.ValNRMSE, tr.InitValNRMSE)
	}
	dir2, err := linTrainNative(t, NeuralStateSpace{}, b, nssTestParams)
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
	linDir, err := linTrainNative(t, LinearStateSpace{}, b, `{"order":3,"refine":true,"initSteps":4}`)
	if err != nil {
		t.Fatal(err)
	}
	lin, err := model.Load(linDir, b.Manifest, model.LoadOptions{Formats: Formats()})
	if err != nil {
		t.Fatal(err)
	}
	test := runs[3]
	rn, rl := freeRunRMSE(t, p, test, 4), freeRunRMSE(t, lin, test, 4)
	t.Logf("free-run RMSE on the test run: neural state space %.4f, linear %.4f; training %+v", rn, rl, *tr)
	for o := range rn {
		if !(rn[o] < 0.5*rl[o]) {
			t.Errorf("output %d: neural free-run RMSE %.4f not below 0.5 × linear %.4f", o, rn[o], rl[o])
		}
	}
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

// A tampered artifact is refused at load; an encoder longer than the
// dataset's history is refused before training.
func TestNSSLoaderRefusesBadShapes(t *testing.T) {
	b, _ := narxBundle(t)
	dir, err := linTrainNative(t, NeuralStateSpace{}, b, `{"order":1,"na":1,"nb":1,"hidden":[3],"epochs":1,"refine":false,"ensemble":2}`)
	if err != nil {
		t.Fatal(err)
	}
	var a nssArtifact
	raw := linReadArtifact(t, dir, &a)
	if len(a.Members) != 2 || a.Members[1].Seed != a.Members[0].Seed+1 {
		t.Fatalf("members %d", len(a.Members))
	}
	if _, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()}); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(a *nssArtifact){
		"short params":     func(a *nssArtifact) { a.Members[1].Params = a.Members[1].Params[:len(a.Members[1].Params)-1] },
		"zero scale":       func(a *nssArtifact) { a.Members[0].YStd[0] = 0 },
		"huge order":       func(a *nssArtifact) { a.Order = 1 << 40 },
		"negative hidden":  func(a *nssArtifact) { a.Hidden = []int{-3} },
		"missing mean":     func(a *nssArtifact) { a.Members[1].UMean = nil },
		"feedthrough flip": func(a *nssArtifact) { a.Feedthrough = !a.Feedthrough },
		"no member":        func(a *nssArtifact) { a.Members = nil },
	} {
		var c nssArtifact
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		bad(&c)
		d := t.TempDir()
		if err := writeJSON(d+"/"+model.FileName, &c); err != nil {
			t.Fatal(err)
		}
		if _, err := model.Load(d, b.Manifest, model.LoadOptions{Formats: Formats()}); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	if _, err := linTrainNative(t, NeuralStateSpace{}, b, `{"na":9}`); err == nil {
		t.Fatal("an encoder longer than the history accepted")
	}
}

// The twin's view of a neural_state_space@1 ensemble (HistoryTwin): the
// encoder's start from a dataset window's H rows continued by one roller
// is PredictBatch of the window (the members' mean) to the last float32
// bit, with the members' spread; a model is not also a linear twin.
func TestNSSHistoryTwinMatchesPredictBatch(t *testing.T) {
	b, _ := narxBundle(t)
	dir, err := linTrainNative(t, NeuralStateSpace{}, b, `{"order":2,"na":3,"nb":2,"hidden":[6],"epochs":2,"seqLen":10,"batch":8,"linearInit":false,"ensemble":2}`)
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
		t.Fatal("a neural state-space model also passes for a linear twin")
	}
	if ht.WindowEstimator() != "nss-encoder/1" || ht.Members() != 2 {
		t.Fatalf("estimator %s, %d members", ht.WindowEstimator(), ht.Members())
	}
	historyTwinMatchesPredictBatch(t, b, p, ht, true)
}

// FuzzLoadNSS: the loader never panics on any bytes, and a model it
// accepts simulates a run without panicking.
func FuzzLoadNSS(f *testing.F) {
	man := &dataset.Manifest{FormatVersion: dataset.FormatVersion, Kind: dataset.KindDynamic, Purpose: dataset.PurposeMPCSurrogate,
		AllNodes: linSynNodes, Controls: []string{"u1", "u2"}, Targets: []string{"y1", "y2"}, HistorySteps: 4, HorizonSteps: 3, Stride: 1, BeatMs: 1000}
	m := nss.Model{N: 1, NA: 1, NB: 1, NY: 2, NU: 2, Hidden: []int{1}}
	good, _ := json.Marshal(nssArtifact{Format: FormatNSS, Inputs: []string{"u1", "u2"}, Outputs: []string{"y1", "y2"}, Order: 1, NA: 1, NB: 1, Hidden: []int{1},
		Members: []nssMember{{UMean: []float64{0, 0}, UStd: []float64{1, 1}, YMean: []float64{0, 0}, YStd: []float64{1, 1}, Params: make([]float64, m.NumParams())}}})
	if _, err := loadNSS(good, "", man); err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format":"aml.nss/1","order":1e9}`))
	f.Add([]byte(`{"format":"aml.nss/1","hidden":[1,1,1,1,1,1,1,1,1]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := loadNSS(b, "", man)
		if err != nil {
			return
		}
		rs := p.(eval.RunSimulator)
		in := [][]float64{{0, 1}, {1, 0}, {0.5, 0.5}, {1, 1}}
		out := [][]float64{{0, 0}, {1, 1}, {0, 0}, {1, 1}}
		_, _ = rs.SimulateRun(in, out, 2)
	})
}

// The select param reaches the fit: record scores the epoch on another
// block than tail (another starting figure), and an unknown criterion is
// refused before training.
func TestNSSSelectParam(t *testing.T) {
	b, _ := narxBundle(t)
	start := func(sel string) float64 {
		dir, err := linTrainNative(t, NeuralStateSpace{}, b, `{"order":3,"na":3,"nb":3,"hidden":[8],"feedthrough":false,"epochs":2,"seqLen":20,"batch":8,"select":"`+sel+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		var a nssArtifact
		linReadArtifact(t, dir, &a)
		return a.Members[0].Training.InitValNRMSE
	}
	if r, tl := start("record"), start("tail"); r == tl || !(r > 0) || !(tl > 0) {
		t.Fatalf("start figures record %g, tail %g", r, tl)
	}
	if _, err := linTrainNative(t, NeuralStateSpace{}, b, `{"order":3,"na":3,"nb":3,"epochs":2,"select":"test"}`); err == nil {
		t.Fatal("select test accepted")
	}
}

// lrLinear and lrTransition: 0, a negative or a non-numeric factor is
// refused by the schema (job.submit) and by the trainer itself with
// AML_INVALID_ARGUMENT on the field; the defaults (absent, or given as
// 1) train the same weights for one seed; a small factor reaches the
// fit (other weights).
func TestNSSLRFactorParams(t *testing.T) {
	s := NeuralStateSpace{}.ParamSchema()
	b, _ := narxBundle(t)
	for _, c := range []struct{ name, val string }{
		{"lrLinear", "0"}, {"lrLinear", "-0.5"}, {"lrTransition", "0"}, {"lrTransition", "-1e-5"}, {"lrLinear", `"1"`},
	} {
		raw := `{"` + c.name + `":` + c.val + `}`
		var ae *core.Error
		if err := trainer.ValidateParams("neural_state_space@1", s, json.RawMessage(raw)); !errors.As(err, &ae) || ae.Code != core.CodeInvalidArgument || ae.Field != "params."+c.name {
			t.Errorf("schema, %s: %v", raw, err)
		}
		if c.val[0] == '"' {
			continue
		}
		_, err := linTrainNative(t, NeuralStateSpace{}, b, `{"order":1,"na":1,"nb":1,"hidden":[3],"epochs":1,`+raw[1:])
		if !errors.As(err, &ae) || ae.Code != core.CodeInvalidArgument || ae.Field != "params."+c.name {
			t.Errorf("trainer, %s: %v", raw, err)
		}
	}
	if err := trainer.ValidateParams("neural_state_space@1", s, json.RawMessage(`{"lrLinear":1e-5,"lrTransition":2}`)); err != nil {
		t.Errorf("factors 1e-5 and 2 refused: %v", err)
	}
	params := func(p string) []float64 {
		t.Helper()
		dir, err := linTrainNative(t, NeuralStateSpace{}, b, p)
		if err != nil {
			t.Fatal(err)
		}
		var a nssArtifact
		linReadArtifact(t, dir, &a)
		return a.Members[0].Params
	}
	const base = `{"order":3,"na":3,"nb":3,"hidden":[8],"feedthrough":false,"epochs":5,"seqLen":20,"batch":8,"lr":0.005,"patience":0`
	def := params(base + `}`)
	if ones := params(base + `,"lrLinear":1,"lrTransition":1}`); !slices.Equal(def, ones) {
		t.Error("lrLinear and lrTransition 1 trained other weights than the defaults")
	}
	if small := params(base + `,"lrLinear":1e-4,"lrTransition":1e-4}`); slices.Equal(def, small) {
		t.Error("factors 1e-4 trained the default weights")
	}
}
