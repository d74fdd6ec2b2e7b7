package trainers

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/polynomial"
	"github.com/aml-project/aml/internal/model"
)

// oeSystem is a two-input, two-output output-error process (one pole per
// output, u1 delayed 1 step and u2 2 steps) with white output noise
// (σ 0.2) only.
func oeSystem(u [][]float64, r *rand.Rand) [][]float64 {
	o := polynomial.OEOrders{NF: 1, NB: 2, NK: []int{1, 2}}
	m1 := &polynomial.OE{Orders: o, F: []float64{-0.8}, B: [][]float64{{0.4, 0.2}, {0.3, 0.1}}, C: 1}
	m2 := &polynomial.OE{Orders: o, F: []float64{-0.6}, B: [][]float64{{-0.2, 0.1}, {0.5, 0}}, C: -1}
	y1, y2 := m1.Simulate(u, []float64{1}), m2.Simulate(u, []float64{-1})
	out := make([][]float64, len(u))
	for k := range out {
		out[k] = []float64{y1[k] + 0.2*r.NormFloat64(), y2[k] + 0.2*r.NormFloat64()}
	}
	return out
}

// output_error@1 on an output-error process: trains through the trainer,
// writes a loadable artifact whose windows and runs are predicted as the
// polynomial model simulates them, and recovers the poles.
func TestOutputErrorTrains(t *testing.T) {
	runs := linSynRuns(5, oeSystem, []linSynSpec{{dataset.SplitTrain, 600, nil}, {dataset.SplitTrain, 600, []int{200}}, {dataset.SplitVal, 300, nil}, {dataset.SplitTest, 300, nil}})
	b := linSynBundle(t, runs, 4, 3)
	dir, err := linTrainNative(t, OutputError{}, b, `{"nf":1,"nb":2,"nk":[1,2]}`)
	if err != nil {
		t.Fatal(err)
	}
	var a oeArtifact
	raw := linReadArtifact(t, dir, &a)
	if a.Format != FormatOE || len(a.Models) != 2 {
		t.Fatalf("artifact %s", raw)
	}
	for k, want := range []float64{-0.8, -0.6} {
		m := a.Models[k]
		if sd := math.Sqrt(m.Cov[0][0]); math.Abs(m.F[0]-want) > 4*sd || sd > 0.05 {
			t.Errorf("%s pole %.4f ± %.4f, truth %v", m.Output, m.F[0], sd, want)
		}
	}
	p, err := model.Load(dir, b.Manifest, model.LoadOptions{Formats: Formats()})
	if err != nil {
		t.Fatal(err)
	}
	rmse := linWindowRMSE(t, b, p, 0, b.Manifest.Split.Train.Count)
	for k, v := range rmse {
		if !(v < 0.35) { // noise σ 0.2 plus a 3-step free run from noisy outputs
			t.Errorf("window RMSE of %s %.4f", b.Manifest.Targets[k], v)
		}
	}
	sim, ok := p.(interface {
		SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error)
	})
	if !ok {
		t.Fatal("no run simulator")
	}
	in, out := make([][]float64, 50), make([][]float64, 50)
	for k := range in {
		in[k], out[k] = runs[3].rows[k][:2], runs[3].rows[k][3:5]
	}
	if _, err := sim.SimulateRun(in, out, 2); err != nil {
		t.Fatal(err)
	}
	// a wrong delay count is refused; a tampered artifact is refused at load
	if _, err := linTrainNative(t, OutputError{}, b, `{"nk":[1]}`); err == nil {
		t.Fatal("one delay for two controls accepted")
	}
	bad := filepath.Join(t.TempDir(), model.FileName)
	if err := os.WriteFile(bad, []byte(`{"format":"aml.oe/1","inputs":["u1","u2"],"outputs":["y1","y2"],"nf":1,"nb":2,"models":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(filepath.Dir(bad), b.Manifest, model.LoadOptions{Formats: Formats()}); err == nil {
		t.Fatal("an artifact without models loaded")
	}
}

// TestPolyLoadRefusesShapes: an output-error or Box–Jenkins artifact
// whose coefficient counts do not match its orders is refused at load,
// naming the model and what is wrong.
func TestPolyLoadRefusesShapes(t *testing.T) {
	const oeHead = `{"format":"aml.oe/1","inputs":["u1","u2"],"outputs":["y1"],"nf":1,"nb":2,"models":[`
	const bjHead = `{"format":"aml.bj/1","inputs":["u1","u2"],"outputs":["y1"],"nf":1,"nb":2,"nc":1,"nd":1,"models":[`
	for _, c := range []struct {
		name string
		load func([]byte, string, *dataset.Manifest) (model.Predictor, error)
		raw  string
		says string
	}{
		{"oe poles", loadOE, oeHead + `{"output":"y1","nk":[1,1],"f":[0.5,0.1],"b":[[1,2],[3,4]]}]}`, "model of y1: 2 poles, 2 numerators, 2 delays for nf 1 and 2 inputs"},
		{"oe numerator", loadOE, oeHead + `{"output":"y1","nk":[1,1],"f":[0.5],"b":[[1,2],[3]]}]}`, "model of y1: a numerator of 1 coefficients, nb 2"},
		{"bj d", loadBJ, bjHead + `{"output":"y1","nk":[1,1],"f":[0.5],"b":[[1,2],[3,4]],"c":[0.1],"d":[]}]}`, "model of y1: 0 d coefficients, want 1"},
		{"bj numerator", loadBJ, bjHead + `{"output":"y1","nk":[1,1],"f":[0.5],"b":[[1],[3,4]],"c":[0.1],"d":[0.2]}]}`, "model of y1: a numerator of 1 coefficients, nb 2"},
	} {
		_, err := c.load([]byte(c.raw), "", nil)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.says)
		}
	}
}
