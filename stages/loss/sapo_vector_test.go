package loss

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rftpipe/rftpipe/stages/tokens"
)

// vectorRow is a random row for the tests comparing a vector token loop
// with the Go loop: log-ratios drawn by logRatio, NaN (any payload, quiet
// or signalling), ±Inf, zero, fractional and NaN masks, advantages of
// either sign and ±0, weights (with NaN and ±Inf) where weighted,
// GradScale 0, -0, NaN, ±Inf, and a gradient of NaN to be overwritten.
func vectorRow(rng *rand.Rand, n int, weighted bool, logRatio func() float64) *tokens.Row {
	nan := func() float64 {
		b := uint64(0x7ff0000000000000) | rng.Uint64()&(1<<52-1) | 1
		if rng.IntN(2) == 0 {
			b |= 1 << 63
		}
		return math.Float64frombits(b)
	}
	special := func(d float64) float64 {
		switch rng.IntN(6) {
		case 0:
			return nan()
		case 1:
			return math.Inf(1)
		case 2:
			return math.Inf(-1)
		}
		return d
	}
	r := &tokens.Row{
		LP: make([]float64, n), Old: make([]float64, n), Adv: make([]float64, n),
		Mask: make([]float64, n), Grad: make([]float64, n),
		Scale:     []float64{1, 0.25, 1.0 / 3}[rng.IntN(3)],
		GradScale: []float64{0, 1, 0.37, -1.25, 1.0 / 4096, math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}[rng.IntN(9)],
	}
	if weighted {
		r.Weights = make([]float64, n)
	}
	for t := range n {
		d := logRatio()
		if rng.IntN(4) == 0 { // exact d
			r.Old[t], r.LP[t] = 0, d
		} else {
			r.Old[t] = -0.1 - 2*rng.Float64()
			r.LP[t] = r.Old[t] + d
		}
		if rng.IntN(25) == 0 {
			r.LP[t] = special(r.LP[t])
		}
		if rng.IntN(25) == 0 {
			r.Old[t] = special(r.Old[t])
		}
		r.Adv[t] = []float64{-1, -0.5, 0, math.Copysign(0, -1), 0.7, 2, rng.NormFloat64(), rng.NormFloat64()}[rng.IntN(8)]
		if rng.IntN(25) == 0 {
			r.Adv[t] = special(r.Adv[t])
		}
		r.Mask[t] = []float64{1, 1, 1, 0, math.Copysign(0, -1), 0.3, 2.5, nan()}[rng.IntN(8)]
		if rng.IntN(3) != 0 && r.Mask[t] != r.Mask[t] {
			r.Mask[t] = 1 // NaN masks in one row of three or so
		}
		r.Count += r.Mask[t]
		if weighted {
			r.Weights[t] = []float64{0, 1, rng.Float64() * 2, rng.Float64() * 2}[rng.IntN(4)]
			if rng.IntN(8) == 0 {
				r.Weights[t] = special(r.Weights[t])
			}
		}
		r.Grad[t] = nan() // overwritten at every position
	}
	return r
}

// vectorLengths are the row lengths of the vector loop tests: every length
// 0..37 and a few long ones.
func vectorLengths() []int {
	lengths := []int{1000, 4096, 4099}
	for n := range 38 {
		lengths = append(lengths, n)
	}
	return lengths
}

// sameRow runs k.Row on r with the vector loop on and off (set by
// vector) and fails unless every sum and gradient bit is the same.
func sameRow(t *testing.T, name string, k tokens.Kernel, r *tokens.Row, vector func(bool)) {
	t.Helper()
	grad := append([]float64(nil), r.Grad...)
	sVec, sGo := make([]float64, k.Sums()), make([]float64, k.Sums())
	vector(true)
	k.Row(r, sVec)
	gVec := append([]float64(nil), r.Grad...)
	copy(r.Grad, grad)
	vector(false)
	k.Row(r, sGo)
	for i := range sGo {
		if math.Float64bits(sVec[i]) != math.Float64bits(sGo[i]) {
			t.Fatalf("%s: sum %d %v (%#x) with the vector loop, %v (%#x) without",
				name, i, sVec[i], math.Float64bits(sVec[i]), sGo[i], math.Float64bits(sGo[i]))
		}
	}
	for i := range gVec {
		if math.Float64bits(gVec[i]) != math.Float64bits(r.Grad[i]) {
			t.Fatalf("%s: grad[%d] %v (%#x) with the vector loop, %v (%#x) without; lp %v old %v adv %v mask %v",
				name, i, gVec[i], math.Float64bits(gVec[i]), r.Grad[i], math.Float64bits(r.Grad[i]),
				r.LP[i], r.Old[i], r.Adv[i], r.Mask[i])
		}
	}
}

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
