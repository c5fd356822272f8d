package loss

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
)

// TestCISPOVectorBits compares (*CISPO).Row with its vector token loop
// against the Go loop alone, every gradient and sum bit (vectorRow's rows),
// with log-ratios beyond ±20 and ±708 (groups the vector loop leaves to
// the Go loop) and ratios exactly at the clip and mask-clip bounds, for the
// default, mask-clip and verl settings and bounds the argument checks
// refuse.
func TestCISPOVectorBits(t *testing.T) {
	if !vectorCISPO {
		t.Skip("no vector CISPO loop in this build or on this CPU")
	}
	defer func(v bool) { vectorCISPO = v }(vectorCISPO)
	rng := rand.New(rand.NewPCG(25, 8))
	// Log-ratios whose ratios are the bounds: 1-(1-r) and (r-1)+1 are
	// exact for r in [0.5, 2].
	dLo, dHi := -0.17, 0.23
	rLo, rHi := fastexp.Core(dLo), fastexp.Core(dHi)
	kernels := []CISPO{
		{Low: 1, High: 0.28},
		{Low: 1, High: 0.28, MaskClip: true, MaskLow: 1, MaskHigh: 0.28},
		{Low: 1 - rLo, High: rHi - 1, MaskClip: true, MaskLow: 1 - rLo, MaskHigh: rHi - 1},
		{Low: 0.2, High: 0.28, Verl: true},
		{Low: 1 - rLo, High: rHi - 1, Verl: true},
		{Low: -0.5, High: 0.28, MaskClip: true, MaskLow: -1, MaskHigh: 0}, // settings the argument checks refuse
		{Low: math.NaN(), High: math.NaN(), MaskClip: true, MaskLow: math.NaN(), MaskHigh: math.NaN()},
		{Low: math.Inf(1), High: math.Inf(1), Verl: true},
	}
	if 1-kernels[2].Low != rLo || 1+kernels[2].High != rHi {
		t.Fatal("the clip bounds are not the ratios")
	}
	logRatio := func() float64 {
		switch rng.IntN(10) {
		case 0:
			return []float64{dLo, dHi}[rng.IntN(2)]
		case 1:
			return []float64{-20, 20, -25, 25, -1e3, 1e3, -708, 709, -707.99, 708.99, -708.01, 709.01, -745, 709.7}[rng.IntN(14)]
		case 2:
			return 2 * rng.Float64()
		}
		return 0.6 * rng.NormFloat64()
	}
	vector := func(v bool) { vectorCISPO = v }
	for ki := range kernels {
		k := &kernels[ki]
		for _, n := range vectorLengths() {
			for rep := range 40 {
				r := vectorRow(rng, n, rep%10 == 9, logRatio)
				sameRow(t, fmt.Sprintf("kernel %d (%+v), length %d, row %d", ki, *k, n, rep), k, r, vector)
			}
		}
	}
}

// TestCISPOVectorRange checks that cispoVector runs whole groups of four
// from where it is asked to, stops at the first group with a log-ratio
// outside Core's range (an unmasked d of -800) without writing it, and
// returns the Go loop's sums of the tokens it ran.
func TestCISPOVectorRange(t *testing.T) {
	if !vectorCISPO {
		t.Skip("no vector CISPO loop in this build or on this CPU")
	}
	rng := rand.New(rand.NewPCG(7, 10))
	for _, tc := range []struct {
		n, from, far, want int // far: the token with d = -800, or -1
		weighted           bool
	}{
		{0, 0, -1, 0, false}, {3, 0, -1, 0, false}, {7, 4, -1, 4, false}, {33, 0, -1, 32, true},
		{4099, 8, -1, 4096, true}, {33, 0, 13, 12, false}, {33, 12, 13, 12, true}, {33, 16, 13, 32, false},
	} {
		p := cispoTokens{
			lp: make([]float64, tc.n), old: make([]float64, tc.n), adv: make([]float64, tc.n),
			m: make([]float64, tc.n), grad: make([]float64, tc.n), lo: 0, hi: 1.28, maskLo: 0, maskHi: 1.28, gs: 0.5,
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
			p.lp[tc.far], p.old[tc.far], p.m[tc.far] = -800, 0, 1
		}
		s0 := cispoSums{L: 1, KL: 2, Keep: 3}
		to, s := cispoVector(&p, tc.from, s0)
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
