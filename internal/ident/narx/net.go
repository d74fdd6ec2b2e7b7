package narx

import (
	"math/rand/v2"

	"github.com/aml-project/aml/internal/ident/mlp"
)

// net is an MLP on one flat parameter vector (the optimiser's view), laid
// out by internal/ident/mlp: per layer W [out×in] row-major then b; tanh
// on the hidden layers, linear output.
type net struct {
	*mlp.Net
	sizes []int
	p     []float64
}

func newNet(sizes []int) *net {
	l := mlp.New(sizes, 0)
	return &net{Net: l, sizes: l.Sizes, p: make([]float64, l.Len())}
}

func (n *net) layers() int       { return n.Layers() }
func (n *net) w(l int) []float64 { return n.W(n.p, l) }
func (n *net) b(l int) []float64 { return n.B(n.p, l) }

// into points m's layers at the network's weights (views, no copy).
func (n *net) into(m *Model) {
	m.Layers = make([]Layer, n.layers())
	for l := range m.Layers {
		m.Layers[l] = Layer{In: n.sizes[l], Out: n.sizes[l+1], W: n.w(l), B: n.b(l)}
	}
}

// adam trains a net by Adam (mlp.Adam) on the mean squared error of
// minibatches.
type adam struct {
	n          *net
	g          []float64
	opt        *mlp.Adam
	batch      int
	rng        *rand.Rand
	order      []int
	act, delta [][]float64 // per layer boundary: activations, back-propagated errors
	dOut       []float64
}

func newAdam(n *net, lr float64, batch, samples int, rng *rand.Rand) *adam {
	a := &adam{n: n, g: make([]float64, len(n.p)), opt: mlp.NewAdam(len(n.p), lr),
		batch: batch, rng: rng, order: make([]int, samples), act: n.Scratch(), delta: n.Scratch(), dOut: make([]float64, n.Out())}
	for i := range a.order {
		a.order[i] = i
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
	return loss / float64(len(a.order)*a.n.Out())
}

// step back-propagates one minibatch, applies one Adam update and returns
// the batch's summed squared error.
func (a *adam) step(X, Y []float64, batch []int) float64 {
	n := a.n
	in, out := n.In(), n.Out()
	clear(a.g)
	norm := 2 / float64(len(batch)*out)
	loss := 0.0
	for _, s := range batch {
		y := n.Forward(n.p, X[s*in:(s+1)*in], a.act)
		for o := range a.dOut {
			e := y[o] - Y[s*out+o]
			loss += e * e
			a.dOut[o] = norm * e
		}
		n.Backward(n.p, a.act, a.delta, a.dOut, a.g, nil)
	}
	a.update()
	return loss
}

// update applies one Adam step with the gradient in a.g (none when it is
// not finite: a diverging simulation must not wreck the weights).
func (a *adam) update() { a.opt.Step(a.n.p, a.g) }

// forward computes the network on x, keeping every layer's output in acts
// (acts[0] = x, len layers+1), and returns the output.
func (n *net) forward(x []float64, acts [][]float64) []float64 {
	return n.Forward(n.p, x, acts)
}

// backward back-propagates dOut (the loss gradient at the output) through
// the forward pass kept in acts: it adds the weight gradient to g and
// writes the gradient at the input into dx; delta is scratch like acts.
func (n *net) backward(acts, delta [][]float64, dOut, g, dx []float64) {
	n.Backward(n.p, acts, delta, dOut, g, dx)
}
