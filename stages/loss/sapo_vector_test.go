package loss

import (
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
		{TauPos: 1e-310, TauNeg: 1e300},
		{TauPos: -1, TauNeg: 0, PaperGradient: true}, // as upstream: only tau_neg >= tau_pos is checked
		{TauPos: 0, TauNeg: -1, PaperGradient: true},
		{TauPos: math.NaN(), TauNeg: math.Inf(1)}, // settings the argument checks refuse
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
	checkVectorBits(t, rng, kernels, logRatio, &vectorSAPO)
}

// TestSAPOVectorRange checks that sapoVector runs whole groups of four
// from where it is asked to, stops at the first group with an exp argument
// outside Core's range (an unmasked d of 800) without writing it, and
// returns the Go loop's sums of the tokens it ran.
func TestSAPOVectorRange(t *testing.T) {
	if !vectorSAPO {
		t.Skip("no vector SAPO loop in this build or on this CPU")
	}
	checkVectorRange(t, rand.New(rand.NewPCG(7, 9)), 800, sapoSums{L: 1, KL: 2, Gate: 3, Ratio: 4, Pos: 5}, sapoTokens{tauPos: 1, tauNeg: 1.05, gs: 0.5},
		func(p *sapoTokens) (lp, old, adv, m, grad, w *[]float64) {
			return &p.lp, &p.old, &p.adv, &p.m, &p.grad, &p.w
		},
		sapoVector, (*sapoTokens).run)
}
