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
	m := in.Mask[lo:hi:hi]
	n := len(m) // the reslices below let the compiler drop bounds checks
	old, ro := in.Old[lo:hi:hi][:n], in.Rollout[lo:hi:hi][:n]
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
	// Row sums and maxima of k1, k2, k3 (scalars: they stay in registers).
	var sum1, sum2, sum3 float64
	var max2, max3 extrema
	st1, st2, st3 := c.stats[K1], c.stats[K2], c.stats[K3]
	mx2, mx3 := c.rowMaxNeed[K2], c.rowMaxNeed[K3]
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
			if st1 {
				sum1 -= l * mt
			}
			if st2 {
				k2 := 0.5 * l * l
				sum2 += k2 * mt
				if mx2 {
					max2.add(k2)
				}
			}
			if st3 {
				k3 := e - 1 - l
				sum3 += k3 * mt
				if mx3 {
					max3.add(k3)
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
	rowSum := [4]float64{K1: sum1, K2: sum2, K3: sum3}
	rowMax := [4]extrema{K2: max2, K3: max3}
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
	if weighted && c.seq && wr != nil {
		for t, mt := range m {
			v := wb * mt
			if v > C {
				v = C
			}
			if norm {
				v /= mu
			}
			if zero && mt == 0 {
				v = 0
			}
			wr[t] = v
		}
	}
	out := mout[lo:hi:hi][:n]
	switch {
	case !tokenRS && rowKeep == 1:
		copy(out, m) // a no-op when out is the input mask
	case !tokenRS:
		clear(out)
		a.rsMasked += nb
		if valid {
			a.rsRows++
		}
	default:
		rejected := false
		for t, mt := range m {
			f := rowKeep * keep[t]
			if mt != 0 && f == 0 {
				a.rsMasked += mt
				rejected = true
			}
			out[t] = mt * f
		}
		if rejected {
			a.rsRows++
		}
	}
}
