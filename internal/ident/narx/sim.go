package narx

import (
	"math"
)

// block is one training segment's train rows [0, cut) and validation
// rows [cut, hi).
type block struct{ cut, hi int }

// simTrainer trains the network on the simulation error of short
// subsequences of the train rows: each starts from lag measured outputs
// and runs L steps on its own predictions; the gradient is
// back-propagated through the L steps (through the network and the fixed
// linear term) — truncated back-propagation through time.
type simTrainer struct {
	a      *adam
	m      *Model
	L      int
	batch  int
	phis   [][]float64   // [L][d]
	acts   [][][]float64 // [L][layers+1][size]
	delta  [][]float64
	yloc   [][]float64 // [lag+L][ny]
	dY     [][]float64 // [L][ny]
	dphi   []float64
	starts [][2]int
}

func newSimTrainer(a *adam, m *Model, L, batch int) *simTrainer {
	st := &simTrainer{a: a, m: m, L: L, batch: batch, dphi: make([]float64, m.Dim())}
	for j := 0; j < L; j++ {
		st.phis = append(st.phis, make([]float64, m.Dim()))
		var acts [][]float64
		for _, s := range a.n.sizes {
			acts = append(acts, make([]float64, s))
		}
		st.acts = append(st.acts, acts)
		st.dY = append(st.dY, make([]float64, m.NY))
	}
	for _, s := range a.n.sizes {
		st.delta = append(st.delta, make([]float64, s))
	}
	for j := 0; j < m.Lag()+L; j++ {
		st.yloc = append(st.yloc, make([]float64, m.NY))
	}
	return st
}

// epoch is one pass over subsequences tiling the train rows (a random
// offset per segment), shuffled, in minibatches; it returns the mean
// squared simulation error (normalised units).
func (st *simTrainer) epoch(yns, uns [][][]float64, blocks []block) float64 {
	lag, L := st.m.Lag(), st.L
	st.starts = st.starts[:0]
	for s, b := range blocks {
		off := st.a.rng.IntN(L)
		for t0 := lag + off; t0+L <= b.cut; t0 += L {
			st.starts = append(st.starts, [2]int{s, t0})
		}
	}
	st.a.rng.Shuffle(len(st.starts), func(i, j int) { st.starts[i], st.starts[j] = st.starts[j], st.starts[i] })
	loss, cnt := 0.0, 0
	for lo := 0; lo < len(st.starts); lo += st.batch {
		batch := st.starts[lo:min(len(st.starts), lo+st.batch)]
		clear(st.a.g)
		norm := 2 / float64(len(batch)*L*st.m.NY)
		for _, sq := range batch {
			l, ok := st.sequence(yns[sq[0]], uns[sq[0]], sq[1], norm)
			if ok {
				loss += l
				cnt += L * st.m.NY
			}
		}
		st.a.update()
	}
	if cnt == 0 {
		return math.Inf(1)
	}
	return loss / float64(cnt)
}

// sequence simulates the subsequence starting at t0 and adds its gradient
// to the trainer's; it returns the summed squared error (false when the
// simulation is not finite: then it adds nothing).
func (st *simTrainer) sequence(yn, un [][]float64, t0 int, norm float64) (float64, bool) {
	m, n := st.m, st.a.n
	lag, L, d, ny := m.Lag(), st.L, m.Dim(), m.NY
	for i := 0; i < lag; i++ {
		copy(st.yloc[i], yn[t0-lag+i])
	}
	uloc := un[t0-lag : t0+L]
	loss := 0.0
	for j := 0; j < L; j++ {
		t := lag + j
		phi := st.phis[j]
		m.regressor(phi, st.yloc, uloc, t)
		out := n.forward(phi, st.acts[j])
		for o, row := range m.Lin {
			a := row[d] + out[o]
			for k, v := range phi {
				a += row[k] * v
			}
			if math.IsNaN(a) || math.IsInf(a, 0) || math.Abs(a) > 1e6 {
				return 0, false
			}
			st.yloc[t][o] = a
			e := a - yn[t0+j][o]
			loss += e * e
			st.dY[j][o] = norm * e
		}
	}
	for j := L - 1; j >= 0; j-- {
		n.backward(st.acts[j], st.delta, st.dY[j], st.a.g, st.dphi)
		for o, row := range m.Lin {
			g := st.dY[j][o]
			for k := range st.dphi {
				st.dphi[k] += row[k] * g
			}
		}
		for o := 0; o < ny; o++ {
			for i := 1; i <= m.NA && j-i >= 0; i++ {
				st.dY[j-i][o] += st.dphi[o*m.NA+i-1]
			}
		}
	}
	return loss, true
}
