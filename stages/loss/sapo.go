package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// SAPO is the kernel of the soft adaptive gate:
//
//	r = exp(lp - old), τ = TauPos where A > 0 else TauNeg
//	g = sigmoid(τ·(r-1))·4/τ
//	L = -A·sg(g)·lp                  (upstream: gradient weight g, quirk Q-06)
//	L = -A·g(r)                      (PaperGradient: ∂L/∂lp = -A·4σ(1-σ)·r)
//
// L ← L·w with the rollout_is_weights w when the batch has them. Verl is
// verl's version (core_algos.py): d clamped to ±20, the paper gradient
// (quirk RC-09), metrics pg_clipfrac (0), ppo_kl, pg_clipfrac_lower (0).
// Sums: loss, Σ(-d)·m, Σg·m, Σr·m, Σ[A>0]·m.
type SAPO struct {
	TauPos, TauNeg float64
	PaperGradient  bool
	Verl           bool
}

// Sums implements tokens.Kernel.
func (k *SAPO) Sums() int { return 5 }

// Row implements tokens.Kernel. The token loop is sapoTokens.run, after
// sapoVector's groups of four tokens where vectorSAPO.
func (k *SAPO) Row(r *tokens.Row, s []float64) {
	n := len(r.LP)
	t := sapoTokens{
		lp: r.LP, old: r.Old[:n], adv: r.Adv[:n], m: r.Mask[:n], grad: r.Grad[:n], w: r.Weights,
		tauPos: k.TauPos, tauNeg: k.TauNeg, gs: r.GradScale,
		clampD: k.Verl, paper: k.PaperGradient || k.Verl,
	}
	var sums sapoSums
	from := 0
	if vectorSAPO {
		for v := n &^ 3; from < v; {
			from, sums = sapoVector(&t, from, sums)
			if from < v { // a group with an argument outside Core's range
				sums = t.run(from, from+4, sums)
				from += 4
			}
		}
	}
	sums = t.run(from, n, sums)
	s[0] += r.Scale * sums.L
	s[1] += sums.KL
	s[2] += sums.Gate
	s[3] += sums.Ratio
	s[4] += sums.Pos
}

// sapoTokens is the token loop of (*SAPO).Row: a row's columns and the
// settings read once per row.
type sapoTokens struct {
	lp, old, adv, m, grad []float64
	w                     []float64 // rollout_is_weights, nil when absent
	tauPos, tauNeg, gs    float64
	clampD, paper         bool
}

// sapoSums are the token loop's sums: loss, Σ(-d)·m, Σg·m, Σr·m, Σ[A>0]·m.
type sapoSums struct{ L, KL, Gate, Ratio, Pos float64 }

// run evaluates tokens [from, to) of the row, continuing the sums s (those
// of the tokens before from): each sum is added to in token order.
func (p *sapoTokens) run(from, to int, s sapoSums) sapoSums {
	lp := p.lp[:to]
	old, adv, m, grad := p.old[:to], p.adv[:to], p.m[:to], p.grad[:to]
	gs := p.gs
	clampD, paper := p.clampD, p.paper
	tauPos, tauNeg := p.tauPos, p.tauNeg
	sL, sKL, sGate, sRatio, sPos := s.L, s.KL, s.Gate, s.Ratio, s.Pos
	for t := from; t < to; t++ {
		x := lp[t]
		mt := m[t]
		if mt == 0 { // padding is contiguous: a predicted jump
			grad[t] = 0
			continue
		}
		d, dd := x-old[t], 1.0 // no clamp
		if clampD {
			d, dd = torch.Clamp(d, -20, 20)
		}
		// fastexp.Core inlined where the argument is in its range (always,
		// but for extreme log-ratios): exp is a call.
		ratio := 0.0
		if d > -708 && d < 709 {
			ratio = fastexp.Core(d)
		} else {
			ratio = exp(d)
		}
		a := adv[t]
		pos := a > 0 // varies from token to token: chosen without a jump
		tau := pick(pos, tauPos, tauNeg)
		sPos += b2f(pos) * mt
		z, e := tau*(ratio-1), 0.0 // sigmoid(z) = 1/(1+e^-z), inlined likewise
		if z > -709 && z < 708 {
			e = fastexp.Core(-z)
		} else {
			e = exp(-z)
		}
		sig := 1 / (1 + e)
		gate := sig * 4 / tau
		var l, g float64
		if paper {
			l, g = -a*gate, -a*4*sig*(1-sig)*ratio*dd
		} else {
			l, g = -a*gate*x, -a*gate
		}
		wt := weight(p.w, t)
		sL += l * wt * mt
		sKL -= d * mt
		sGate += gate * mt
		sRatio += ratio * mt
		grad[t] = gs * mt * g * wt
	}
	return sapoSums{sL, sKL, sGate, sRatio, sPos}
}

// Summary implements Kernel: sapo_loss, ppo_kl, avg_soft_gate, avg_ratio,
// pos_adv_frac.
func (k *SAPO) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	if k.Verl {
		return loss, verlMetrics(loss, 0, st.MaskedMean(s[1]))
	}
	return loss, agg.Metrics{
		"sapo_loss":     loss,
		"ppo_kl":        st.MaskedMean(s[1]),
		"avg_soft_gate": st.MaskedMean(s[2]),
		"avg_ratio":     st.MaskedMean(s[3]),
		"pos_adv_frac":  st.MaskedMean(s[4]),
	}
}

func sapoDef() *Def {
	return &Def{
		Name: "sapo",
		Params: append(args.Schema{
			{Name: "tau_pos", Kind: args.Float, Ctor: 1.0, Default: 1.0, InDefaults: true,
				Doc: "gate temperature for positive advantages"},
			{Name: "tau_neg", Kind: args.Float, Ctor: 1.05, Default: 1.05, InDefaults: true,
				Doc: "gate temperature for non-positive advantages (>= tau_pos)"},
			aggParam("token-mean"),
			{Name: "paper_gradient", Kind: args.Bool, Ctor: false,
				Doc: "Q-06 fix: optimise -A·g(r) with r differentiable, as the SAPO paper (loss value and sapo_loss change)"},
			verlParam("log ratio clamped to ±20, the paper gradient, always seq-mean-token-mean"),
		}, globalParams...),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		build: func(v args.Values) (planner, error) {
			pos, neg := v.Float("tau_pos"), v.Float("tau_neg")
			if neg < pos {
				return nil, bad("tau_neg (%v) must be >= tau_pos (%v)", neg, pos)
			}
			md := mode(v, "loss_agg_mode")
			if v.Bool("verl") {
				md = agg.SeqMeanTokenMean
			}
			k := &SAPO{TauPos: pos, TauNeg: neg, PaperGradient: v.Bool("paper_gradient"), Verl: v.Bool("verl")}
			return single{k: k, mode: md, global: global(v)}, nil
		},
	}
}
