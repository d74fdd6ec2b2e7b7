package narx

import (
	"math"
	"math/rand/v2"
)

// net is an MLP on one flat parameter vector (the optimiser's view): per
// layer W [out×in] row-major then b; tanh on the hidden layers, linear
// output.
type net struct {
	sizes []int
	off   []int // start of layer l's W in p
	p     []float64
}

func newNet(sizes []int) *net {
	n := &net{sizes: sizes}
	k := 0
	for l := 0; l+1 < len(sizes); l++ {
		n.off = append(n.off, k)
		k += sizes[l]*sizes[l+1] + sizes[l+1]
	}
	n.p = make([]float64, k)
	return n
}

func (n *net) layers() int { return len(n.sizes) - 1 }

func (n *net) w(l int) []float64 {
	o := n.off[l]
	return n.p[o : o+n.sizes[l]*n.sizes[l+1]]
}

func (n *net) b(l int) []float64 {
	o := n.off[l] + n.sizes[l]*n.sizes[l+1]
	return n.p[o : o+n.sizes[l+1]]
}

// into points m's layers at the network's weights (views, no copy).
func (n *net) into(m *Model) {
	m.Layers = make([]Layer, n.layers())
	for l := range m.Layers {
		m.Layers[l] = Layer{In: n.sizes[l], Out: n.sizes[l+1], W: n.w(l), B: n.b(l)}
	}
}

// adam trains a net by Adam on the mean squared error of minibatches.
type adam struct {
	n            *net
	g, m, v      []float64
	lr           float64
	batch        int
	rng          *rand.Rand
	order        []int
	t            int
	b1pow, b2pow float64
	act, delta   [][]float64 // per layer boundary: activations, back-propagated errors
}

func newAdam(n *net, lr float64, batch, samples int, rng *rand.Rand) *adam {
	a := &adam{n: n, g: make([]float64, len(n.p)), m: make([]float64, len(n.p)), v: make([]float64, len(n.p)),
		lr: lr, batch: batch, rng: rng, order: make([]int, samples), b1pow: 1, b2pow: 1}
	for i := range a.order {
		a.order[i] = i
	}
	for _, s := range n.sizes {
		a.act = append(a.act, make([]float64, s))
		a.delta = append(a.delta, make([]float64, s))
	}
	return a
}

// epoch is one shuffled pass over X [n×in] with targets Y [n×out]; it
// returns the mean squared error over the pass.
func (a *adam) epoch(X, Y []float64) float64 {
	a.rng.Shuffle(len(a.order), func(i, j int) { a.order[i], a.order[j] = a.order[j], a.order[i] })
	loss := 0.0
	for lo := 0; lo < len(a.order); lo += a.batch {
		loss += a.step(X, Y, a.order[lo:min(len(a.order), lo+a.batch)])
	}
	return loss / float64(len(a.order)*a.n.sizes[len(a.n.sizes)-1])
}

