package rollout

// Acc accumulates the metric sums of Apply over record batches; Metrics
// turns them into verl's metrics. The zero value is empty. Every metric is
// a sum, a count, an extremum or a mergeable variance, so the metrics of a
// store streamed batch by batch are those of the store as one batch.
type Acc struct {
	ready  bool
	tokens float64 // N = Σ m
	rows   int     // B
	is     isAcc
	rs     []rsAcc
	// rsMasked is Σ (1 − final)·m; rsRows the rows with a rejected valid token.
	rsMasked float64
	rsRows   int
	off      offAcc
}

// isAcc holds the IS metric sums: of the applied weights w (truncated, or
// IcePop's zeroed) and, for the ratio fractions, of the raw weights.
type isAcc struct {
	sumW      float64 // Σ w·m
	high, low float64 // token level: Σ [raw > U]·m, Σ [raw < Lo]·m
	oob       float64 // Σ [raw < Lo ∨ raw > U]·m (IcePop's rollout_is_oob_ratio)
	ext       extrema // token level: valid tokens' w; sequence level: every row's S_b
	seqHigh   int     // sequence level: rows with S_b > log U (float32)
	seqLow    int     // sequence level: rows with S_b < log Lo (float32)
	x         moments // clamp(w, 0, U) over valid tokens
	r         series  // row means r_b of w, every row
	rowHigh   int     // rows whose raw row mean ρ_b > U
	rowLow    int     // rows whose raw row mean ρ_b < Lo
}

// rsAcc holds one rejection option's metric sums.
type rsAcc struct {
	sumS      float64 // Σ s·m
	ext       extrema // token options: s over valid tokens
	high, low float64 // token options: Σ [s > U]·m, Σ [s < L]·m
	x         moments // clamp(s, L or 0, U) over valid tokens
	v         series  // row values of the valid rows
	rejected  float64 // Σ (1 − keep)·m
	rows      int     // valid rows with a rejected valid token
}

// offAcc holds the off-policy metric sums.
type offAcc struct {
	trainPPL, trainLog, roPPL, roLog float64 // Σ_b exp(−μ_old), −μ_old, exp(−μ_ro), −μ_ro
	d                                series  // d_b = μ_ro − μ_old
	absD, pplRatio, chi2Seq          float64 // Σ_b |d_b|, exp(d_b), exp(2·clamp(S_b))
	kl, k3, chi2                     float64 // Σ_b −S_b = Σ (ro − old)·m, (e^λ − λ − 1)·m, exp(clamp λ)²·m
}

func (a *Acc) init(c *Corrector) {
	if a.ready {
		return
	}
	a.ready = true
	a.rs = make([]rsAcc, len(c.rules))
}

func (a *Acc) merge(o *Acc) {
	a.tokens += o.tokens
	a.rows += o.rows
	a.is.sumW += o.is.sumW
	a.is.high += o.is.high
	a.is.low += o.is.low
	a.is.oob += o.is.oob
	a.is.ext.merge(o.is.ext)
	a.is.seqHigh += o.is.seqHigh
	a.is.seqLow += o.is.seqLow
	a.is.x.merge(o.is.x)
	a.is.r.merge(o.is.r)
	a.is.rowHigh += o.is.rowHigh
	a.is.rowLow += o.is.rowLow
	for i := range a.rs {
		r, q := &a.rs[i], &o.rs[i]
		r.sumS += q.sumS
		r.ext.merge(q.ext)
		r.high += q.high
		r.low += q.low
		r.x.merge(q.x)
		r.v.merge(q.v)
		r.rejected += q.rejected
		r.rows += q.rows
	}
	a.rsMasked += o.rsMasked
	a.rsRows += o.rsRows
	f, g := &a.off, &o.off
	f.trainPPL += g.trainPPL
	f.trainLog += g.trainLog
	f.roPPL += g.roPPL
	f.roLog += g.roLog
	f.d.merge(g.d)
	f.absD += g.absD
	f.pplRatio += g.pplRatio
	f.chi2Seq += g.chi2Seq
	f.kl += g.kl
	f.k3 += g.k3
	f.chi2 += g.chi2
}

// Merge adds the sums of another accumulator filled by the same corrector
// (e.g. one per worker; merge in a fixed order for reproducible sums).
func (a *Acc) Merge(c *Corrector, o *Acc) {
	if !o.ready {
		return
	}
	a.init(c)
	a.merge(o)
}
