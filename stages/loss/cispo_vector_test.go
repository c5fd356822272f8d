package loss

import (
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
	checkVectorBits(t, rng, kernels, logRatio, &vectorCISPO)
}

// TestCISPOVectorRange checks that cispoVector runs whole groups of four
// from where it is asked to, stops at the first group with a log-ratio
// outside Core's range (an unmasked d of -800) without writing it, and
// returns the Go loop's sums of the tokens it ran.
func TestCISPOVectorRange(t *testing.T) {
	if !vectorCISPO {
		t.Skip("no vector CISPO loop in this build or on this CPU")
	}
	checkVectorRange(t, rand.New(rand.NewPCG(7, 10)), -800, cispoSums{L: 1, KL: 2, Keep: 3}, cispoTokens{lo: 0, hi: 1.28, maskLo: 0, maskHi: 1.28, gs: 0.5},
		func(p *cispoTokens) (lp, old, adv, m, grad, w *[]float64) {
			return &p.lp, &p.old, &p.adv, &p.m, &p.grad, &p.w
		},
		cispoVector, (*cispoTokens).run)
}
