package rollout

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
)

// A row is evaluated in short passes over its tokens, each a tight loop
// over contiguous slices with few live values (the accumulators stay in
// registers): base computes every token's clamped log ratio ℓ and e^ℓ once
// (the only exponential per token) and the off-policy sums; the IS weights,
// the token-level rejection options and the row statistics then read ℓ and
// e^ℓ from the worker's scratch, each pass only when the configuration
// needs it. A row is 2 KB per slice at 256 tokens, so the later passes read
// from the L1 cache.

// scratch is a worker's per-row buffers.
type scratch struct {
	l, e []float64 // per token: ℓ = clamp(old − rollout, ±20) and e^ℓ
	keep []float64 // per-token product of the token options' keep flags
	rej  []bool    // per token option: the row has a rejected valid token
}

func newScratch(c *Corrector) *scratch { return &scratch{rej: make([]bool, len(c.rules))} }

// grow sizes the per-token buffers for a row of n tokens.
func (sc *scratch) grow(n int) {
	if cap(sc.l) < n {
		sc.l, sc.e, sc.keep = make([]float64, n), make([]float64, n), make([]float64, n)
	}
	sc.l, sc.e, sc.keep = sc.l[:n], sc.e[:n], sc.keep[:n]
}

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

// stat is statistic k of one token from ℓ and e^ℓ.
func stat(k Statistic, l, e float64) float64 {
	switch k {
	case K1:
		return -l
	case K2:
		return 0.5 * l * l
	default:
		return e - 1 - l
	}
}

// rowSums are a row's masked sums over its valid tokens: n_b, S_b = Σ λ·m
// (unclamped), Σ old·m, Σ rollout·m, Σ (e^λ − λ − 1)·m, Σ (e^ℓ)²·m.
type rowSums struct {
	nb, S, sOld, sRo, k3, chi2 float64
	// plain: every λ of the row is finite and within ±20 (so ℓ = λ and
	// every input is finite).
	plain bool
}

// base fills l and e with every token's ℓ and e^ℓ and returns the row's
// sums. Its loops multiply by the mask without selecting first and have no
// data-dependent branch; that is masked_sum's select-then-multiply exactly
// when every λ is finite and unclamped (x·0 = 0 for finite x, and ℓ = λ),
// which the first loop tracks. Otherwise the row is summed again by
// baseExact. The exponentials take a loop of their own: with few live
// values the compiler keeps everything in registers.
func base(old, ro, m, l, e []float64) rowSums {
	n := len(m)
	old, ro, l, e = old[:n], ro[:n], l[:n], e[:n]
	var nb, S, sOld, sRo float64
	plain := true
	for t, mt := range m {
		o, r := old[t], ro[t]
		lam := o - r
		lc := clamp(lam, -safety, safety)
		if lc != lam { // clamped or NaN
			plain = false
		}
		l[t] = lc
		nb += mt
		S += lam * mt
		sOld += o * mt
		sRo += r * mt
	}
	if !plain {
		return baseExact(old, ro, m, l, e)
	}
	var k3, chi2 float64
	for t, mt := range m {
		lam := l[t] // = λ
		x := 0.0    // at a masked position e^ℓ only meets products with m = 0
		if mt != 0 {
			x = fastexp.Core(lam)
		}
		e[t] = x
		k3 += (x - lam - 1) * mt
		chi2 += x * x * mt
	}
	return rowSums{nb: nb, S: S, sOld: sOld, sRo: sRo, k3: k3, chi2: chi2, plain: true}
}

// baseExact is base for rows with a non-finite or clamped log ratio: the
// sums select valid tokens before multiplying (a NaN or infinity at a
// masked position does not leak), e^ℓ is NaN where ℓ is, and the k3_kl
// term takes the unclamped e^λ.
func baseExact(old, ro, m, l, e []float64) rowSums {
	var s rowSums
	for t, mt := range m {
		lam := old[t] - ro[t]
		lc := clamp(lam, -safety, safety)
		x := lc // NaN stays NaN
		if lc == lc {
			x = fastexp.Core(lc) // |ℓ| ≤ 20
		}
		l[t], e[t] = lc, x
		if mt == 0 {
			continue
		}
		s.nb += mt
		s.S += lam * mt
		s.sOld += old[t] * mt
		s.sRo += ro[t] * mt
		xu := x
		if lam != lc {
			xu = math.Exp(lam)
		}
		s.k3 += (xu - lam - 1) * mt
		s.chi2 += x * x * mt
	}
	return s
}

