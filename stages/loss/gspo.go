package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// GSPO is the kernel of the sequence-level importance ratio (GSPO-token):
//
//	s_b = masked_mean(lp - old, m) per row, log r = lp - sg(lp) + sg(s_b)
//	L = max(-A·r, -A·clamp(r, 1-Low, 1+High))
//
// so r is constant along a row and ∂r/∂lp = r; L ← L·w with the
// rollout_is_weights w when the batch has them. Verl is verl's version
// (core_algos.py): s_b = Σ(lp - old)·m / max(Σm, 1), log r capped at 10
// (no gradient above), metrics pg_clipfrac, ppo_kl, pg_clipfrac_lower (0).
// Sums: loss, Σ[L2>L1]·m, Σ(-d)·m, Σ_rows(-s_b).
type GSPO struct {
	Low, High float64
	Verl      bool
}

// Sums implements tokens.Kernel.
func (k *GSPO) Sums() int { return 4 }

// Row implements tokens.Kernel.
func (k *GSPO) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	var sb float64
	logr, dd := 0.0, 1.0
	if k.Verl {
		for t, x := range lp {
			sb += (x - old[t]) * m[t] // a plain product, as upstream
		}
		sb /= max(r.Count, 1)
		if logr = sb; logr > 10 {
			logr, dd = 10, 0
		}
	} else {
		sb = rowMeanLogRatio(r) // no clamp
		logr = sb
	}
	ratio := exp(logr)
	cr, in := torch.Clamp(ratio, 1-k.Low, 1+k.High)
	gs := r.GradScale
	var sL, sClip, sKL float64
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		a := adv[t]
		l1, l2 := -a*ratio, -a*cr
		l, g := l1, -a*ratio*dd
		if l2 > l1 {
			l, g = l2, g*in
			sClip += mt
		}
		wt := weight(r.Weights, t)
		sL += l * wt * mt
		sKL -= (x - old[t]) * mt
		grad[t] = gs * mt * g * wt
	}
	s[0] += r.Scale * sL
	s[1] += sClip
	s[2] += sKL
	s[3] -= sb
}

// Summary implements Kernel: pg_clipfrac, ppo_kl, pg_loss, ppo_kl_seq.
func (k *GSPO) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	if k.Verl {
		return loss, verlMetrics(loss, st.MaskedMean(s[1]), st.MaskedMean(s[2]))
	}
	return loss, agg.Metrics{
		"pg_clipfrac": st.MaskedMean(s[1]),
		"ppo_kl":      st.MaskedMean(s[2]),
		"pg_loss":     loss,
		"ppo_kl_seq":  s[3] / float64(st.Rows),
	}
}

func gspoDef() *Def {
	return &Def{
		Name: "gspo",
		Params: append(append(clipParams(nil, 0.0003, 0.0004, true),
			aggParam("seq-mean-token-mean"),
			args.Param{Name: RespectOwnAggMode, Kind: args.Bool, Ctor: false,
				Doc: "Q-05 fix: keep this loss's loss_agg_mode when the config applies algorithm.loss_agg_mode (see FromConfig)"},
			verlParam("sequence ratio Σ(lp-old)·m/max(Σm,1) capped at exp(10); always seq-mean-token-mean"),
		), globalParams...),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		build: func(v args.Values) (planner, error) {
			low, high, err := clipRange(v)
			if err != nil {
				return nil, err
			}
			md := mode(v, "loss_agg_mode")
			if v.Bool("verl") {
				md = agg.SeqMeanTokenMean
			}
			return single{k: &GSPO{Low: low, High: high, Verl: v.Bool("verl")}, mode: md, global: global(v)}, nil
		},
	}
}
