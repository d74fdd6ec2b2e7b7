package hybrid

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Net is a small fully connected network with one hidden tanh layer and a
// bounded output,
//
//	y = Scale · tanh(W2 · tanh(W1·x + b1) + b2),
//
// written by hand on plain slices. All weights live in P (W1 [Hidden×In]
// row-major, b1, W2 [Out×Hidden], b2), so the optimiser treats them as one
// vector.
type Net struct {
	In, Hidden, Out int
	Scale           float64
	P               []float64
}

func netSize(in, hidden, out int) int { return hidden*in + hidden + out*hidden + out }

// NewNet initialises a network: W1 Glorot-uniform from rng, b1 = 0, and the
// output layer W2 = b2 = 0, so a new network predicts exactly 0 (training
// starts from the physics alone).
func NewNet(in, hidden, out int, scale float64, rng *rand.Rand) *Net {
	n := &Net{In: in, Hidden: hidden, Out: out, Scale: scale, P: make([]float64, netSize(in, hidden, out))}
	a := math.Sqrt(6 / float64(in+hidden))
	w1, _, _, _ := n.parts()
	for i := range w1 {
		w1[i] = a * (2*rng.Float64() - 1)
	}
	return n
}

// Parts returns views of the weights: W1 [Hidden×In] row-major, b1, W2
// [Out×Hidden] row-major, b2.
func (n *Net) Parts() (w1, b1, w2, b2 []float64) { return n.parts() }

// NetFromWeights rebuilds a network from its weights (W1 [hidden][in], W2
// [out][hidden]); every weight must be finite.
func NetFromWeights(w1 [][]float64, b1 []float64, w2 [][]float64, b2 []float64, scale float64) (*Net, error) {
	hidden, out := len(w1), len(w2)
	if hidden == 0 || out == 0 || len(w1[0]) == 0 {
		return nil, fmt.Errorf("empty network")
	}
	in := len(w1[0])
	if len(b1) != hidden || len(b2) != out || !(scale > 0) {
		return nil, fmt.Errorf("%d hidden weight rows with %d biases, %d output rows with %d biases, scale %g", hidden, len(b1), out, len(b2), scale)
	}
	n := &Net{In: in, Hidden: hidden, Out: out, Scale: scale, P: make([]float64, 0, netSize(in, hidden, out))}
	for j, r := range w1 {
		if len(r) != in {
			return nil, fmt.Errorf("w1 row %d has %d values, want %d", j, len(r), in)
		}
		n.P = append(n.P, r...)
	}
	n.P = append(n.P, b1...)
	for o, r := range w2 {
		if len(r) != hidden {
			return nil, fmt.Errorf("w2 row %d has %d values, want %d", o, len(r), hidden)
		}
		n.P = append(n.P, r...)
	}
	n.P = append(n.P, b2...)
	for _, v := range n.P {
		if !finite(v) {
			return nil, fmt.Errorf("non-finite weight")
		}
	}
	return n, nil
}

func (n *Net) parts() (w1, b1, w2, b2 []float64) {
	i1 := n.Hidden * n.In
	i2 := i1 + n.Hidden
	i3 := i2 + n.Out*n.Hidden
	return n.P[:i1], n.P[i1:i2], n.P[i2:i3], n.P[i3 : i3+n.Out]
}

// Forward computes y (len Out) for x (len In); h (len Hidden) is scratch.
func (n *Net) Forward(x, h, y []float64) {
	w1, b1, w2, b2 := n.parts()
	in := n.In
	for j := range h {
		w := w1[j*in : (j+1)*in : (j+1)*in]
		a := b1[j]
		for k, xv := range x[:in] {
			a += w[k] * xv
		}
		h[j] = math.Tanh(a)
	}
	H := n.Hidden
	for o := range y[:n.Out] {
		w := w2[o*H : (o+1)*H : (o+1)*H]
		a := b2[o]
		for j, hv := range h[:H] {
			a += w[j] * hv
		}
		y[o] = n.Scale * math.Tanh(a)
	}
}

// adamTrainer trains a Net by Adam on the mean squared error over
// minibatches (targets that are NaN do not count).
type adamTrainer struct {
	net            *Net
	g, m, v        []float64
	lr, l2         float64
	b1, b2, eps    float64
	t              int
	h, dh, th      []float64
	gw1, gb1, gw2  []float64
	gb2            []float64
	batch          int
	rng            *rand.Rand
	order          []int
	b1pow, b2pow   float64
	lossSum, lossN float64
}

