package narx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// randomModel is a model of random weights (two outputs, two inputs).
func randomModel(na, nb, nk int, seed uint64) *Model {
	rng := rand.New(rand.NewPCG(seed, 3))
	m := &Model{NA: na, NB: nb, NK: nk, NY: 2, NU: 2, UMean: []float64{1, -2}, UStd: []float64{2, 0.5}, YMean: []float64{0.3, 5}, YStd: []float64{1.5, 3}}
	d := m.Dim()
	for o := 0; o < m.NY; o++ {
		r := make([]float64, d+1)
		for k := range r {
			r[k] = 0.3 * rng.NormFloat64() / float64(d)
		}
		m.Lin = append(m.Lin, r)
	}
	nt := newNet([]int{d, 6, 5, m.NY})
	for i := range nt.p {
		nt.p[i] = 0.3 * rng.NormFloat64()
	}
	nt.into(m)
	return m
}

func randomRows(T, w int, rng *rand.Rand) [][]float64 {
	x := make([][]float64, T)
	for t := range x {
		x[t] = make([]float64, w)
		for j := range x[t] {
			x[t][j] = rng.NormFloat64()
		}
	}
	return x
}

// TestContinueMatchesSimulate: a start from a window's rows continued by
// a runner is Simulate of the window and the continuation, bit for bit —
// delays 0 and 1, windows shorter and longer than the lag, one runner
// reused over continuations of different lengths.
func TestContinueMatchesSimulate(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, c := range []struct{ na, nb, nk, H int }{{3, 2, 1, 8}, {2, 3, 0, 5}, {4, 4, 2, 3}, {1, 1, 1, 1}} {
		m := randomModel(c.na, c.nb, c.nk, uint64(c.na*10+c.nb))
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
		r := m.NewRunner()
		for _, T := range []int{7, 1, 12} {
			u := randomRows(c.H+T, m.NU, rng)
			y := randomRows(c.H, m.NY, rng)
			want := m.Simulate(u, y)
			s, err := m.StartFrom(u[:c.H], y)
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]float64, T*m.NY)
			fail, err := r.Continue(s, u[c.H:], dst)
			if err != nil || fail != T {
				t.Fatalf("%+v T %d: fail %d, %v", c, T, fail, err)
			}
			for k := 0; k < T; k++ {
				for o := 0; o < m.NY; o++ {
					if got := dst[k*m.NY+o]; got != want[c.H+k][o] {
						t.Fatalf("%+v T %d step %d output %d: continued %v, simulated %v", c, T, k, o, got, want[c.H+k][o])
					}
				}
			}
		}
	}
}

// A start refuses windows it cannot start from, a continuation inputs of
// the wrong width, and a prediction that is not finite is reported at its
// step, NaN from there on.
func TestStartAndContinueRefuse(t *testing.T) {
	m := randomModel(2, 2, 1, 1)
	rng := rand.New(rand.NewPCG(1, 1))
	u, y := randomRows(4, 2, rng), randomRows(4, 2, rng)
	if _, err := m.StartFrom(u, y[:3]); err == nil {
		t.Fatal("rows of different lengths accepted")
	}
	y[2][1] = math.NaN()
	if _, err := m.StartFrom(u, y); err == nil {
		t.Fatal("a NaN output accepted")
	}
	y[2][1] = 0
	if _, err := m.StartFrom(u, [][]float64{{1}, {2}, {3}, {4}}); err == nil {
		t.Fatal("rows of the wrong width accepted")
	}
	s, err := m.StartFrom(u, y)
	if err != nil {
		t.Fatal(err)
	}
	r := m.NewRunner()
	dst := make([]float64, 6)
	if _, err := r.Continue(s, [][]float64{{1}}, dst); err == nil {
		t.Fatal("an input row of the wrong width accepted")
	}
	if _, err := r.Continue(s, nil, dst); err == nil {
		t.Fatal("an empty continuation accepted")
	}
	if _, err := randomModel(3, 2, 1, 2).NewRunner().Continue(s, randomRows(3, 2, rng), dst); err == nil {
		t.Fatal("the start of another model's lag accepted")
	}
	fail, err := r.Continue(s, [][]float64{{0, 0}, {math.Inf(1), 0}, {0, 0}}, dst)
	if err != nil {
		t.Fatal(err)
	}
	// an infinite input at step 1 reaches the output at step 2 (delay 1)
	if fail != 2 || math.IsNaN(dst[0]) || math.IsNaN(dst[2]) || !math.IsNaN(dst[4]) || !math.IsNaN(dst[5]) {
		t.Fatalf("fail %d, %v", fail, dst)
	}
}

// Runners share a model and a start across goroutines: each gets what
// one runner alone gets (run with -race: nothing shared is written).
func TestRunnersConcurrent(t *testing.T) {
	m := randomModel(3, 2, 1, 4)
	rng := rand.New(rand.NewPCG(4, 4))
	s, err := m.StartFrom(randomRows(6, 2, rng), randomRows(6, 2, rng))
	if err != nil {
		t.Fatal(err)
	}
	const T, G = 20, 4
	inputs := make([][][]float64, G)
	want := make([][]float64, G)
	for g := range inputs {
		inputs[g] = randomRows(T, 2, rng)
		want[g] = make([]float64, T*m.NY)
		if _, err := m.NewRunner().Continue(s, inputs[g], want[g]); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, G)
	for g := 0; g < G; g++ {
		go func(g int) {
			r, dst := m.NewRunner(), make([]float64, T*m.NY)
			for rep := 0; rep < 50; rep++ {
				if _, err := r.Continue(s, inputs[g], dst); err != nil {
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
