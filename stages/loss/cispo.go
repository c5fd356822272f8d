package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
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

// Row implements tokens.Kernel.
func (k *CISPO) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	gs := r.GradScale
	var sL, sKL, sKeep float64
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		d := x - old[t] // no clamp
		if k.Verl {
			d, _ = clamp(d, -20, 20)
		}
		ratio := exp(d)
		w, _ := clamp(ratio, 1-k.Low, 1+k.High)
		a, keep := adv[t], 1.0
		if k.MaskClip && (ratio > 1+k.MaskHigh && a > 0 || ratio < 1-k.MaskLow && a < 0) {
			keep = 0
		}
		g := -a * w * keep
		wt := weight(r.Weights, t)
		sL += g * x * wt * mt
		sKL -= d * mt
		if k.Verl {
			sKeep += b2f(ratio != w) * mt
		} else {
			sKeep += keep * mt
		}
		grad[t] = gs * mt * g * wt
	}
	s[0] += r.Scale * sL
	s[1] += sKL
	s[2] += sKeep
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
		return args.Param{Name: name, Kind: args.Float, Ctor: def, Default: def, InDefaults: true, Range: args.NonNeg, Doc: doc}
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
			k := &CISPO{Low: v.Float("clip_range_low"), High: v.Float("clip_range_high"),
				MaskClip: v.Bool("enable_mask_clip"), MaskLow: v.Float("mask_clip_range_low"), MaskHigh: v.Float("mask_clip_range_high"),
				Verl: v.Bool("verl")}
			if k.Verl && k.MaskClip {
				return nil, bad("enable_mask_clip is not part of verl's cispo (verl=true)")
			}
			return single{k: k, mode: mode(v, "loss_agg_mode"), global: global(v)}, nil
		},
	}
}