// row evaluates row b: IS weights (written to w when not nil, applied and
// multiplied by inv, the reciprocal of the batch normalisation factor), the
// rejection mask (written to mout) and the row's metric contributions to a.
// It reads every input of the row before writing mout, so mout may alias
// in.Mask.
func (c *Corrector) row(in Input, b int, inv float64, w, mout []float64, a *Acc, sc *scratch) {
	lo, hi := in.Rows.Span(b)
	m := in.Mask[lo:hi:hi]
	n := len(m) // the reslices below let the compiler drop bounds checks
	old, ro := in.Old[lo:hi:hi][:n], in.Rollout[lo:hi:hi][:n]
	sc.grow(n)
	s := base(old, ro, m, sc.l, sc.e)
	valid := s.nb > 0
	off := &a.off
	off.kl -= s.S // Σ (rollout − old)·m
	off.k3 += s.k3
	off.chi2 += s.chi2
	a.tokens += s.nb
	a.rows++

	if c.Weighted() {
		var wr []float64
		if w != nil {
			wr = w[lo:hi:hi][:n]
		}
		var rowW, rowRaw float64
		if c.seq {
			rowW, rowRaw = c.seqWeights(s, m, wr, inv, &a.is)
		} else {
			rowW, rowRaw = c.tokenWeights(sc.e, m, wr, inv, &a.is)
		}
		a.is.r.add(rowW/(s.nb+eps), 1, math.Inf(1), math.Inf(-1))
		rho := rowRaw / (s.nb + eps) // the raw row mean ρ_b
		if rho > c.c {
			a.is.rowHigh++
		}
		if rho < c.cLo {
			a.is.rowLow++
		}
	}

	// Off-policy row terms.
	muOld, muRo := s.sOld/(s.nb+eps), s.sRo/(s.nb+eps)
	d := muRo - muOld
	off.trainPPL += math.Exp(-muOld)
	off.trainLog += -muOld
	off.roPPL += math.Exp(-muRo)
	off.roLog += -muRo
	off.d.add(d, 0, math.Inf(1), math.Inf(-1))
	off.absD += math.Abs(d)
	off.pplRatio += math.Exp(d)
	off.chi2Seq += math.Exp(2 * clamp(s.S, -safety, safety))

	if len(c.rules) == 0 {
		copy(mout[lo:hi:hi][:n], m) // a no-op when mout is the input mask
		return
	}
	tokenRS := len(c.tokenRules) > 0
	if tokenRS {
		c.tokenRejection(sc, m, a)
	}
	rowKeep := c.rowRejection(s, sc, m, valid, a)

	// The mask m·Π keep.
	out := mout[lo:hi:hi][:n]
	switch {
	case !tokenRS && rowKeep == 1:
		copy(out, m)
	case !tokenRS:
		clear(out)
		a.rsMasked += s.nb
		if valid {
			a.rsRows++
		}
	default:
		keep := sc.keep[:n]
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

// tokenWeights is the token level of IS: the raw weights e^ℓ·m (a plain
// product: NaN at a masked position stays, RC-06) and the applied ones
// (truncated, or IcePop's zeroed), their metric sums over the valid tokens
// into is, and the applied (and normalised) weights into wr when not nil
// (one loop reads e^ℓ once for all). It returns the row's Σ w·m of the
// applied and of the raw weights.
func (c *Corrector) tokenWeights(e, m, wr []float64, inv float64, is *isAcc) (rowW, rowRaw float64) {
	e = e[:len(m)]
	if wr != nil {
		wr = wr[:len(m)]
	}
	U, Lo := c.c, c.cLo
	zero := c.cfg.ZeroMaskedWeights
	var hiW, loW, oob float64
	var x moments
	// The extrema of the valid tokens' weights (Go's max and min: a NaN
	// makes both NaN, as torch's).
	ext := extrema{max: math.Inf(-1), min: math.Inf(1)}
	for t, mt := range m {
		raw := e[t] * mt
		w := c.apply(raw)
		if mt != 0 {
			rowW += w * mt
			rowRaw += raw * mt
			hiW += b2f(raw > U) * mt
			loW += b2f(raw < Lo) * mt
			oob += b2f(raw < Lo || raw > U) * mt
			ext.max, ext.min = max(ext.max, w), min(ext.min, w)
			ext.n++
			x.add(clamp(w, 0, U), mt)
		}
		if wr != nil {
			v := w * inv
			if zero && mt == 0 {
				v = 0
			}
			wr[t] = v
		}
	}
	is.sumW += rowW
	is.high += hiW
	is.low += loW
	is.oob += oob
	is.ext.merge(ext)
	is.x.merge(x)
	return rowW, rowRaw
}

// seqWeights is the sequence level of IS: one raw weight e^clamp(S_b) per
// row (from the unclamped sum) and its applied value, their metric terms
// into is and the applied (and normalised) weights into wr when not nil.
// It returns the row's Σ w·m of the applied and of the raw weights.
func (c *Corrector) seqWeights(s rowSums, m, wr []float64, inv float64, is *isAcc) (rowW, rowRaw float64) {
	raw := math.Exp(clamp(s.S, -safety, safety))
	w := c.apply(raw)
	is.ext.add(s.S)
	if s.S > c.lHi {
		is.seqHigh++
	}
	if s.S < c.lLo {
		is.seqLow++
	}
	if s.nb > 0 {
		rowW, rowRaw = w*s.nb, raw*s.nb
		is.sumW += rowW
		is.oob += b2f(raw < c.cLo || raw > c.c) * s.nb
		is.x.add(clamp(w, 0, c.c), s.nb)
	}
	if wr != nil {
		wr = wr[:len(m)]
		zero := c.cfg.ZeroMaskedWeights
		for t, mt := range m {
			x := c.apply(raw*mt) * inv
			if zero && mt == 0 {
				x = 0
			}
			wr[t] = x
		}
	}
	return rowW, rowRaw
}

// tokenRejection evaluates the token-level options over the row's valid
// tokens: their metric sums and the per-token product of their keep flags
// in sc.keep.
func (c *Corrector) tokenRejection(sc *scratch, m []float64, a *Acc) {
	n := len(m)
	l, e, keep := sc.l[:n], sc.e[:n], sc.keep[:n]
	for t := range keep {
		keep[t] = 1
	}
	for _, i := range c.tokenRules {
		r, ra := &c.rules[i], &a.rs[i]
		k, lo, hi, floor := r.Stat, r.Lo, r.Hi, r.floor()
		var sumS, high, low, rejected float64
		var x moments
		ext := ra.ext
		rej := false
		for t, mt := range m {
			if mt == 0 {
				continue
			}
			s := stat(k, l[t], e[t])
			sumS += s * mt
			ext.add(s)
			if s > hi {
				high += mt
			}
			if s < lo {
				low += mt
			}
			x.add(clamp(s, floor, hi), mt)
			if !r.keeps(s) {
				keep[t] = 0
				rejected += mt
				rej = true
			}
		}
		ra.sumS += sumS
		ra.ext = ext
		ra.high += high
		ra.low += low
		ra.x.merge(x)
		ra.rejected += rejected
		sc.rej[i] = rej
	}
}

// rowRejection evaluates the row-level options from the row's sums, means
// and maxima of k1, k2, k3 over its valid tokens (each computed only when
// an option needs it), adds their metric terms and the row values of the
// token-level options, and returns the row's keep flag (0 or 1).
func (c *Corrector) rowRejection(s rowSums, sc *scratch, m []float64, valid bool, a *Acc) float64 {
	n := len(m)
	l, e := sc.l[:n], sc.e[:n]
	var rowSum [4]float64
	var rowMax [4]extrema
	for k := K1; k <= K3; k++ {
		if !c.stats[k] {
			continue
		}
		if k == K1 && s.plain {
			rowSum[K1] = 0 - s.S // Σ −ℓ·m summed in order is exactly 0 − S_b when ℓ = λ
			continue
		}
		sum := 0.0
		var mx extrema
		for t, mt := range m {
			if mt == 0 {
				continue
			}
			v := stat(k, l[t], e[t])
			sum += v * mt
			if c.rowMaxNeed[k] {
				mx.add(v)
			}
		}
		rowSum[k], rowMax[k] = sum, mx
	}
	rowKeep := 1.0
	for i := range c.rules {
		r, ra := &c.rules[i], &a.rs[i]
		var v float64
		switch r.Level {
		case Token:
			if valid {
				ra.v.add(rowSum[r.Stat]/(s.nb+eps), 0, r.Hi, r.Lo)
				if sc.rej[i] {
					ra.rows++
				}
			}
			continue
		case SeqSum:
			v = rowSum[r.Stat]
		case SeqMean:
			v = rowSum[r.Stat] / (s.nb + eps)
		case SeqMax:
			if rowMax[r.Stat].n > 0 {
				v = rowMax[r.Stat].max
			}
		}
		if !valid {
			continue
		}
		ra.sumS += v * s.nb
		ra.x.add(clamp(v, r.floor(), r.Hi), s.nb)
		ra.v.add(v, 0, r.Hi, r.Lo)
		if !r.keeps(v) {
			rowKeep = 0
			ra.rejected += s.nb
			ra.rows++
		}
	}
	return rowKeep
}
