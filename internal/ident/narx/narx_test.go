package narx

import (
	"context"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// simulated is y(t) = 0.6 y(t−1) + u(t−1) − 0.3 u(t−1)³ + e, u uniform in
// [−1.5, 1.5] held for 3 steps.
func simulated(T int, seed uint64, noise float64) (y, u [][]float64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	y, u = make([][]float64, T), make([][]float64, T)
	v := 0.0
	for t := 0; t < T; t++ {
		if t%3 == 0 {
			v = 3*rng.Float64() - 1.5
		}
		u[t] = []float64{v}
		y[t] = []float64{0}
		if t > 0 {
			p := u[t-1][0]
			y[t][0] = 0.6*y[t-1][0] + p - 0.3*p*p*p + noise*rng.NormFloat64()
		}
	}
	return y, u
}

func freeRunRMSE(m *Model, y, u [][]float64) float64 {
	sim := m.Simulate(u, y[:m.Lag()])
	s := 0.0
	for t := m.Lag(); t < len(y); t++ {
		e := sim[t][0] - y[t][0]
		s += e * e
	}
	return math.Sqrt(s / float64(len(y)-m.Lag()))
}

func testConfig() Config {
	return Config{NA: 2, NB: 2, NK: 1, Hidden: []int{16}, Epochs: 40, Batch: 32, LR: 3e-3, Seed: 7, Patience: 15}
}

// TestBeatsARX: on a nonlinear system the NARX model's free run on fresh
// data is far better than its ARX initialisation's, and on the
// validation block it is never worse than the ARX model.
func TestBeatsARX(t *testing.T) {
	y, u := simulated(3000, 1, 0.01)
	m, rep, err := Fit(context.Background(), [][][]float64{y}, [][][]float64{u}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if rep.ValNRMSE > rep.ARXValNRMSE {
		t.Fatalf("validation NRMSE %g worse than the ARX start %g", rep.ValNRMSE, rep.ARXValNRMSE)
	}
	arx := *m
	arx.scratch = nil
	arx.Layers = nil
	for _, l := range m.Layers {
		arx.Layers = append(arx.Layers, Layer{In: l.In, Out: l.Out, W: make([]float64, len(l.W)), B: make([]float64, len(l.B))})
	}
	yt, ut := simulated(2000, 2, 0)
	rn, ra := freeRunRMSE(m, yt, ut), freeRunRMSE(&arx, yt, ut)
	t.Logf("free-run RMSE: NARX %.4f, ARX %.4f; report %+v", rn, ra, rep)
	if !(rn < 0.5*ra) {
		t.Fatalf("NARX free-run RMSE %g not below half the ARX's %g", rn, ra)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestDeterministic: the same seed gives the same weights.
func TestDeterministic(t *testing.T) {
	y, u := simulated(1500, 3, 0.01)
	cfg := testConfig()
	cfg.Epochs = 5
	fit := func() *Model {
		m, _, err := Fit(context.Background(), [][][]float64{y}, [][][]float64{u}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := fit(), fit()
	if !reflect.DeepEqual(a.Layers, b.Layers) || !reflect.DeepEqual(a.Lin, b.Lin) {
		t.Fatal("two fits with one seed differ")
	}
}

// TestFineTune: simulation-error fine-tuning keeps the never-worse
// guarantee, is deterministic for a seed, and on this system improves on
// the one-step epochs' validation free run or keeps them.
func TestFineTune(t *testing.T) {
	y, u := simulated(2000, 4, 0.01)
	cfg := testConfig()
	cfg.Epochs, cfg.FineTuneEpochs, cfg.SeqLen, cfg.SeqBatch = 10, 10, 20, 8
	fit := func(c Config) (*Model, *Report) {
		m, rep, err := Fit(context.Background(), [][][]float64{y}, [][][]float64{u}, c)
		if err != nil {
			t.Fatal(err)
		}
		return m, rep
	}
	a, rep := fit(cfg)
	b, _ := fit(cfg)
	if !reflect.DeepEqual(a.Layers, b.Layers) {
		t.Fatal("two fine-tuned fits with one seed differ")
	}
	one := cfg
	one.FineTuneEpochs = 0
	_, rep1 := fit(one)
	t.Logf("one-step only %+v; fine-tuned %+v", rep1, rep)
	if rep.FineTuneEpochs == 0 || rep.ValNRMSE > rep1.ValNRMSE || rep.ValNRMSE > rep.ARXValNRMSE {
		t.Fatalf("fine-tuning: %+v after one-step %+v", rep, rep1)
	}
}

// TestSequenceGradient: the back-propagated simulation-error gradient
// matches central finite differences of the loss.
func TestSequenceGradient(t *testing.T) {
	y, u := simulated(200, 5, 0.01)
	m := &Model{NA: 2, NB: 2, NK: 1, NY: 1, NU: 1, UMean: []float64{0}, UStd: []float64{1}, YMean: []float64{0}, YStd: []float64{1},
		Lin: [][]float64{{0.5, 0.1, 0.8, -0.1, 0.05}}}
	rng := rand.New(rand.NewPCG(1, 2))
	nt := newNet([]int{m.Dim(), 5, 4, 1})
	for i := range nt.p {
		nt.p[i] = 0.4 * rng.NormFloat64()
	}
	nt.into(m)
	st := newSimTrainer(newAdam(nt, 1e-3, 1, 0, rng), m, 15, 1)
	const t0 = 20
	loss := func() float64 {
		l, ok := st.sequence(y, u, t0, 0)
		if !ok {
			t.Fatal("simulation not finite")
		}
		return l
	}
	clear(st.a.g)
	L := float64(st.L)
	if _, ok := st.sequence(y, u, t0, 2/L); !ok {
		t.Fatal("simulation not finite")
	}
	g := append([]float64(nil), st.a.g...)
	for i := range nt.p {
		p0 := nt.p[i]
		const h = 1e-6
		nt.p[i] = p0 + h
		lp := loss()
		nt.p[i] = p0 - h
		lm := loss()
		nt.p[i] = p0
		num := (lp - lm) / (2 * h) / L
		if math.Abs(num-g[i]) > 1e-5*(1+math.Abs(num)) {
			t.Fatalf("parameter %d: back-propagated %g, finite difference %g", i, g[i], num)
		}
	}
}
