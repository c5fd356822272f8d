package loss

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSAPOVectorBits compares (*SAPO).Row with its vector token loop
// against the Go loop alone, every gradient and sum bit (vectorRow's rows),
// with log-ratios beyond ±20 and ±708 and ratios whose gate argument z is
// beyond Core's range (groups the vector loop leaves to the Go loop), for
// the default, paper-gradient and verl settings and temperatures the
// argument checks refuse.
func TestSAPOVectorBits(t *testing.T) {
	if !vectorSAPO {
		t.Skip("no vector SAPO loop in this build or on this CPU")
	}
	defer func(v bool) { vectorSAPO = v }(vectorSAPO)
	rng := rand.New(rand.NewPCG(25, 7))
	kernels := []SAPO{
		{TauPos: 1, TauNeg: 1.05},
		{TauPos: 1, TauNeg: 1.05, PaperGradient: true},
		{TauPos: 1, TauNeg: 1.05, Verl: true},
		{TauPos: 0.1, TauNeg: 3, PaperGradient: true, Verl: true},
		{TauPos: 2, TauNeg: 2},
		// a tiny temperature keeps log-ratios clamped at ±20 in the gate's
		// range, so they run in the vector loop, not the Go loop's groups
		{TauPos: 2e-9, TauNeg: 2e-9, Verl: true},
		{TauPos: 1e-310, TauNeg: 1e300}, // settings the argument checks refuse
		{TauPos: 0, TauNeg: -1, PaperGradient: true},
		{TauPos: math.NaN(), TauNeg: math.Inf(1)},
	}
	logRatio := func() float64 {
		switch rng.IntN(12) {
		case 0:
			return []float64{-20, 20, -25, 25, 6.5, 6.6, 7, -1e3, 1e3}[rng.IntN(9)]
		case 1:
			return []float64{-708, 709, -707.99, 708.99, -708.01, 709.01, -745, 709.7}[rng.IntN(8)]
		case 2:
			return 4 * rng.Float64()
		}
		return 0.6 * rng.NormFloat64()
	}
	vector := func(v bool) { vectorSAPO = v }
	vectorRows := 0
	for ki := range kernels {
		k := &kernels[ki]
		for _, n := range vectorLengths() {
			for rep := range 40 {
				r := vectorRow(rng, n, rep%10 == 9, logRatio)
				sameRow(t, fmt.Sprintf("kernel %d (%+v), length %d, row %d", ki, *k, n, rep), k, r, vector)
				if n >= 4 {
					vectorRows++
				}
			}
		}
	}
	if vectorRows == 0 {
		t.Fatal("no row took the vector loop")
	}
}

// TestSAPOVectorRange checks that sapoVector runs whole groups of four
// from where it is asked to, stops at the first group with an exp argument
// outside Core's range (an unmasked d of 800) without writing it, and
// returns the Go loop's sums of the tokens it ran.
func TestSAPOVectorRange(t *testing.T) {
	if !vectorSAPO {
		t.Skip("no vector SAPO loop in this build or on this CPU")
	}
	rng := rand.New(rand.NewPCG(7, 9))
	for _, tc := range []struct {
		n, from, far, want int // far: the token with d = 800, or -1
		weighted           bool
	}{
		{0, 0, -1, 0, false}, {3, 0, -1, 0, false}, {7, 4, -1, 4, false}, {33, 0, -1, 32, true},
		{4099, 8, -1, 4096, true}, {33, 0, 13, 12, false}, {33, 12, 13, 12, true}, {33, 16, 13, 32, false},
	} {
		p := sapoTokens{
			lp: make([]float64, tc.n), old: make([]float64, tc.n), adv: make([]float64, tc.n),
			m: make([]float64, tc.n), grad: make([]float64, tc.n), tauPos: 1, tauNeg: 1.05, gs: 0.5,
		}
		if tc.weighted {
			p.w = make([]float64, tc.n)
		}
		for i := range tc.n {
			p.lp[i], p.old[i], p.adv[i] = rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
			p.m[i] = float64(rng.IntN(2))
			p.grad[i] = -7
			if p.w != nil {
				p.w[i] = 2 * rng.Float64()
			}
		}
		if tc.far >= 0 {
			p.lp[tc.far], p.old[tc.far], p.m[tc.far] = 800, 0, 1
		}
		s0 := sapoSums{L: 1, KL: 2, Gate: 3, Ratio: 4, Pos: 5}
		to, s := sapoVector(&p, tc.from, s0)
		if to != tc.want {
			t.Fatalf("%+v: ran to token %d, want %d", tc, to, tc.want)
		}
		for i := range tc.n {
			if (i < tc.from || i >= to) && p.grad[i] != -7 {
				t.Fatalf("%+v: wrote grad[%d]", tc, i)
			}
		}
		want := p
		want.grad = make([]float64, tc.n)
		if w := want.run(tc.from, to, s0); s != w {
			t.Fatalf("%+v: sums %+v, the Go loop's %+v", tc, s, w)
		}
		for i := tc.from; i < to; i++ {
			if p.grad[i] != want.grad[i] {
				t.Fatalf("%+v: grad[%d] %v, the Go loop's %v", tc, i, p.grad[i], want.grad[i])
			}
		}
	}
}
