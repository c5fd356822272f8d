//go:build amd64 && !purego && !amd64.v3

package loss

import "golang.org/x/sys/cpu"

// vectorCISPO is whether (*CISPO).Row runs its token loop four tokens at a
// time with AVX2 (cispoVector), as vectorPPO for PPO: the same bits as the
// Go loop, every setting (mask clip, verl) included.
var vectorCISPO = cpu.X86.HasAVX2

// cispoArgs is the argument of cispoAVX2; cispo_amd64.s reads it at the
// offsets TestCISPOArgsLayout pins.
type cispoArgs struct {
	lp, old, adv, mask, grad   *float64 // at the first token to run
	n                          int      // tokens to run, a positive multiple of 4; on return, those run
	sums                       cispoSums
	lo, hi, maskLo, maskHi, gs [4]float64
	k                          *ppoConsts
	ck                         *coreConsts
	w                          *float64 // the weights, or ppoConsts.one
	wStep                      int      // bytes from four weights to the next: 32, or 0 for ones
	maskClip, verl             bool
}

// cispoAVX2 runs the token loop of cispoTokens.run over the a.n tokens from
// a.lp on, four at a time, adding to a.sums in token order, and stops at
// the first group of four with an unmasked token whose log-ratio the Go
// loop gives to math.Exp rather than fastexp.Core; a.n is then the number
// of tokens it ran. Without weights it reads weights of 1 (as ppoAVX2).
//
//go:noescape
func cispoAVX2(a *cispoArgs)

// cispoVector runs the token loop from token from (a multiple of 4) over
// the groups of four that follow, up to the row's n&^3 tokens or the first
// group that cispoAVX2 leaves to the Go loop, continuing the sums s; it
// returns where it stopped and the sums so far.
func cispoVector(p *cispoTokens, from int, s cispoSums) (int, cispoSums) {
	n := len(p.lp) &^ 3
	if from >= n {
		return from, s
	}
	lp, old, adv, m, grad := p.lp[from:n], p.old[from:n], p.adv[from:n], p.m[from:n], p.grad[from:n] // the bounds, checked
	a := cispoArgs{
		lp: &lp[0], old: &old[0], adv: &adv[0], mask: &m[0], grad: &grad[0],
		n: n - from, sums: s,
		lo: four(p.lo), hi: four(p.hi), maskLo: four(p.maskLo), maskHi: four(p.maskHi), gs: four(p.gs),
		k: ppoK, ck: coreK, w: &ppoK.one[0],
		maskClip: p.maskClip, verl: p.verl,
	}
	if p.w != nil {
		a.w, a.wStep = &p.w[from:n][0], 32
	}
	cispoAVX2(&a)
	return from + a.n, a.sums
}
