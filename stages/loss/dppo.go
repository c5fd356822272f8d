package loss

import (
	"math"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// DPPO is the kernel of verl's dppo_tv and dppo_kl (DPPO, a binary trust
// region on the token probabilities; spec verl_losses_2026.md §3-4):
//
//	ℓ = clamp(lp − old, −20, 20), r = exp(ℓ), τ = sg(min(r, ClipC))
//	p = exp(lp), q = exp(old)
//	TV: keep = p − q ≤ High where A > 0, p − q ≥ −Low where A ≤ 0
//	KL: K = q·(old − lp) + (1 − q)·ln((1 − q + 1e-8) / (1 − p + 1e-8))
//	    keep = K ≤ High ∨ p ≤ q where A > 0, K ≤ Low ∨ p ≥ q where A ≤ 0
//	L = −A·τ·lp·keep·w   (w the rollout_is_weights; ∂L/∂lp = −A·τ·keep·w)
//
// The loss value holds lp itself (V26-02): only its gradient is the
// surrogate's. Seq says the aggregation is a seq-mean mode, whose row sums
// are plain products Σ L·m (a non-finite L at a masked position of a
// non-empty row poisons them, as upstream). Sums: loss, Σ(1 − keep)·m,
// Σ(−ℓ)·m, Σ[r > ClipC]·keep·m.
type DPPO struct {
	Low, High, ClipC float64
	KL, Seq          bool
}

// Sums implements tokens.Kernel.
func (k *DPPO) Sums() int { return 4 }

// Row implements tokens.Kernel. The gradient is written at every token:
// at a masked one it is 0·∂L/∂lp, NaN where that is not finite (spec §1).
// The token loop calls nothing but exp for arguments outside
// fastexp.Core's range and, with KL, klBounds, and math.Log for the few
// tokens whose divergence its bounds leave open.
func (k *DPPO) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	gs, c, lo, hi, kl := r.GradScale, k.ClipC, k.Low, k.High, k.KL
	seq := k.Seq && r.Count > 0
	var sL, sOut, sKL, sTrunc float64
	for t, x := range lp {
		mt, o, a := m[t], old[t], adv[t]
		lr := x - o // clamped to ±20, NaN kept
		if lr < -20 {
			lr = -20
		} else if lr > 20 {
			lr = 20
		}
		ratio := lr
		if lr == lr {
			ratio = fastexp.Core(lr)
		}
		tau := ratio // min(r, c), NaN kept
		if ratio > c {
			tau = c
		}
		p, q := 0.0, 0.0 // fastexp.Core inlined where in its range
		if x > -708 && x < 709 {
			p = fastexp.Core(x)
		} else {
			p = exp(x)
		}
		if o > -708 && o < 709 {
			q = fastexp.Core(o)
		} else {
			q = exp(o)
		}
		pos := a > 0 // inside the region when the update moves p up (A > 0) or down
		var keep bool
		if kl {
			// The divergence only binds when p moves in the advantage's
			// direction. Both answers are computed for every token, so that
			// only the rare undecided one (klBounds) takes a jump.
			free := pick(pos, b2f(p <= q), b2f(p >= q))
			e := pick(pos, hi, lo)
			within, decided := klBounds(p, q, o-x, e)
			keep = free+within > 0
			if free+decided == 0 {
				keep = q*(o-x)+(1-q)*math.Log((1-q+1e-8)/(1-p+1e-8)) <= e
			}
		} else {
			d := p - q
			keep = pos && d <= hi || !pos && d >= -lo
		}
		kf := b2f(keep)
		g := -a * tau * kf * weight(r.Weights, t)
		if mt != 0 || seq {
			sL += g * x * mt
		}
		if mt != 0 {
			sOut += (1 - kf) * mt
			sKL -= lr * mt
			sTrunc += b2f(ratio > c) * kf * mt
			grad[t] = gs * mt * g
		} else {
			grad[t] = 0 * g
		}
	}
	s[0] += r.Scale * sL
	s[1] += sOut
	s[2] += sKL
	s[3] += sTrunc
}

// klBounds tells, where it can, whether dppo_kl's divergence
// K = q·d + (1 − q)·ln u, with d = old − lp and
// u = (1 − q + 1e-8)/(1 − p + 1e-8), computed with math.Log, is at most e:
// decided is 1 where it can tell, within 1 where K ≤ e (both 0 or 1). Where
// 1 − q > 0 and u is finite and positive, the bounds
// 1 − 1/u ≤ ln u ≤ u − 1 settle it (the lower one multiplied by u) unless
// e is within a margin of 1e-9 of the terms' size of the interval they
// leave: the rounding of K and of the bounds, a few ulps of that size,
// stays far inside the margin, so the answer is that of K as computed.
func klBounds(p, q, d, e float64) (within, decided float64) {
	s, u := 1-q, (1-q+1e-8)/(1-p+1e-8)
	base, up := q*d, u-1
	margin := 1e-9*(math.Abs(base)+s*math.Abs(up)*(1+1/u)) + 1e-300
	ok := b2f(s > 0) * b2f(u > 0) * b2f(u <= math.MaxFloat64)
	within = ok * b2f(base+s*up <= e-margin)
	return within, within + ok*b2f(base*u+s*up > (e+margin)*u)
}

// Summary implements Kernel: pg_clipfrac, ppo_kl, pg_clipfrac_lower, pg_loss.
func (k *DPPO) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	return loss, agg.Metrics{"pg_clipfrac": st.MaskedMean(s[1]), "ppo_kl": st.MaskedMean(s[2]),
		"pg_clipfrac_lower": st.MaskedMean(s[3]), "pg_loss": loss}
}

// dppoDef is verl's dppo_tv (kl false) or dppo_kl (kl true).
func dppoDef(name string, kl bool) *Def {
	return &Def{
		Name: name,
		Params: append(append(actorClipParams(),
			actorParam("clip_ratio_c", 3.0, schema.Finite, "truncation c of the ratio, τ = min(r, c) (verl's ActorConfig default 3; the DPPO paper: 10000, none)"),
			aggParam("token-mean")), globalParams...),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		CPUOnly:  true,
		build: func(v args.Values) (planner, error) {
			low, high, err := clipRange(v)
			if err != nil {
				return nil, err
			}
			md := mode(v, "loss_agg_mode")
			k := &DPPO{Low: low, High: high, ClipC: v.Float("clip_ratio_c"), KL: kl, Seq: md != agg.TokenMean}
			return single{k: k, mode: md, global: verlGlobal(v)}, nil
		},
	}
}
