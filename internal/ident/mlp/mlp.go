// Package mlp holds the small dense networks and the Adam optimiser the
// neural identification trainers (internal/ident/narx,
// internal/ident/nss) share: a multilayer perceptron with tanh hidden
// layers and a linear output layer whose weights live in a slice of one
// flat parameter vector (the optimiser's view), its forward pass and its
// back-propagation, and an Adam step over the whole vector.
//
// The networks are small (tens of units) and are evaluated one sample at
// a time inside simulations, so the kernels are gonum's vector routines
// (floats.Dot and floats.AddScaled, assembly on amd64) on rows of the
// flat vector rather than mat.Dense products; BenchmarkForward measures
// them against mat.Dense.MulVec per layer (BenchmarkForwardGonum) and
// BenchmarkForwardLoops against plain Go loops.
package mlp

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
)

// Net is the layout of an MLP inside a parameter vector: layer l's
// weights W [Sizes[l+1]×Sizes[l]] row-major then its biases b, the first
// layer starting at Base.
type Net struct {
	Sizes []int
	Base  int
	off   []int
	n     int
}

// New lays out an MLP of the given layer sizes (input, hidden…, output)
// from offset base.
func New(sizes []int, base int) *Net {
	n := &Net{Sizes: append([]int(nil), sizes...), Base: base}
	k := base
	for l := 0; l+1 < len(sizes); l++ {
		n.off = append(n.off, k)
		k += sizes[l]*sizes[l+1] + sizes[l+1]
	}
	n.n = k - base
	return n
}

// Len is the number of parameters.
func (n *Net) Len() int { return n.n }

// Layers is the number of dense layers.
func (n *Net) Layers() int { return len(n.Sizes) - 1 }

// In and Out are the input and output sizes.
func (n *Net) In() int  { return n.Sizes[0] }
func (n *Net) Out() int { return n.Sizes[len(n.Sizes)-1] }

// W and B are layer l's weights and biases in p.
func (n *Net) W(p []float64, l int) []float64 {
	o := n.off[l]
	return p[o : o+n.Sizes[l]*n.Sizes[l+1]]
}

func (n *Net) B(p []float64, l int) []float64 {
	o := n.off[l] + n.Sizes[l]*n.Sizes[l+1]
	return p[o : o+n.Sizes[l+1]]
}

// Scratch returns per-layer-boundary buffers (len Layers()+1, sizes as
// Sizes) for Forward's activations or Backward's deltas.
func (n *Net) Scratch() [][]float64 {
	s := make([][]float64, len(n.Sizes))
	for i, k := range n.Sizes {
		s[i] = make([]float64, k)
	}
	return s
}

// Glorot draws the hidden layers' weights Glorot-uniform from rng and
// the output layer's uniform in ±outScale (0: zero, so the network starts
// as the zero function); biases are zero.
func (n *Net) Glorot(p []float64, rng *rand.Rand, outScale float64) {
	L := n.Layers()
	for l := 0; l < L; l++ {
		a := math.Sqrt(6 / float64(n.Sizes[l]+n.Sizes[l+1]))
		if l == L-1 {
			a = outScale
		}
		w := n.W(p, l)
		for i := range w {
			if a == 0 {
				w[i] = 0
				continue
			}
			w[i] = a * (2*rng.Float64() - 1)
		}
		clear(n.B(p, l))
	}
}

// Forward computes the network on x with parameters p, keeping every
// layer's output in acts (acts[0] = x, from Scratch), and returns the
// output (acts[Layers()]).
func (n *Net) Forward(p, x []float64, acts [][]float64) []float64 {
	L := n.Layers()
	copy(acts[0], x)
	for l := 0; l < L; l++ {
		w, b := n.W(p, l), n.B(p, l)
		ni := n.Sizes[l]
		xin, h := acts[l], acts[l+1]
		for j := range h {
			z := b[j] + floats.Dot(w[j*ni:(j+1)*ni], xin[:ni])
			if l < L-1 {
				z = math.Tanh(z)
			}
			h[j] = z
		}
	}
	return acts[L]
}

// Backward back-propagates dOut (the loss gradient at the output)
// through the forward pass kept in acts: it adds the weight gradient to
// g (laid out as p) and, when dx is not nil, writes the gradient at the
// input into dx; delta is scratch from Scratch.
func (n *Net) Backward(p []float64, acts, delta [][]float64, dOut, g, dx []float64) {
	L := n.Layers()
	copy(delta[L], dOut)
	for l := L - 1; l >= 0; l-- {
		w := n.W(p, l)
		o := n.off[l]
		ni, no := n.Sizes[l], n.Sizes[l+1]
		gw := g[o : o+ni*no]
		gb := g[o+ni*no : o+ni*no+no]
		x, d := acts[l], delta[l+1]
		var dp []float64
		if l > 0 || dx != nil {
			dp = delta[l]
			clear(dp)
		}
		for j := 0; j < no; j++ {
			dj := d[j]
			if dj == 0 {
				continue
			}
			gb[j] += dj
			floats.AddScaled(gw[j*ni:(j+1)*ni], dj, x[:ni])
			if dp != nil {
				floats.AddScaled(dp[:ni], dj, w[j*ni:(j+1)*ni])
			}
		}
		if l > 0 {
			for k, v := range x[:ni] {
				dp[k] *= 1 - v*v
			}
		}
	}
	if dx != nil {
		copy(dx, delta[0])
	}
}

// Adam is the Adam optimiser (β1 0.9, β2 0.999, ε 1e-8) of a parameter
// vector.
type Adam struct {
	LR           float64
	m, v         []float64
	t            int
	b1pow, b2pow float64
	// Mask, when set, freezes the parameters where it is false.
	Mask []bool
	// Scale, when set, multiplies the step of every parameter by its
	// entry: a per-parameter learning-rate factor (0 freezes the
	// parameter, though its moments still follow the gradient; 1 is the
	// step without Scale, to the bit).
	Scale []float64
}

// NewAdam returns an optimiser of n parameters.
func NewAdam(n int, lr float64) *Adam {
	return &Adam{LR: lr, m: make([]float64, n), v: make([]float64, n), b1pow: 1, b2pow: 1}
}

// Step applies one Adam step to p with the gradient g; it does nothing
// and returns false when g is not finite (a diverging simulation must not
// wreck the weights).
func (a *Adam) Step(p, g []float64) bool {
	for _, gi := range g {
		if math.IsNaN(gi) || math.IsInf(gi, 0) {
			return false
		}
	}
	const b1, b2, eps = 0.9, 0.999, 1e-8
	a.t++
	a.b1pow *= b1
	a.b2pow *= b2
	c1, c2 := 1/(1-a.b1pow), 1/(1-a.b2pow)
	m, v := a.m, a.v
	for i := range p {
		if a.Mask != nil && !a.Mask[i] {
			continue
		}
		gi := g[i]
		m[i] = b1*m[i] + (1-b1)*gi
		v[i] = b2*v[i] + (1-b2)*gi*gi
		lr := a.LR
		if a.Scale != nil {
			lr *= a.Scale[i]
		}
		p[i] -= lr * m[i] * c1 / (math.Sqrt(v[i]*c2) + eps)
	}
	return true
}
