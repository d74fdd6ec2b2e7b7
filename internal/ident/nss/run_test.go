package nss

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randomModel(n, na, nb int, ft bool, seed uint64) *Model {
	rng := rand.New(rand.NewPCG(seed, 3))
	m := &Model{N: n, NA: na, NB: nb, NY: 2, NU: 2, Feedthrough: ft, Hidden: []int{5},
		UMean: []float64{0.5, -1}, UStd: []float64{2, 0.5}, YMean: []float64{1, 3}, YStd: []float64{0.7, 4}}
	m.P = make([]float64, m.NumParams())
	for i := range m.P {
		m.P[i] = 0.3 * rng.NormFloat64()
	}
	if !ft {
		clear(m.P[m.layout().oD:m.layout().oE])
	}
	return m
}

func randomRows(n, w int, rng *rand.Rand) [][]float64 {
	r := make([][]float64, n)
	for k := range r {
		r[k] = make([]float64, w)
		for j := range r[k] {
			r[k][j] = rng.NormFloat64()
		}
	}
	return r
}

// TestContinueMatchesSimulate: a start from a window's rows continued by
// a runner is Ensemble.Simulate of the window and the continuation, bit
// for bit — one member and three, with and without feedthrough, windows
// shorter and longer than the encoder's, one runner reused over
// continuations of different lengths; the spread is the members'
// standard deviation (0 for one).
func TestContinueMatchesSimulate(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, c := range []struct {
		n, na, nb, H, K int
		ft              bool
	}{{2, 3, 2, 8, 1, true}, {3, 2, 3, 5, 3, false}, {2, 4, 4, 3, 2, true}, {1, 1, 1, 1, 1, false}} {
		var e Ensemble
		for k := 0; k < c.K; k++ {
			m := randomModel(c.n, c.na, c.nb, c.ft, uint64(10*c.na+c.nb+k))
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			e = append(e, m)
		}
		r := e.NewRunner()
		for _, T := range []int{7, 1, 12} {
			u := randomRows(c.H+T, 2, rng)
			y := randomRows(c.H, 2, rng)
			want := e.Simulate(u, y)
			var each [][][]float64
			for _, m := range e {
				each = append(each, m.Simulate(u, y))
			}
			s, err := e.StartFrom(u[:c.H], y)
			if err != nil {
				t.Fatal(err)
			}
			dst, spread := make([]float64, T*2), make([]float64, T*2)
			fail, err := r.ContinueSpread(s, u[c.H:], dst, spread)
			if err != nil || fail != T {
				t.Fatalf("%+v T %d: fail %d, %v", c, T, fail, err)
			}
			plain := make([]float64, T*2)
			if fail, err := r.Continue(s, u[c.H:], plain); err != nil || fail != T {
				t.Fatalf("%+v T %d: Continue fail %d, %v", c, T, fail, err)
			}
			for k := 0; k < T; k++ {
				for o := 0; o < 2; o++ {
					if got := dst[k*2+o]; got != want[c.H+k][o] || plain[k*2+o] != got {
						t.Fatalf("%+v T %d step %d output %d: continued %v (%v), simulated %v", c, T, k, o, got, plain[k*2+o], want[c.H+k][o])
					}
					var ss float64
					for _, s := range each {
						d := s[c.H+k][o] - want[c.H+k][o]
						ss += d * d
					}
					sd := math.Sqrt(ss / float64(c.K))
					if math.Abs(spread[k*2+o]-sd) > 1e-9*(1+sd) {
						t.Fatalf("%+v T %d step %d output %d: spread %v, members' %v", c, T, k, o, spread[k*2+o], sd)
					}
				}
			}
		}
	}
}

// A start refuses windows it cannot start from, a continuation inputs of
// the wrong width and starts of another model, and a prediction that is
// not finite is reported at its step, NaN from there on.
func TestStartAndContinueRefuse(t *testing.T) {
	m := randomModel(2, 2, 2, true, 1)
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	e := Ensemble{m}
	rng := rand.New(rand.NewPCG(1, 1))
	u, y := randomRows(4, 2, rng), randomRows(4, 2, rng)
	if _, err := e.StartFrom(u, y[:3]); err == nil {
		t.Fatal("rows of different lengths accepted")
	}
	if _, err := e.StartFrom(nil, nil); err == nil {
		t.Fatal("an empty window accepted")
	}
	y[2][1] = math.NaN()
	if _, err := e.StartFrom(u, y); err == nil {
		t.Fatal("a NaN output accepted")
	}
	y[2][1] = 0
	if _, err := e.StartFrom(u, [][]float64{{1}, {2}, {3}, {4}}); err == nil {
		t.Fatal("rows of the wrong width accepted")
	}
	s, err := e.StartFrom(u, y)
	if err != nil {
		t.Fatal(err)
	}
	r := e.NewRunner()
	dst := make([]float64, 6)
	if _, err := r.Continue(s, [][]float64{{1}}, dst); err == nil {
		t.Fatal("an input row of the wrong width accepted")
	}
	if _, err := r.Continue(s, nil, dst); err == nil {
		t.Fatal("an empty continuation accepted")
	}
	if _, err := r.Continue(s, randomRows(4, 2, rng), dst); err == nil {
		t.Fatal("a short output buffer accepted")
	}
	other, _ := Ensemble{m, m}.StartFrom(u, y)
	if _, err := r.Continue(other, randomRows(3, 2, rng), dst); err == nil {
		t.Fatal("another ensemble's start accepted")
	}
	in := randomRows(3, 2, rng)
	in[1][0] = math.Inf(1)
	fail, err := r.Continue(s, in, dst)
	if err != nil {
		t.Fatal(err)
	}
	if fail != 1 || math.IsNaN(dst[0]) || !math.IsNaN(dst[2]) || !math.IsNaN(dst[5]) {
		t.Fatalf("fail %d, %v", fail, dst)
	}
}

// Runners share an ensemble and a start across goroutines: each gets what
// one runner alone gets (run with -race: nothing shared is written).
func TestRunnersConcurrent(t *testing.T) {
	e := Ensemble{randomModel(3, 2, 2, true, 4), randomModel(3, 2, 2, true, 5)}
	for _, m := range e {
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(4, 4))
	s, err := e.StartFrom(randomRows(6, 2, rng), randomRows(6, 2, rng))
	if err != nil {
		t.Fatal(err)
	}
	const T, G = 20, 4
	inputs := make([][][]float64, G)
	want := make([][]float64, G)
	for g := range inputs {
		inputs[g] = randomRows(T, 2, rng)
		want[g] = make([]float64, 2*T*2)
		if _, err := e.NewRunner().ContinueSpread(s, inputs[g], want[g][:T*2], want[g][T*2:]); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, G)
	for g := 0; g < G; g++ {
		go func(g int) {
			r, dst := e.NewRunner(), make([]float64, 2*T*2)
			for rep := 0; rep < 50; rep++ {
				if _, err := r.ContinueSpread(s, inputs[g], dst[:T*2], dst[T*2:]); err != nil {
					errs <- err
					return
				}
				for i := range dst {
					if dst[i] != want[g][i] {
						errs <- fmt.Errorf("goroutine %d, repeat %d: value %d is %v, alone %v", g, rep, i, dst[i], want[g][i])
						return
					}
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < G; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
