package physics

import (
	"os"
	"testing"
)

// BenchmarkSimStep: one step of the injection grey-box (discrete, 3 states,
// 5 outputs).
func BenchmarkSimStep(b *testing.B) {
	m := injection(b)
	s, err := m.NewSim(m.ParamVector())
	if err != nil {
		b.Fatal(err)
	}
	u := []float64{72, 8, 248}
	d := []float64{23, 1}
	x := s.Init(nil, u, d)
	xn := make([]float64, len(x))
	out := make([]float64, len(m.OutputNames()))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Step(x, u, d, 1, xn, out); err != nil {
			b.Fatal(err)
		}
		x, xn = xn, x
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkSimStepRK4: one 4-substep rk4 step of the cascaded tanks
// (16 derivative evaluations).
func BenchmarkSimStepRK4(b *testing.B) {
	m := mustParseFile(b, examples+"cascaded_tanks.aml")
	s, _ := m.NewSim(m.ParamVector())
	u := []float64{3}
	x := s.Init(nil, u, nil)
	xn := make([]float64, 2)
	out := make([]float64, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Step(x, u, nil, 4, xn, out); err != nil {
			b.Fatal(err)
		}
		x, xn = xn, x
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

func BenchmarkParse(b *testing.B) {
	src, err := os.ReadFile(examples + "injection.aml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse("injection.aml", src); err != nil {
			b.Fatal(err)
		}
	}
}
