package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// CISPO is the kernel of the clipped IS-weight policy optimisation:
//
//	r = exp(lp - old), w = clamp(r, 1-Low, 1+High)
//	M = 0 where MaskClip and (r > 1+MaskHigh, A > 0 or r < 1-MaskLow, A < 0), else 1
//	L = -A·sg(w)·sg(M)·lp
//
// L ← L·iw with the rollout_is_weights iw when the batch has them. Verl is
// verl's version (core_algos.py): d clamped to ±20, no mask clip, metrics
// pg_clipfrac (Σ[r ≠ w]·m in the third sum), ppo_kl, pg_clipfrac_lower (0).
// Sums: loss, Σ(-d)·m, ΣM·m.
type CISPO struct {
	Low, High         float64
	MaskClip          bool
	MaskLow, MaskHigh float64
	Verl              bool
}

// Sums implements tokens.Kernel.
func (k *CISPO) Sums() int { return 3 }

// Row implements tokens.Kernel. The token loop is cispoTokens.run, after
// cispoVector's groups of four tokens where vectorCISPO.
func (k *CISPO) Row(r *tokens.Row, s []float64) {
	n := len(r.LP)
	t := cispoTokens{
		lp: r.LP, old: r.Old[:n], adv: r.Adv[:n], m: r.Mask[:n], grad: r.Grad[:n], w: r.Weights,
		lo: 1 - k.Low, hi: 1 + k.High, maskLo: 1 - k.MaskLow, maskHi: 1 + k.MaskHigh, gs: r.GradScale,
		maskClip: k.MaskClip, verl: k.Verl,
	}
	var sums cispoSums
	from := 0
	if vectorCISPO {
		for v := n &^ 3; from < v; {
			from, sums = cispoVector(&t, from, sums)
			if from < v { // a group with a log-ratio outside Core's range
				sums = t.run(from, from+4, sums)
				from += 4
			}
		}
	}
	sums = t.run(from, n, sums)
	s[0] += r.Scale * sums.L
	s[1] += sums.KL
	s[2] += sums.Keep
}

// cispoTokens is the token loop of (*CISPO).Row: a row's columns and the
// settings read once per row.
type cispoTokens struct {
	lp, old, adv, m, grad  []float64
	w                      []float64 // rollout_is_weights, nil when absent
	lo, hi, maskLo, maskHi float64   // 1-Low, 1+High, 1-MaskLow, 1+MaskHigh
	gs                     float64
	maskClip, verl         bool
}

// cispoSums are the token loop's sums: loss, Σ(-d)·m, ΣM·m (verl: Σ[r ≠ w]·m).
type cispoSums struct{ L, KL, Keep float64 }

// run evaluates tokens [from, to) of the row, continuing the sums s (those
// of the tokens before from): each sum is added to in token order.
func (p *cispoTokens) run(from, to int, s cispoSums) cispoSums {
	lp := p.lp[:to]
	old, adv, m, grad := p.old[:to], p.adv[:to], p.m[:to], p.grad[:to]
	gs, lo, hi, maskLo, maskHi := p.gs, p.lo, p.hi, p.maskLo, p.maskHi
	maskClip, verl := p.maskClip, p.verl
	sL, sKL, sKeep := s.L, s.KL, s.Keep
	for t := from; t < to; t++ {
		x := lp[t]
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		d := x - old[t] // no clamp
		if verl {
			d, _ = torch.Clamp(d, -20, 20)
		}
		ratio := exp(d)
		w, _ := torch.Clamp(ratio, lo, hi)
		a, keep := adv[t], 1.0
		if maskClip && (ratio > maskHi && a > 0 || ratio < maskLo && a < 0) {
			keep = 0
		}
		g := -a * w * keep
		wt := weight(p.w, t)
		sL += g * x * wt * mt
		sKL -= d * mt
		if verl {
			sKeep += b2f(ratio != w) * mt
		} else {
			sKeep += keep * mt
		}
		grad[t] = gs * mt * g * wt
	}
	return cispoSums{sL, sKL, sKeep}
}

// Summary implements Kernel: cispo_loss, ppo_kl, unmasked_frac.
func (k *CISPO) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	if k.Verl {
		return loss, verlMetrics(loss, st.MaskedMean(s[2]), st.MaskedMean(s[1]))
	}
	return loss, agg.Metrics{
		"cispo_loss":    loss,
		"ppo_kl":        st.MaskedMean(s[1]),
		"unmasked_frac": st.MaskedMean(s[2]),
	}
}

func cispoDef() *Def {
	f := func(name string, def float64, doc string) args.Param {
		return args.Param{Name: name, Kind: args.Float, Ctor: def, Default: def, InDefaults: true, Doc: doc}
	}
	return &Def{
		Name: "cispo",
		Params: append(args.Schema{
			f("clip_range_low", 1.0, "IS weight lower bound is 1 - clip_range_low"),
			f("clip_range_high", 0.28, "IS weight upper bound is 1 + clip_range_high"),
			{Name: "enable_mask_clip", Kind: args.Bool, Ctor: false, Default: false, InDefaults: true,
				Doc: "zero the tokens whose ratio leaves the mask-clip range in the advantage's direction"},
			f("mask_clip_range_low", 1.0, "mask tokens with A < 0 and ratio < 1 - mask_clip_range_low"),
			f("mask_clip_range_high", 0.28, "mask tokens with A > 0 and ratio > 1 + mask_clip_range_high"),
			aggParam("token-mean"),
			verlParam("log ratio clamped to ±20, no mask clip, pg_clipfrac = masked_mean(r ≠ clip(r))"),
		}, globalParams...),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		build: func(v args.Values) (planner, error) {
			low, high := clampBounds(v.Float("clip_range_low"), v.Float("clip_range_high"))
			k := &CISPO{Low: low, High: high,
				MaskClip: v.Bool("enable_mask_clip"), MaskLow: v.Float("mask_clip_range_low"), MaskHigh: v.Float("mask_clip_range_high"),
				Verl: v.Bool("verl")}
			if k.Verl && k.MaskClip {
				return nil, bad("enable_mask_clip is not part of verl's cispo (verl=true)")
			}
			return single{k: k, mode: mode(v, "loss_agg_mode"), global: global(v)}, nil
		},
	}
}
