//go:build amd64 && !purego && !amd64.v3

package loss

import "golang.org/x/sys/cpu"

// vectorSAPO is whether (*SAPO).Row runs its token loop four tokens at a
// time with AVX2 (sapoVector), as vectorPPO for PPO: the same bits as the
// Go loop, every setting (paper gradient, verl) included.
var vectorSAPO = cpu.X86.HasAVX2

// sapoArgs is the argument of sapoAVX2; sapo_amd64.s reads it at the
// offsets TestSAPOArgsLayout pins.
type sapoArgs struct {
	lp, old, adv, mask, grad *float64 // at the first token to run
	n                        int      // tokens to run, a positive multiple of 4; on return, those run
	sums                     sapoSums // continued in token order
	tauPos, tauNeg, gs       [4]float64
	k                        *ppoConsts
	ck                       *coreConsts
	w                        *float64 // the weights, or ppoConsts.one
	wStep                    int      // bytes from four weights to the next: 32, or 0 for ones
	clampD, paper            bool
}

// coreConsts are the constants of sapoAVX2 and cispoAVX2 beyond
// ppoConsts, four copies each: the bounds of the arguments of exp that the
// Go loops give to fastexp.Core (fastexp.Exp's for d, SAPO's for -z), and 4.
type coreConsts struct {
	dMin, dMax, zMin, zMax, fours [4]float64 // -708, 709, -709, 708, 4
}

var coreK = &coreConsts{dMin: four(-708), dMax: four(709), zMin: four(-709), zMax: four(708), fours: four(4)}

// sapoAVX2 runs the token loop of sapoTokens.run over the a.n tokens from
// a.lp on, four at a time, adding to a.sums in token order, and stops at
// the first group of four with an unmasked token whose exp argument (d or
// -z) the Go loop gives to math.Exp rather than fastexp.Core; a.n is then
// the number of tokens it ran. Without weights it reads weights of 1 (as
// ppoAVX2).
//
//go:noescape
func sapoAVX2(a *sapoArgs)

// sapoVector runs the token loop from token from (a multiple of 4) over
// the groups of four that follow, up to the row's n&^3 tokens or the first
// group that sapoAVX2 leaves to the Go loop, continuing the sums s; it
// returns where it stopped and the sums so far.
func sapoVector(p *sapoTokens, from int, s sapoSums) (int, sapoSums) {
	n := len(p.lp) &^ 3
	if from >= n {
		return from, s
	}
	lp, old, adv, m, grad := p.lp[from:n], p.old[from:n], p.adv[from:n], p.m[from:n], p.grad[from:n] // the bounds, checked
	a := sapoArgs{
		lp: &lp[0], old: &old[0], adv: &adv[0], mask: &m[0], grad: &grad[0],
		n: n - from, sums: s,
		tauPos: four(p.tauPos), tauNeg: four(p.tauNeg), gs: four(p.gs),
		k: ppoK, ck: coreK, w: &ppoK.one[0],
		clampD: p.clampD, paper: p.paper,
	}
	if p.w != nil {
		a.w, a.wStep = &p.w[from:n][0], 32
	}
	sapoAVX2(&a)
	return from + a.n, a.sums
}
