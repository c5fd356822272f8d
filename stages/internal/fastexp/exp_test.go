package fastexp

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExp(t *testing.T) {
	tests := []struct {
		name   string
		lo, hi float64
	}{
		{"small", -1, 1},
		{"clamped log-ratios", -20, 20},
		{"wide", -707, 708},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			worst := 0.0
			for i := 0; i < 200000; i++ {
				x := tc.lo + (tc.hi-tc.lo)*rng.Float64()
				want := math.Exp(x)
				if e := math.Abs(Exp(x)-want) / want; e > worst {
					worst = e
				}
			}
			if worst > 6e-16 { // ~2.7 ulp: both functions are within ~1.5 ulp of e^x
				t.Errorf("max relative error %g", worst)
			}
		})
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 710, -746, 0} {
		got, want := Exp(x), math.Exp(x)
		if !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("exp(%v) = %v, want %v", x, got, want)
		}
	}
}

func BenchmarkExp(b *testing.B) {
	x := make([]float64, 4096)
	for i := range x {
		x[i] = float64(i)/4096 - 0.5
	}
	for _, bc := range []struct {
		name string
		f    func(float64) float64
	}{{"fast", Exp}, {"math", math.Exp}} {
		b.Run(bc.name, func(b *testing.B) {
			s := 0.0
			for b.Loop() {
				for _, v := range x {
					s += bc.f(v)
				}
			}
			if s == 0 {
				b.Fatal("sum 0")
			}
		})
	}
}
