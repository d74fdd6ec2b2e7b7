package nss

import "math"

// sequence simulates the subsequence of L steps (L ≤ w.L) starting at
// row t0 of the normalised record (yn, un) — the state at t0 from the
// encoder over the rows before it — and returns the summed squared
// output error. When g is not nil it adds to g the gradient of
// norm/2 × that sum by back-propagation through the L steps, the
// transitions, the output map and the encoder. It returns false (and
// adds nothing) when the simulation leaves the finite range.
func (l *layout) sequence(w *work, p []float64, m *Model, yn, un [][]float64, t0, L int, norm float64, g []float64) (float64, bool) {
	n, nu, ny := l.n, l.nu, l.ny
	m.regressor(w.phi, yn, un, t0)
	l.encode(p, w.phi, w.encActs, w.xs[0])
	sse := 0.0
	for k := 0; k < L; k++ {
		z := w.z[k]
		copy(z, w.xs[k])
		copy(z[n:], un[t0+k])
		l.output(p, z, w.hActs[k], w.y)
		for o, v := range w.y {
			if math.IsNaN(v) || math.Abs(v) > 1e6 {
				return 0, false
			}
			e := v - yn[t0+k][o]
			sse += e * e
			w.dY[k][o] = norm * e
		}
		if k+1 < L {
			l.transition(p, z, w.fActs[k], w.xs[k+1])
		}
	}
	if g == nil {
		return sse, true
	}
	A, C := p[l.oA:l.oB], p[l.oC:l.oD]
	gA, gB, gC, gD := g[l.oA:l.oB], g[l.oB:l.oC], g[l.oC:l.oD], g[l.oD:l.oE]
	gx, gxk := w.gx, w.gxk // gx: the gradient at x(k+1)
	clear(gx)
	for k := L - 1; k >= 0; k-- {
		x, u := w.xs[k], w.z[k][n:]
		clear(gxk)
		if k+1 < L {
			for i, gi := range gx {
				if gi == 0 {
					continue
				}
				for c, v := range x {
					gA[i*n+c] += gi * v
					gxk[c] += A[i*n+c] * gi
				}
				for j, v := range u {
					gB[i*nu+j] += gi * v
				}
			}
			l.f.Backward(p, w.fActs[k], w.fD, gx, g, w.dzf)
			for c := range gxk {
				gxk[c] += w.dzf[c]
			}
		}
		dy := w.dY[k]
		for o := 0; o < ny; o++ {
			d := dy[o]
			for c, v := range x {
				gC[o*n+c] += d * v
				gxk[c] += C[o*n+c] * d
			}
			if l.dh > n {
				for j, v := range u {
					gD[o*nu+j] += d * v
				}
			}
		}
		l.h.Backward(p, w.hActs[k], w.hD, dy, g, w.dz[:l.dh])
		for c := range gxk {
			gxk[c] += w.dz[c]
		}
		gx, gxk = gxk, gx
	}
	// the encoder: x(t0) = E φ + e0 + enc(φ)
	gE, g0 := g[l.oE:l.o0], g[l.o0:l.o0+n]
	for i, gi := range gx {
		g0[i] += gi
		row := gE[i*l.dE : (i+1)*l.dE]
		for k, v := range w.phi {
			row[k] += gi * v
		}
	}
	l.enc.Backward(p, w.encActs, w.encD, gx, g, nil)
	return sse, true
}