// step back-propagates one minibatch, applies one Adam update and returns
// the batch's summed squared error.
func (a *adam) step(X, Y []float64, batch []int) float64 {
	n := a.n
	L := n.layers()
	in, out := n.sizes[0], n.sizes[L]
	clear(a.g)
	norm := 2 / float64(len(batch)*out)
	loss := 0.0
	for _, s := range batch {
		copy(a.act[0], X[s*in:(s+1)*in])
		for l := 0; l < L; l++ {
			w, b := n.w(l), n.b(l)
			ni := n.sizes[l]
			x, h := a.act[l], a.act[l+1]
			for j := range h {
				row := w[j*ni : (j+1)*ni : (j+1)*ni]
				z := b[j]
				for k, v := range x[:ni] {
					z += row[k] * v
				}
				if l < L-1 {
					z = math.Tanh(z)
				}
				h[j] = z
			}
		}
		dOut := a.delta[L]
		for o := range dOut {
			e := a.act[L][o] - Y[s*out+o]
			loss += e * e
			dOut[o] = norm * e
		}
		for l := L - 1; l >= 0; l-- {
			w := n.w(l)
			o := n.off[l]
			ni, no := n.sizes[l], n.sizes[l+1]
			gw := a.g[o : o+ni*no]
			gb := a.g[o+ni*no : o+ni*no+no]
			x, d := a.act[l], a.delta[l+1]
			var dp []float64
			if l > 0 {
				dp = a.delta[l]
				clear(dp)
			}
			for j := 0; j < no; j++ {
				dj := d[j]
				if dj == 0 {
					continue
				}
				gb[j] += dj
				row := gw[j*ni : (j+1)*ni : (j+1)*ni]
				for k, v := range x[:ni] {
					row[k] += dj * v
				}
				if dp != nil {
					wr := w[j*ni : (j+1)*ni : (j+1)*ni]
					for k := range dp[:ni] {
						dp[k] += dj * wr[k]
					}
				}
			}
			if dp != nil {
				for k, v := range x[:ni] {
					dp[k] *= 1 - v*v
				}
			}
		}
	}
	a.update()
	return loss
}

// update applies one Adam step with the gradient in a.g (none when it is
// not finite: a diverging simulation must not wreck the weights).
func (a *adam) update() {
	for _, gi := range a.g {
		if math.IsNaN(gi) || math.IsInf(gi, 0) {
			return
		}
	}
	n := a.n
	const b1, b2, eps = 0.9, 0.999, 1e-8
	a.t++
	a.b1pow *= b1
	a.b2pow *= b2
	c1, c2 := 1/(1-a.b1pow), 1/(1-a.b2pow)
	p, m, v, g := n.p, a.m, a.v, a.g
	for i := range p {
		gi := g[i]
		m[i] = b1*m[i] + (1-b1)*gi
		v[i] = b2*v[i] + (1-b2)*gi*gi
		p[i] -= a.lr * m[i] * c1 / (math.Sqrt(v[i]*c2) + eps)
	}
}

// forward computes the network on x, keeping every layer's output in acts
// (acts[0] = x, len layers+1), and returns the output.
func (n *net) forward(x []float64, acts [][]float64) []float64 {
	L := n.layers()
	copy(acts[0], x)
	for l := 0; l < L; l++ {
		w, b := n.w(l), n.b(l)
		ni := n.sizes[l]
		xin, h := acts[l], acts[l+1]
		for j := range h {
			row := w[j*ni : (j+1)*ni : (j+1)*ni]
			z := b[j]
			for k, v := range xin[:ni] {
				z += row[k] * v
			}
			if l < L-1 {
				z = math.Tanh(z)
			}
			h[j] = z
		}
	}
	return acts[L]
}

// backward back-propagates dOut (the loss gradient at the output) through
// the forward pass kept in acts: it adds the weight gradient to g and
// writes the gradient at the input into dx; delta is scratch like acts.
func (n *net) backward(acts, delta [][]float64, dOut, g, dx []float64) {
	L := n.layers()
	copy(delta[L], dOut)
	for l := L - 1; l >= 0; l-- {
		w := n.w(l)
		o := n.off[l]
		ni, no := n.sizes[l], n.sizes[l+1]
		gw := g[o : o+ni*no]
		gb := g[o+ni*no : o+ni*no+no]
		x, d, dp := acts[l], delta[l+1], delta[l]
		clear(dp)
		for j := 0; j < no; j++ {
			dj := d[j]
			if dj == 0 {
				continue
			}
			gb[j] += dj
			row := gw[j*ni : (j+1)*ni : (j+1)*ni]
			wr := w[j*ni : (j+1)*ni : (j+1)*ni]
			for k, v := range x[:ni] {
				row[k] += dj * v
				dp[k] += dj * wr[k]
			}
		}
		if l > 0 {
			for k, v := range x[:ni] {
				dp[k] *= 1 - v*v
			}
		}
	}
	copy(dx, delta[0])
}
