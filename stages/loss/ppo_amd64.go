//go:build amd64 && !purego && !amd64.v3

package loss

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
	"golang.org/x/sys/cpu"
)

// vectorPPO is whether (*PPO).Row runs its token loop four tokens at a time
// with AVX2 where it can (ppoVector). The pure-Go loop gives the same bits.
//
// The AVX2 form mirrors the Go loop operation by operation, without fused
// multiply-adds; with GOAMD64=v3 or above the compiler fuses the Go loop's
// x·y+z, so such builds (and the purego tag) keep the Go loop only.
var vectorPPO = cpu.X86.HasAVX2

// ppoArgs is the argument of ppoAVX2; ppo_amd64.s reads it at the offsets
// TestPPOArgsLayout pins.
type ppoArgs struct {
	lp, old, adv, mask, grad *float64
	n                        int     // tokens, a positive multiple of 4
	sums                     ppoSums // continued in token order
	lo, hi, c3, gs           [4]float64
	k                        *ppoConsts
	w                        *float64 // the weights, or ppoConsts.one
	wStep                    int      // bytes from four weights to the next: 32, or 0 for ones
}

// ppoConsts are the constants of ppoAVX2, four copies each: fastexp.Core's
// and the loop's.
type ppoConsts struct {
	invStep, round, ln2Hi, ln2Lo [4]float64
	c5, c4, c3, c2, one          [4]float64
	minD, maxD, sign, half       [4]float64 // -20, 20, -0, 0.5
	low6, high58                 [4]uint64  // 63, ^63
	table                        *[64]float64
}

var ppoK = func() *ppoConsts {
	c := fastexp.Constants()
	k := &ppoConsts{
		invStep: four(c.InvStep), round: four(c.Round), ln2Hi: four(c.Ln2Hi), ln2Lo: four(c.Ln2Lo),
		c5: four(c.C5), c4: four(c.C4), c3: four(c.C3), c2: four(c.C2), one: four(1),
		minD: four(-20), maxD: four(20), sign: four(negZero), half: four(0.5),
		table: c.Table,
	}
	for i := range k.low6 {
		k.low6[i], k.high58[i] = 63, ^uint64(63)
	}
	return k
}()

var negZero = math.Copysign(0, -1)

func four(x float64) [4]float64 { return [4]float64{x, x, x, x} }

// ppoAVX2 runs the token loop of ppoTokens.run over tokens [0, a.n) without
// fallback or sequence-mask drop, four tokens at a time, adding to a.sums in
// token order. Without weights it reads weights of 1: l·1 and 1·x are l and
// x, bit for bit (products, so no signalling NaN).
//
//go:noescape
func ppoAVX2(a *ppoArgs)

// ppoVector runs the token loop over the row's first n&^3 tokens with AVX2
// and returns how many it ran and their sums. The caller has checked that
// the row has no fallback or drop.
func ppoVector(p *ppoTokens) (int, ppoSums) {
	n := len(p.lp) &^ 3
	if n == 0 {
		return 0, ppoSums{}
	}
	old, adv, m, grad := p.old[:n], p.adv[:n], p.m[:n], p.grad[:n] // the bounds, checked
	a := ppoArgs{
		lp: &p.lp[0], old: &old[0], adv: &adv[0], mask: &m[0], grad: &grad[0],
		n:  n,
		lo: four(p.lo), hi: four(p.hi), c3: four(p.c3), gs: four(p.gs),
		k: ppoK, w: &ppoK.one[0],
	}
	if p.w != nil {
		a.w, a.wStep = &p.w[:n][0], 32
	}
	ppoAVX2(&a)
	return n, a.sums
}
