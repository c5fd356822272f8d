package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// clipParams are the clip_range arguments of ppo, mix and gspo.
func clipParams(rng, low, high any, lowHighInDefaults bool) args.Schema {
	return args.Schema{
		{Name: "clip_range", Kind: args.Float, Nullable: true, Default: rng, InDefaults: rng != nil,
			Doc: "symmetric clip range of the ratio (used where the low/high ones are null)"},
		{Name: "clip_range_low", Kind: args.Float, Nullable: true, Default: low, InDefaults: lowHighInDefaults,
			Doc: "ratio lower bound is 1 - clip_range_low"},
		{Name: "clip_range_high", Kind: args.Float, Nullable: true, Default: high, InDefaults: lowHighInDefaults,
			Doc: "ratio upper bound is 1 + clip_range_high"},
	}
}

// clipRange resolves clip_range_low/high, falling back to clip_range, as
// clampBounds leaves them.
func clipRange(v args.Values) (low, high float64, err error) {
	rng, hasRng := v.OptFloat("clip_range")
	low, ok := v.OptFloat("clip_range_low")
	if !ok {
		if !hasRng {
			return 0, 0, bad("Either clip_range or clip_range_low must be specified.")
		}
		low = rng
	}
	high, ok = v.OptFloat("clip_range_high")
	if !ok {
		if !hasRng {
			return 0, 0, bad("Either clip_range or clip_range_high must be specified.")
		}
		high = rng
	}
	low, high = clampBounds(low, high)
	return low, high, nil
}

// clampBounds returns the clip ranges of torch.clamp(r, 1 − low, 1 + high)
// that the kernels, which assume min <= max, evaluate: when the bounds
// cross (low + high < 0) torch gives max everywhere, which is the clamp to
// [1 + high, 1 + high].
func clampBounds(low, high float64) (float64, float64) {
	if 1-low > 1+high {
		return -high, high
	}
	return low, high
}

func ppoDef() *Def {
	return &Def{
		Name: "ppo",
		Params: append(append(clipParams(0.2, nil, nil, false),
			args.Param{Name: "clip_ratio_c", Kind: args.Float, Range: "(1,inf)", Ctor: 3.0, Default: 3.0, InDefaults: true,
				Doc: "dual-clip bound of the loss for negative advantages (> 1)"},
			aggParam("token-mean"),
			args.Param{Name: "enable_sequence_masking", Kind: args.Bool, Ctor: false, Default: false, InDefaults: true,
				Doc: "drop negative-advantage tokens of rows whose mean KL exceeds delta_sequence_masking"},
			args.Param{Name: "delta_sequence_masking", Kind: args.Float, Ctor: 0.1, Default: 0.1, InDefaults: true,
				Doc: "per-row KL threshold of sequence masking"},
			args.Param{Name: "fallback_to_policy_gradient", Kind: args.Bool, Ctor: false, Default: false, InDefaults: true,
				Doc: "use ratio exp(lp - sg(lp)) = 1: plain policy gradient"},
		), globalParams...),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		build: func(v args.Values) (planner, error) {
			k, err := newPPO(v)
			if err != nil {
				return nil, err
			}
			k.SeqMask = v.Bool("enable_sequence_masking")
			k.Delta = v.Float("delta_sequence_masking")
			k.Fallback = v.Bool("fallback_to_policy_gradient")
			return single{k: k, mode: mode(v, "loss_agg_mode"), global: global(v)}, nil
		},
	}
}

// newPPO builds the clipped-surrogate kernel from the clip arguments (shared
// with mix, whose inner PPO has clip_ratio_c 3 and no sequence masking).
func newPPO(v args.Values) (*PPO, error) {
	low, high, err := clipRange(v)
	if err != nil {
		return nil, err
	}
	c := 3.0
	if x, ok := v.OptFloat("clip_ratio_c"); ok {
		c = x
	}
	return &PPO{Low: low, High: high, ClipC: c}, nil
}

// PPO is the kernel of the clipped surrogate with dual clip and optional
// sequence masking (ppo; the usual rows of mix and mix_chord):
//
//	d = clamp(lp - old, -20, 20) (0 with Fallback), r = exp(d)
//	L = max(-A·r, -A·clamp(r, 1-Low, 1+High)), and for A < 0 min(that, -A·ClipC)
//	SeqMask: L = 0 where A < 0 in rows whose Σ(-d)·m/(Σm+1e-10) > Delta
//	L ← L·w with the rollout_is_weights w when the batch has them
//
// Sums: loss, Σ[L2>L1]·m, Σ[C1>L3][A<0]·m, Σ(-d)·m, dropped positions, Σ_rows k_b.
type PPO struct {
	Low, High, ClipC float64
	SeqMask          bool
	Delta            float64
	Fallback         bool
}

// Sums implements tokens.Kernel.
func (k *PPO) Sums() int { return 6 }

