package hybrid

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// rollModel is the tanks physics with a random (untrained) residual
// ensemble of three members, one of them the zero network.
func rollModel(t *testing.T, lags, stride int) *Model {
	t.Helper()
	pm := parseModel(t, physicsDir+"/cascaded_tanks.aml")
	sys, err := NewSystem(pm, []string{"y"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{Sys: sys, Params: tanksTruth, Free: []bool{true, false}, PriorOffset: []float64{0, 0}, StateScale: []float64{1, 1},
		OutStd: []float64{1.5}, ErrScale: []float64{0.05}, X0Weight: 1, WindowX0Weight: 1}
	e := &Ensemble{Lags: lags, Stride: stride, Scale: 0.5, NOut: sys.NumModelOutputs(), NState: sys.NumStates(), NCtrl: sys.NumControls(),
		FeatMean: []float64{5, 5, 5, 4}, FeatStd: []float64{2, 2, 2, 2}}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3; i++ {
		n := NewNet(e.Dim(), 7, 1, e.Scale, rng) // 7: forward4 has a remainder
		if i != 1 {
			_, _, w2, b2 := n.parts()
			for j := range w2 {
				w2[j] = rng.NormFloat64()
			}
			b2[0] = 0.1
		}
		e.Members = append(e.Members, n)
	}
	m.Residual = e
	return m
}

// Start + Roll is bit for bit Simulate over the window and the horizon,
// for lags that reach back into the window and lags that are clamped at
// its first row; rollouts from one Start do not depend on each other or on
// their order, and the Start is never modified.
func TestRollEqualsSimulate(t *testing.T) {
	for _, c := range []struct{ H, lags, stride int }{{12, 3, 2}, {3, 4, 2}, {1, 2, 1}} {
		m := rollModel(t, c.lags, c.stride)
		sim, _ := m.NewSim()
		rng := rand.New(rand.NewPCG(9, 9))
		F := 15
		U := make([][]float64, c.H+F)
		Y := make([][]float64, c.H)
		for k := range U {
			U[k] = []float64{2 + 4*rng.Float64()}
		}
		for k := range Y {
			Y[k] = []float64{4 + 0.1*float64(k)}
		}
		Y[0][0] = 4.5
		s, err := m.StartFrom(sim, U[:c.H], nil, Y, c.H)
		if err != nil {
			t.Fatal(err)
		}
		lastBefore := slices.Clone(s.Next)
		other := make([][]float64, F)
		for k := range other {
			other[k] = []float64{9}
		}
		r := m.NewRollout()
		// another candidate first: nothing may carry over
		if err := m.Roll(sim, s, other, nil, r); err != nil {
			t.Fatal(err)
		}
		if err := m.Roll(sim, s, U[c.H:], nil, r); err != nil {
			t.Fatal(err)
		}
		want, err := m.Simulate(sim, U, nil, Y, c.H)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < F; k++ {
			if r.Y[k] != want.Y[c.H+k][0] || r.Phys[k] != want.Phys[c.H+k][0] || r.Spread[k] != want.Spread[c.H+k][0] {
				t.Fatalf("H %d lags %d: step %d: roll %v/%v/%v, simulate %v/%v/%v", c.H, c.lags, k, r.Y[k], r.Phys[k], r.Spread[k],
					want.Y[c.H+k][0], want.Phys[c.H+k][0], want.Spread[c.H+k][0])
			}
		}
		for k := 0; k < c.H; k++ {
			if s.Hist.Y[k][0] != want.Y[k][0] || s.Hist.Spread[k][0] != want.Spread[k][0] {
				t.Fatalf("history row %d differs", k)
			}
		}
		if !slices.Equal(s.Next, lastBefore) || !slices.Equal(s.X0, want.X0) {
			t.Fatal("the start changed")
		}
		if r.Spread[F-1] == 0 {
			t.Fatal("no spread: the test does not exercise the ensemble")
		}
	}
}

// forwardPacked (the AVX2 kernel where the CPU has it) is bit for bit
// Forward for hidden layers with and without a remainder after the
// blocks of four, below, at and above the kernel's 32 units at a time,
// and for short and long inputs.
func TestForwardPackedEqualsForward(t *testing.T) {
	t.Logf("AVX2 kernel in use: %v", useAVX2)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, in := range []int{1, 3, 8, 66} {
		for _, hidden := range []int{1, 4, 7, 16, 20, 32, 35, 40, 64} {
			n := NewNet(in, hidden, 2, 0.7, rng)
			for i := range n.P {
				n.P[i] = rng.NormFloat64() / 3
			}
			wp := n.packW1()
			x := make([]float64, in)
			h1, h2 := make([]float64, hidden), make([]float64, hidden)
			y1, y2 := make([]float64, 2), make([]float64, 2)
			for trial := 0; trial < 20; trial++ {
				for i := range x {
					x[i] = 3 * rng.NormFloat64()
				}
				n.Forward(x, h1, y1)
				n.forwardPacked(wp, x, h2, y2)
				if !slices.Equal(h1, h2) || !slices.Equal(y1, y2) {
					t.Fatalf("in %d hidden %d: forwardPacked %v %v, Forward %v %v", in, hidden, h2, y2, h1, y1)
				}
			}
		}
	}
}

// BenchmarkForwardPacked: one forward pass of a residual network of the
// twin's shape (66 → 32 → 1) through the AVX2 kernels;
// BenchmarkForward is Net.Forward on the same network and input (the
// comparison, same bits).
func BenchmarkForwardPacked(b *testing.B) { benchForward(b, true) }

func BenchmarkForward(b *testing.B) { benchForward(b, false) }

func benchForward(b *testing.B, packed bool) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := NewNet(66, 32, 1, 0.7, rng)
	x := make([]float64, 66)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	h, y := make([]float64, 32), make([]float64, 1)
	wp := n.packW1()
	for b.Loop() {
		if packed {
			n.forwardPacked(wp, x, h, y)
		} else {
			n.Forward(x, h, y)
		}
	}
}
