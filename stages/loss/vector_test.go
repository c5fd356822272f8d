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

// checkVectorBits compares the kernels' Row with their vector token loop
// (switched by *on, restored after) against the Go loop alone (sameRow),
// over 40 random rows of every vectorLengths() length, every tenth
// weighted, with log-ratios drawn by logRatio. That the vector loop runs
// at all is the Test*VectorRange tests' to show.
func checkVectorBits[K any, PK interface {
	*K
	tokens.Kernel
}](t *testing.T, rng *rand.Rand, kernels []K, logRatio func() float64, on *bool) {
	t.Helper()
	defer func(v bool) { *on = v }(*on)
	vector := func(v bool) { *on = v }
	for ki := range kernels {
		k := PK(&kernels[ki])
		for _, n := range vectorLengths() {
			for rep := range 40 {
				r := vectorRow(rng, n, rep%10 == 9, logRatio)
				sameRow(t, fmt.Sprintf("kernel %d (%+v), length %d, row %d", ki, kernels[ki], n, rep), k, r, vector)
			}
		}
	}
}

// checkVectorRange checks a vector loop vec that runs groups of four from
// where it is asked to and stops at the first group holding a token whose
// exp argument is out of Core's range: on rows of n tokens (weighted or
// not) with, at token far (-1: none), an unmasked log-ratio farD, vec from
// token from runs to token want, writes no gradient outside what it ran,
// and returns the sums the Go loop run gives over the tokens it ran, and
// their gradients. params holds the token loop's settings (its columns are
// made here); cols names its lp, old, adv, m, grad and w columns.
func checkVectorRange[T any, S comparable](t *testing.T, rng *rand.Rand, farD float64, s0 S, params T,
	cols func(*T) (lp, old, adv, m, grad, w *[]float64), vec func(*T, int, S) (int, S), run func(*T, int, int, S) S) {
	t.Helper()
	for _, tc := range []struct {
		n, from, far, want int
		weighted           bool
	}{
		{0, 0, -1, 0, false}, {3, 0, -1, 0, false}, {7, 4, -1, 4, false}, {33, 0, -1, 32, true},
		{4099, 8, -1, 4096, true}, {33, 0, 13, 12, false}, {33, 12, 13, 12, true}, {33, 16, 13, 32, false},
	} {
		p := params
		lp, old, adv, m, grad, w := cols(&p)
		*lp, *old, *adv, *m, *grad = make([]float64, tc.n), make([]float64, tc.n), make([]float64, tc.n), make([]float64, tc.n), make([]float64, tc.n)
		if tc.weighted {
			*w = make([]float64, tc.n)
		}
		for i := range tc.n {
			(*lp)[i], (*old)[i], (*adv)[i] = rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
			(*m)[i] = float64(rng.IntN(2))
			(*grad)[i] = -7
			if *w != nil {
				(*w)[i] = 2 * rng.Float64()
			}
		}
		if tc.far >= 0 {
			(*lp)[tc.far], (*old)[tc.far], (*m)[tc.far] = farD, 0, 1
		}
		to, s := vec(&p, tc.from, s0)
		if to != tc.want {
			t.Fatalf("%+v: ran to token %d, want %d", tc, to, tc.want)
		}
		for i := range tc.n {
			if (i < tc.from || i >= to) && (*grad)[i] != -7 {
				t.Fatalf("%+v: wrote grad[%d]", tc, i)
			}
		}
		want := p
		_, _, _, _, wantGrad, _ := cols(&want)
		*wantGrad = make([]float64, tc.n)
		if ws := run(&want, tc.from, to, s0); s != ws {
			t.Fatalf("%+v: sums %+v, the Go loop's %+v", tc, s, ws)
		}
		for i := tc.from; i < to; i++ {
			if (*grad)[i] != (*wantGrad)[i] {
				t.Fatalf("%+v: grad[%d] %v, the Go loop's %v", tc, i, (*grad)[i], (*wantGrad)[i])
			}
		}
	}
}

// sameRow runs k.Row on r with the vector loop on and off (set by
// vector) and fails unless every sum and gradient bit is the same (a NaN's
// payload aside where nanPayloads is false).
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
	same := func(a, b float64) bool {
		return math.Float64bits(a) == math.Float64bits(b) || !nanPayloads && a != a && b != b
	}
	for i := range sGo {
		if !same(sVec[i], sGo[i]) {
			t.Fatalf("%s: sum %d %v (%#x) with the vector loop, %v (%#x) without",
				name, i, sVec[i], math.Float64bits(sVec[i]), sGo[i], math.Float64bits(sGo[i]))
		}
	}
	for i := range gVec {
		if !same(gVec[i], r.Grad[i]) {
			t.Fatalf("%s: grad[%d] %v (%#x) with the vector loop, %v (%#x) without; lp %v old %v adv %v mask %v",
				name, i, gVec[i], math.Float64bits(gVec[i]), r.Grad[i], math.Float64bits(r.Grad[i]),
				r.LP[i], r.Old[i], r.Adv[i], r.Mask[i])
		}
	}
}

// TestTokenLoopsDoNotAllocate: the kernels with a vector form allocate
// nothing per row (a token loop moved to the heap costs CISPO a quarter of
// its speed).
func TestTokenLoopsDoNotAllocate(t *testing.T) {
	const n = 64
	for _, k := range []tokens.Kernel{&PPO{Low: 0.2, High: 0.2, ClipC: 3}, &SAPO{TauPos: 1, TauNeg: 1.05}, &CISPO{Low: 0.2, High: 0.2}} {
		lp := make([]float64, n)
		r := &tokens.Row{LP: lp, Old: lp, Adv: lp, Mask: lp, Grad: make([]float64, n), Count: float64(n), Scale: 1, GradScale: 1}
		s := make([]float64, k.Sums())
		if a := testing.AllocsPerRun(20, func() { k.Row(r, s) }); a != 0 {
			t.Errorf("%T.Row allocates %v times a row", k, a)
		}
	}
}