// Row implements tokens.Kernel. The token loop (ppoTokens.run, after
// ppoVector's first n&^3 tokens where vectorPPO) calls nothing: settings
// are read once per row, and the dropped-token count is a separate pass run
// only in dropped rows.
func (k *PPO) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	fallback := k.Fallback // log-ratio lp - sg(lp): value 0, derivative 1
	drop := false
	if k.SeqMask {
		// Upstream uses a plain product here (NaN under a 0 mask propagates)
		// and 1e-10 instead of 1e-8 (quirk Q-19).
		kb := 0.0
		for t, x := range lp {
			d := 0.0
			if !fallback {
				d, _ = torch.Clamp(x-old[t], -20, 20)
			}
			kb += -d * m[t]
		}
		kb /= r.Count + 1e-10
		s[5] += kb
		drop = kb > k.Delta
	}
	var sDrop float64
	if drop {
		for _, a := range adv {
			if a < 0 {
				sDrop++ // counted at every position, masked or not
			}
		}
	}
	t := ppoTokens{
		lp: lp, old: old, adv: adv, m: m, grad: grad, w: r.Weights,
		lo: 1 - k.Low, hi: 1 + k.High, c3: k.ClipC, gs: r.GradScale,
		fallback: fallback, drop: drop,
	}
	var sums ppoSums
	from := 0
	if vectorPPO && !fallback && !drop {
		from, sums = ppoVector(&t) // the first n&^3 tokens
	}
	sL, sClip, sLow, sKL := t.run(from, sums)
	s[0] += r.Scale * sL
	s[1] += sClip
	s[2] += sLow
	s[3] += sKL
	s[4] += sDrop
}

// Summary implements Kernel: pg_clipfrac, pg_clipfrac_lower, ppo_kl, pg_loss
// and, with sequence masking, seq_mask/masked_tokens and
// seq_mask/mean_sequence_kl.
func (k *PPO) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	m := agg.Metrics{
		"pg_clipfrac":       st.MaskedMean(s[1]),
		"pg_clipfrac_lower": st.MaskedMean(s[2]),
		"ppo_kl":            st.MaskedMean(s[3]),
		"pg_loss":           loss,
	}
	if k.SeqMask {
		m["seq_mask/masked_tokens"] = s[4] / (st.Total + 1e-10)
		m["seq_mask/mean_sequence_kl"] = s[5] / float64(st.Rows)
	}
	return loss, m
}

// ppoTokens is the token loop of (*PPO).Row: a row's columns and the
// settings read once per row.
type ppoTokens struct {
	lp, old, adv, m, grad []float64
	w                     []float64 // rollout_is_weights, nil when absent
	lo, hi, c3, gs        float64
	fallback, drop        bool
}

// ppoSums are the token loop's sums: loss, clipped, dual-clipped, KL.
type ppoSums struct{ L, Clip, Low, KL float64 }

// run evaluates tokens [from, n) of the row, continuing the sums s (those
// of tokens [0, from)): each sum is added to in token order. The loop
// calls nothing.
func (p *ppoTokens) run(from int, s ppoSums) (sL, sClip, sLow, sKL float64) {
	lp, fallback, drop := p.lp, p.fallback, p.drop
	n := len(lp)
	old, adv, m, grad := p.old[:n], p.adv[:n], p.m[:n], p.grad[:n]
	w := p.w
	weighted := w != nil
	if !weighted {
		w = grad // never read: a slice of length n for the bounds check
	}
	w = w[:n]
	lo, hi, c3, gs := p.lo, p.hi, p.c3, p.gs
	sL, sClip, sLow, sKL = s.L, s.Clip, s.Low, s.KL
	for t := from; t < n; t++ {
		x := lp[t]
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		a := adv[t]
		d, clamped := 0.0, false
		if !fallback {
			d = x - old[t]
			if d < -20 {
				d, clamped = -20, true
			} else if d > 20 {
				d, clamped = 20, true
			}
		}
		ratio := fastexp.Core(d) // d is clamped to ±20
		// L = max(L1, L2) with L1 = -A·r and L2 = -A·clamp(r, lo, hi):
		// L2 differs only for r outside [lo, hi], where its derivative is
		// 0. At a tie both derivatives are equal (a tie with the ratio
		// outside the range needs A = 0), so torch's even split of the
		// gradient between them gives the same value.
		l := -a * ratio
		g := l
		if clamped {
			g *= 0 // the clamp's derivative
		}
		if ratio < lo || ratio > hi {
			cr := lo
			if ratio > hi {
				cr = hi
			}
			if l2 := -a * cr; l2 > l {
				l, g = l2, g*0
				sClip += mt
			}
		}
		if a < 0 {
			l3 := -a * c3
			if l > l3 {
				l, g = l3, 0
				sLow += mt
			} else if l == l3 {
				g *= 0.5 // torch.min splits the gradient of a tie evenly
			}
			if drop {
				l, g = l*0, 0
			}
		}
		sKL -= d * mt
		if weighted {
			wt := w[t]
			sL += l * wt * mt
			grad[t] = gs * mt * g * wt
		} else { // a weight of 1: the same products without it
			sL += l * mt
			grad[t] = gs * mt * g
		}
	}
	return sL, sClip, sLow, sKL
}