func newAdamTrainer(n *Net, lr, l2 float64, batch int, rng *rand.Rand) *adamTrainer {
	tr := &adamTrainer{net: n, g: make([]float64, len(n.P)), m: make([]float64, len(n.P)), v: make([]float64, len(n.P)),
		lr: lr, l2: l2, b1: 0.9, b2: 0.999, eps: 1e-8, h: make([]float64, n.Hidden), dh: make([]float64, n.Hidden),
		th: make([]float64, n.Out), batch: max(1, batch), rng: rng, b1pow: 1, b2pow: 1}
	i1 := n.Hidden * n.In
	i2 := i1 + n.Hidden
	i3 := i2 + n.Out*n.Hidden
	tr.gw1, tr.gb1, tr.gw2, tr.gb2 = tr.g[:i1], tr.g[i1:i2], tr.g[i2:i3], tr.g[i3:i3+n.Out]
	return tr
}

// epoch runs one pass over the samples idx (shuffled) of X [n×In] and Y
// [n×Out] in minibatches and returns the mean training loss.
func (tr *adamTrainer) epoch(X, Y []float64, idx []int) float64 {
	if cap(tr.order) < len(idx) {
		tr.order = make([]int, len(idx))
	}
	order := tr.order[:len(idx)]
	copy(order, idx)
	tr.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	tr.lossSum, tr.lossN = 0, 0
	for lo := 0; lo < len(order); lo += tr.batch {
		tr.step(X, Y, order[lo:min(len(order), lo+tr.batch)])
	}
	return tr.lossSum / math.Max(1, tr.lossN)
}

// step accumulates the gradient of one minibatch by backpropagation and
// applies one Adam update.
func (tr *adamTrainer) step(X, Y []float64, batch []int) {
	n := tr.net
	in, H, out := n.In, n.Hidden, n.Out
	w1, b1, w2, b2 := n.parts()
	clear(tr.g)
	h, dh := tr.h, tr.dh
	gw1, gb1, gw2, gb2 := tr.gw1, tr.gb1, tr.gw2, tr.gb2
	S := n.Scale
	norm := 2 / float64(len(batch)*out)
	for _, s := range batch {
		x := X[s*in : (s+1)*in : (s+1)*in]
		t := Y[s*out : (s+1)*out : (s+1)*out]
		for j := 0; j < H; j++ {
			w := w1[j*in : (j+1)*in : (j+1)*in]
			a := b1[j]
			for k, xv := range x {
				a += w[k] * xv
			}
			h[j] = math.Tanh(a)
			dh[j] = 0
		}
		for o := 0; o < out; o++ {
			if math.IsNaN(t[o]) {
				continue
			}
			w := w2[o*H : (o+1)*H : (o+1)*H]
			a := b2[o]
			for j, hv := range h[:H] {
				a += w[j] * hv
			}
			th := math.Tanh(a)
			e := S*th - t[o]
			tr.lossSum += e * e
			tr.lossN++
			g := norm * e * S * (1 - th*th)
			gb2[o] += g
			gw := gw2[o*H : (o+1)*H : (o+1)*H]
			for j, hv := range h[:H] {
				gw[j] += g * hv
				dh[j] += g * w[j]
			}
		}
		for j := 0; j < H; j++ {
			dz := dh[j] * (1 - h[j]*h[j])
			if dz == 0 {
				continue
			}
			gb1[j] += dz
			gw := gw1[j*in : (j+1)*in : (j+1)*in]
			for k, xv := range x {
				gw[k] += dz * xv
			}
		}
	}
	// Adam (decoupled weight decay l2 on every weight)
	tr.t++
	tr.b1pow *= tr.b1
	tr.b2pow *= tr.b2
	c1 := 1 / (1 - tr.b1pow)
	c2 := 1 / (1 - tr.b2pow)
	lr, b1c, b2c, eps, l2 := tr.lr, tr.b1, tr.b2, tr.eps, tr.l2
	p, m, v, g := n.P, tr.m, tr.v, tr.g
	for i := range p {
		gi := g[i]
		m[i] = b1c*m[i] + (1-b1c)*gi
		v[i] = b2c*v[i] + (1-b2c)*gi*gi
		p[i] -= lr * (m[i]*c1/(math.Sqrt(v[i]*c2)+eps) + l2*p[i])
	}
}
