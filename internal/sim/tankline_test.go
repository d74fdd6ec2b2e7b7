package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPlantHistoryTrimKeepsTheProcess: the plant keeps only the inputs
// its dead times need; the levels it produces over a long run with input
// changes are those of the same process computed with the whole history.
func TestPlantHistoryTrimKeepsTheProcess(t *testing.T) {
	for _, dt := range []int{1, 5} {
		p := newPlantRun(rand.New(rand.NewPCG(3, 9)), dt, 0.2)
		ref := rand.New(rand.NewPCG(3, 9))
		var h1, h2 []float64
		y, u1, u2, hold := plantLevel0+0.2, 50.0, 15.0, 0
		a := math.Exp(-float64(dt) / plantTauSec)
		delayed := func(h []float64, d int) float64 {
			if len(h) > d {
				return h[len(h)-1-d]
			}
			return h[0]
		}
		for k := range 5000 {
			if hold <= 0 {
				u1, u2 = 42+16*ref.Float64(), 11+8*ref.Float64()
				hold = int((120 + 240*ref.Float64()) / float64(dt))
			}
			hold--
			h1, h2 = append(h1, u1), append(h2, u2)
			ss := plantLevel0 + 0.2 + plantK1*(delayed(h1, p.d1)-50) + plantK2*(delayed(h2, p.d2)-15)
			y = a*y + (1-a)*ss
			want := y + plantNoiseSD*ref.NormFloat64()
			if _, _, got := p.step(); got != want {
				t.Fatalf("dt %d step %d: level %v, whole-history process %v", dt, k, got, want)
			}
		}
		if len(p.hist1) > 4*(max(p.d1, p.d2)+1)+256 {
			t.Fatalf("dt %d: history of %d inputs kept", dt, len(p.hist1))
		}
	}
}
