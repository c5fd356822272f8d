package rollout

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
)

// scratch is a worker's per-row buffers.
type scratch struct {
	keep []float64 // per-token product of the token options' keep flags
	rej  []bool    // per token option: the row has a rejected valid token
}

func newScratch(c *Corrector) *scratch { return &scratch{rej: make([]bool, len(c.rules))} }

// keeps reports whether rule r keeps statistic s (NaN rejects).
func (r *rule) keeps(s float64) bool {
	if r.Stat == K1 {
		return r.Lo <= s && s <= r.Hi
	}
	return s <= r.Hi
}

// floor is the lower clamp of the option's _std metric.
func (r *rule) floor() float64 {
	if r.Stat == K1 {
		return r.Lo
	}
	return 0
}

// row evaluates row b: IS weights (written to w when not nil, truncated and
// divided by mu when norm), the rejection mask (written to mout) and the
// row's metric contributions to a. It reads every input of the row before
// writing mout, so mout may alias in.Mask.
func (c *Corrector) row(in Input, b int, mu float64, norm bool, w, mout []float64, a *Acc, sc *scratch) {
	lo, hi := in.Rows.Span(b)
	n := hi - lo
	old, ro, m := in.Old[lo:hi:hi], in.Rollout[lo:hi:hi], in.Mask[lo:hi:hi]
	old, ro = old[:n], ro[:n]
	var wr []float64
	if w != nil {
		wr = w[lo:hi:hi][:n]
	}
	tokenRS := len(c.tokenRules) > 0
	var keep []float64
	if tokenRS {
		if cap(sc.keep) < n {
			sc.keep = make([]float64, n)
		}
		keep = sc.keep[:n]
		clear(sc.rej)
	}
	weighted, tokenIS := c.Weighted(), c.Weighted() && !c.seq
	zero := c.cfg.ZeroMaskedWeights
	rules := c.rules
	is, off := &a.is, &a.off
	// Row-local accumulators (registers, not the accumulator's memory).
	var nb, S, sOld, sRo, rowW, k3, chi2, hiW, loW float64
	var xW moments
	extW := is.ext
	var rowSum [4]float64
	var rowMax [4]extrema
	C, cLo := c.c, c.cLo
	for t, mt := range m {
		lam := old[t] - ro[t]
		l := clamp(lam, -safety, safety)
		e := l // NaN stays NaN
		if l == l {
			e = fastexp.Core(l) // |l| ≤ 20
		}
		if tokenIS {
			raw := e * mt // a plain product: NaN at a masked position stays (RC-06)
			if mt != 0 {
				rowW += raw * mt
				if raw > C {
					hiW += mt
				}
				if raw < cLo {
					loW += mt
				}
				extW.add(raw)
				xW.add(clamp(raw, cLo, C), mt)
			}
			if wr != nil {
				if raw > C {
					raw = C
				}
				if norm {
					raw /= mu
				}
				if zero && mt == 0 {
					raw = 0
				}
				wr[t] = raw
			}
		}
		kp := 1.0
		if mt != 0 {
			nb += mt
			S += lam * mt
			sOld += old[t] * mt
			sRo += ro[t] * mt
			eu := e
			if lam != l {
				eu = math.Exp(lam)
			}
			k3 += (eu - lam - 1) * mt
			chi2 += e * e * mt
			if c.stats[K1] {
				rowSum[K1] -= l * mt
			}
			if c.stats[K2] {
				k2 := 0.5 * l * l
				rowSum[K2] += k2 * mt
				if c.rowMaxNeed[K2] {
					rowMax[K2].add(k2)
				}
			}
			if c.stats[K3] {
				k3 := e - 1 - l
				rowSum[K3] += k3 * mt
				if c.rowMaxNeed[K3] {
					rowMax[K3].add(k3)
				}
			}
			for _, i := range c.tokenRules {
				r, ra := &rules[i], &a.rs[i]
				var s float64
				switch r.Stat {
				case K1:
					s = -l
				case K2:
					s = 0.5 * l * l
				default:
					s = e - 1 - l
				}
				ra.sumS += s * mt
				ra.ext.add(s)
				if s > r.Hi {
					ra.high += mt
				}
				if s < r.Lo {
					ra.low += mt
				}
				ra.x.add(clamp(s, r.floor(), r.Hi), mt)
				if !r.keeps(s) {
					kp = 0
					ra.rejected += mt
					sc.rej[i] = true
				}
			}
		}
		if tokenRS {
			keep[t] = kp
		}
	}
	valid := nb > 0
	off.kl -= S // Σ (rollout - old)·m
	off.k3 += k3
	off.chi2 += chi2
	if tokenIS {
		is.sumW += rowW
		is.high += hiW
		is.low += loW
		is.ext = extW
		is.x.merge(xW)
	}
	a.tokens += nb
	a.rows++

	// Sequence-level weights: one per row from the unclamped sum S_b.
	wb := 0.0
	if weighted && c.seq {
		wb = math.Exp(clamp(S, -safety, safety))
		is.ext.add(S)
		if S > c.lHi {
			is.seqHigh++
		}
		if S < c.lLo {
			is.seqLow++
		}
		if valid {
			rowW = wb * nb
			is.sumW += rowW
			is.x.add(clamp(wb, c.cLo, c.c), nb)
		}
	}
	if weighted {
		is.r.add(rowW/(nb+eps), 1, c.c, c.cLo)
	}

	// Off-policy row terms.
	muOld, muRo := sOld/(nb+eps), sRo/(nb+eps)
	d := muRo - muOld
	off.trainPPL += math.Exp(-muOld)
	off.trainLog += -muOld
	off.roPPL += math.Exp(-muRo)
	off.roLog += -muRo
	off.d.add(d, 0, math.Inf(1), math.Inf(-1))
	off.absD += math.Abs(d)
	off.pplRatio += math.Exp(d)
	off.chi2Seq += math.Exp(2 * clamp(S, -safety, safety))

	// Row-level options, and the row values of the token options.
	rowKeep := 1.0
	for i := range rules {
		r, ra := &rules[i], &a.rs[i]
		var s float64
		switch r.Level {
		case Token:
			if valid {
				ra.v.add(rowSum[r.Stat]/(nb+eps), 0, r.Hi, r.Lo)
				if sc.rej[i] {
					ra.rows++
				}
			}
			continue
		case SeqSum:
			s = rowSum[r.Stat]
		case SeqMean:
			s = rowSum[r.Stat] / (nb + eps)
		case SeqMax:
			if rowMax[r.Stat].n > 0 {
				s = rowMax[r.Stat].max
			}
		}
		if !valid {
			continue
		}
		ra.sumS += s * nb
		ra.x.add(clamp(s, r.floor(), r.Hi), nb)
		ra.v.add(s, 0, r.Hi, r.Lo)
		if !r.keeps(s) {
			rowKeep = 0
			ra.rejected += nb
			ra.rows++
		}
	}

	// Outputs: the sequence weights and the mask m·Π keep.
	rejected := false
	for t, mt := range m {
		if weighted && c.seq && wr != nil {
			v := wb * mt
			if v > c.c {
				v = c.c
			}
			if norm {
				v /= mu
			}
			if zero && mt == 0 {
				v = 0
			}
			wr[t] = v
		}
		f := rowKeep
		if tokenRS {
			f *= keep[t]
		}
		if mt != 0 && f == 0 {
			a.rsMasked += mt
			rejected = true
		}
		mout[lo+t] = mt * f
	}
	if rejected {
		a.rsRows++
	}
}
