package mlp

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// Backward's gradients are the finite-difference gradients of a squared
// output, for the weights and the input.
func TestBackwardMatchesFiniteDifferences(t *testing.T) {
	n := New([]int{3, 5, 4, 2}, 7)
	p := make([]float64, 7+n.Len())
	r := rand.New(rand.NewPCG(1, 2))
	n.Glorot(p, r, 0.5)
	for i := range p {
		p[i] += 0.1 * r.NormFloat64()
	}
	x := []float64{0.3, -1.2, 0.8}
	acts, delta := n.Scratch(), n.Scratch()
	f := func() float64 {
		y := n.Forward(p, x, acts)
		return y[0]*y[0] + 3*y[1]
	}
	y := n.Forward(p, x, acts)
	g, dx := make([]float64, len(p)), make([]float64, 3)
	n.Backward(p, acts, delta, []float64{2 * y[0], 3}, g, dx)
	const h = 1e-6
	for i := range p {
		v := p[i]
		p[i] = v + h
		fp := f()
		p[i] = v - h
		fm := f()
		p[i] = v
		fd := (fp - fm) / (2 * h)
		if i < 7 && g[i] != 0 {
			t.Fatalf("gradient %g before the network's base", g[i])
		}
		if math.Abs(fd-g[i]) > 1e-6*math.Max(1, math.Abs(fd)) {
			t.Errorf("parameter %d: %g, finite difference %g", i, g[i], fd)
		}
	}
	for k := range x {
		v := x[k]
		x[k] = v + h
		fp := f()
		x[k] = v - h
		fm := f()
		x[k] = v
		if fd := (fp - fm) / (2 * h); math.Abs(fd-dx[k]) > 1e-6*math.Max(1, math.Abs(fd)) {
			t.Errorf("input %d: %g, finite difference %g", k, dx[k], fd)
		}
	}
}

// Adam moves a parameter against its gradient, leaves masked parameters
// alone and refuses a non-finite gradient.
func TestAdamStep(t *testing.T) {
	a := NewAdam(3, 0.1)
	a.Mask = []bool{true, false, true}
	p := []float64{1, 1, 1}
	if !a.Step(p, []float64{2, 2, -2}) || !(p[0] < 1 && p[1] == 1 && p[2] > 1) {
		t.Fatalf("after a step %v", p)
	}
	q := append([]float64(nil), p...)
	if a.Step(p, []float64{math.NaN(), 0, 0}) || p[0] != q[0] {
		t.Fatal("a NaN gradient was applied")
	}
}

// Adam's Scale multiplies each parameter's step: at the first step
// (moments (1−β1)·g and (1−β2)·g², bias corrections 1/(1−β1) and
// 1/(1−β2)) the step is lr·scale·g/(|g| + ε) in Step's order of
// operations; a scale of 1 is the step without Scale to the bit (also
// after later steps), 0 freezes the parameter, and a factor scales the
// step (0.25: a quarter of the plain 0.1·2/(2 + 1e-8)).
func TestAdamScale(t *testing.T) {
	const lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
	g := []float64{2, 2, 2, 2}
	plain := NewAdam(4, lr)
	p0 := []float64{1, 1, 1, 1}
	plain.Step(p0, g)
	a := NewAdam(4, lr)
	a.Scale = []float64{1, 0, 0.25, 3}
	p := []float64{1, 1, 1, 1}
	if !a.Step(p, g) {
		t.Fatal("step refused")
	}
	first := func(scale float64) float64 {
		b1pow, b2pow := 1.0, 1.0
		b1pow *= b1
		b2pow *= b2
		m, v := (1-b1)*2, (1-b2)*2*2
		return 1 - lr*scale*m*(1/(1-b1pow))/(math.Sqrt(v*(1/(1-b2pow)))+eps)
	}
	for i, want := range []float64{p0[0], 1, first(0.25), first(3)} {
		if p[i] != want || want != first(a.Scale[i]) {
			t.Errorf("parameter %d (scale %g): %.17g, want %.17g", i, a.Scale[i], p[i], want)
		}
	}
	if d, want := 1-p[2], 0.025*2/(2+1e-8); math.Abs(d-want) > 1e-15 {
		t.Errorf("scale 0.25: step %.17g, want %.17g", d, want)
	}
	for k := 0; k < 5; k++ {
		gk := []float64{float64(k) - 1.5, 0.3, -0.7, 1}
		plain.Step(p0, gk)
		a.Step(p, gk)
	}
	if p[0] != p0[0] || p[1] != 1 {
		t.Errorf("after 6 steps: scale 1 %.17g, without Scale %.17g; scale 0 %.17g", p[0], p0[0], p[1])
	}
}

// The sizes the trainers use: a state-space transition network (6 state
// and input values, two hidden layers of 32, 4 outputs), evaluated one
// sample at a time as inside a simulation.
var benchSizes = []int{6, 32, 32, 4}

func BenchmarkForward(b *testing.B) {
	n := New(benchSizes, 0)
	p := make([]float64, n.Len())
	n.Glorot(p, rand.New(rand.NewPCG(1, 1)), 0.1)
	acts := n.Scratch()
	x := []float64{0.1, 0.2, -0.3, 0.4, 0.5, -0.6}
	for b.Loop() {
		x[0] = n.Forward(p, x, acts)[0]
	}
}

// BenchmarkForwardLoops is the forward pass as plain Go loops.
func BenchmarkForwardLoops(b *testing.B) {
	n := New(benchSizes, 0)
	p := make([]float64, n.Len())
	n.Glorot(p, rand.New(rand.NewPCG(1, 1)), 0.1)
	acts := n.Scratch()
	x := []float64{0.1, 0.2, -0.3, 0.4, 0.5, -0.6}
	for b.Loop() {
		copy(acts[0], x)
		for l := 0; l < n.Layers(); l++ {
			w, bb := n.W(p, l), n.B(p, l)
			ni := n.Sizes[l]
			for j := range acts[l+1] {
				row := w[j*ni : (j+1)*ni : (j+1)*ni]
				z := bb[j]
				for k, v := range acts[l][:ni] {
					z += row[k] * v
				}
				if l < n.Layers()-1 {
					z = math.Tanh(z)
				}
				acts[l+1][j] = z
			}
		}
		x[0] = acts[n.Layers()][0]
	}
}

// BenchmarkForwardGonum is the same network with gonum's MulVec per layer
// (the comparison for the hand-written loops).
func BenchmarkForwardGonum(b *testing.B) {
	n := New(benchSizes, 0)
	p := make([]float64, n.Len())
	n.Glorot(p, rand.New(rand.NewPCG(1, 1)), 0.1)
	var ws []*mat.Dense
	var bs, hs []*mat.VecDense
	for l := 0; l < n.Layers(); l++ {
		ws = append(ws, mat.NewDense(n.Sizes[l+1], n.Sizes[l], n.W(p, l)))
		bs = append(bs, mat.NewVecDense(n.Sizes[l+1], n.B(p, l)))
		hs = append(hs, mat.NewVecDense(n.Sizes[l+1], nil))
	}
	x := mat.NewVecDense(6, []float64{0.1, 0.2, -0.3, 0.4, 0.5, -0.6})
	for b.Loop() {
		in := x
		for l := range ws {
			hs[l].MulVec(ws[l], in)
			hs[l].AddVec(hs[l], bs[l])
			if l < len(ws)-1 {
				raw := hs[l].RawVector().Data
				for i, v := range raw {
					raw[i] = math.Tanh(v)
				}
			}
			in = hs[l]
		}
		x.SetVec(0, in.AtVec(0))
	}
}
