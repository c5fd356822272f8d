package rollout

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
)

// Metrics turns the accumulated sums into verl's metrics, every name
// prefixed "rollout_corr/": the IS metrics (isMetrics), the rejection
// metrics (rsMetrics) and the off-policy metrics (on the original mask). A
// batch without a valid token is verl's error.
func (c *Corrector) Metrics(a *Acc, n *Norm) (agg.Metrics, error) {
	if !(a.tokens > 0) {
		return nil, errNoValid
	}
	out := agg.Metrics{}
	put := func(k string, v float64) { out[Prefix+k] = v }
	if c.Weighted() {
		c.isMetrics(put, a, n)
	}
	if len(c.rules) > 0 {
		c.rsMetrics(put, a)
	}
	for k, v := range offPolicy(a, true) {
		out[Prefix+k] = v
	}
	return out, nil
}

// tokenMean is s over the valid tokens (verl's mean with its epsilon).
func (a *Acc) tokenMean(s float64) float64 { return s / (a.tokens + eps) }

// isMetrics puts the IS metrics: of the applied weights, the ratio
// fractions of the raw ones; rollout_is_oob_ratio with IcePop,
// rollout_is_batch_norm_factor from n when normalising.
func (c *Corrector) isMetrics(put func(string, float64), a *Acc, n *Norm) {
	N, mean := a.tokens, a.tokenMean
	is := &a.is
	if c.seq {
		put("rollout_is_max", math.Exp(clamp(is.ext.max, math.Inf(-1), safety)))
		put("rollout_is_min", math.Exp(is.ext.min))
		put("rollout_is_mean", mean(is.sumW))
		put("rollout_is_ratio_fraction_high", f32frac(is.seqHigh, a.rows))
		put("rollout_is_ratio_fraction_low", f32frac(is.seqLow, a.rows))
	} else {
		put("rollout_is_mean", mean(is.sumW))
		put("rollout_is_ratio_fraction_high", mean(is.high))
		put("rollout_is_ratio_fraction_low", mean(is.low))
		put("rollout_is_max", is.ext.max)
		put("rollout_is_min", is.ext.min)
	}
	put("rollout_is_std", is.x.std(N))
	mx := mean(is.x.s1)
	put("rollout_is_eff_sample_size", 1/(mean(is.x.s2)/((mx+eps)*(mx+eps))))
	put("rollout_is_seq_mean", is.r.avg())
	put("rollout_is_seq_std", is.r.std())
	put("rollout_is_seq_max", is.r.ext.max)
	put("rollout_is_seq_min", is.r.ext.min)
	put("rollout_is_seq_max_deviation", is.r.maxDev.max)
	put("rollout_is_seq_fraction_high", f32frac(is.rowHigh, a.rows))
	put("rollout_is_seq_fraction_low", f32frac(is.rowLow, a.rows))
	if c.icePop {
		put("rollout_is_oob_ratio", mean(is.oob))
	}
	if c.cfg.BatchNormalize {
		mu, ok := c.mu(n)
		if !ok {
			mu = 1
		}
		put("rollout_is_batch_norm_factor", mu)
	}
}

// rsMetrics puts the rejection metrics, per option and overall.
func (c *Corrector) rsMetrics(put func(string, float64), a *Acc) {
	N, mean := a.tokens, a.tokenMean
	for i := range c.rules {
		r, ra := &c.rules[i], &a.rs[i]
		p := "rollout_rs_" + r.Name + "_"
		nv := ra.v.n
		put(p+"mean", mean(ra.sumS))
		if r.Level == Token {
			put(p+"max", ra.ext.max)
			put(p+"min", ra.ext.min)
			put(p+"fraction_high", mean(ra.high))
			if r.Stat == K1 {
				put(p+"fraction_low", mean(ra.low))
			} else {
				put(p+"fraction_low", 0)
			}
		} else {
			put(p+"max", ra.v.ext.max)
			put(p+"min", ra.v.ext.min)
			put(p+"fraction_high", f32frac(ra.v.high, nv))
			if r.Stat == K1 {
				put(p+"fraction_low", f32frac(ra.v.low, nv))
			} else {
				put(p+"fraction_low", 0)
			}
		}
		put(p+"std", ra.x.std(N))
		put(p+"seq_mean", ra.v.avg())
		put(p+"seq_std", ra.v.std())
		put(p+"seq_max", ra.v.ext.max)
		put(p+"seq_min", ra.v.ext.min)
		put(p+"seq_max_deviation", ra.v.maxDev.max)
		put(p+"seq_fraction_high", f32frac(ra.v.high, nv))
		if r.Stat == K1 {
			put(p+"seq_fraction_low", f32frac(ra.v.low, nv))
		}
		put(p+"masked_fraction", mean(ra.rejected))
		put(p+"seq_masked_fraction", float64(ra.rows)/float64(nv))
	}
	put("rollout_rs_masked_fraction", mean(a.rsMasked))
	put("rollout_rs_seq_masked_fraction", f32frac(a.rsRows, a.rows))
}

// offPolicy is verl's compute_offpolicy_metrics from the sums (names
// without prefix); without the rollout log-probs only the training
// perplexities.
func offPolicy(a *Acc, withRollout bool) agg.Metrics {
	f, B := &a.off, float64(a.rows)
	out := agg.Metrics{
		"training_ppl":     f.trainPPL / B,
		"training_log_ppl": f.trainLog / B,
	}
	if !withRollout {
		return out
	}
	N := a.tokens + eps
	out["kl"] = f.kl / N
	out["k3_kl"] = f.k3 / N
	out["rollout_ppl"] = f.roPPL / B
	out["rollout_log_ppl"] = f.roLog / B
	out["log_ppl_diff"] = f.d.avg()
	out["log_ppl_abs_diff"] = f.absD / B
	out["log_ppl_diff_max"] = f.d.ext.max
	out["log_ppl_diff_min"] = f.d.ext.min
	out["ppl_ratio"] = f.pplRatio / B
	out["chi2_token"] = f.chi2/N - 1
	out["chi2_seq"] = f.chi2Seq/B - 1
	return out
}

// OffPolicyMetrics is verl's compute_offpolicy_metrics(old, rollout, mask)
// on one batch (names without prefix); rollout nil gives only
// training_ppl and training_log_ppl. An all-masked batch is an error.
func OffPolicyMetrics(rows agg.Rows, old, rollout, mask []float64) (agg.Metrics, error) {
	c, err := New(Default())
	if err != nil {
		return nil, err
	}
	in := Input{Rows: rows, Old: old, Rollout: rollout, Mask: mask}
	if rollout == nil {
		in.Rollout = old
	}
	var acc Acc
	if err := c.Apply(in, nil, nil, make([]float64, len(mask)), &acc); err != nil {
		return nil, err
	}
	if !(acc.tokens > 0) {
		return nil, errNoValid
	}
	return offPolicy(&acc, rollout != nil), nil
}
