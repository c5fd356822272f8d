package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TOPR is the kernel of tapered off-policy REINFORCE:
//
//	r = exp(lp - old) per token, α = clamp(r, 0, 1) where A <= Threshold else 1
//	L = -sg(α)·A·lp
//
// With SequenceRatio (quirk Q-07 fix, as in the paper) r is the row's
// sequence ratio exp(clamp(Σ_t (lp-old)·m, -20, 20)) at every token of the
// row; avg_ratio then averages that ratio. Sums: loss, Σα·m, Σr·m.
type TOPR struct {
	Threshold     float64
	SequenceRatio bool
}

// Sums implements tokens.Kernel.
func (k *TOPR) Sums() int { return 3 }

// Row implements tokens.Kernel.
func (k *TOPR) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	seq := 0.0
	if k.SequenceRatio {
		sum := 0.0
		for t, mt := range m {
			if mt != 0 {
				sum += (lp[t] - old[t]) * mt
			}
		}
		d, _ := torch.Clamp(sum, -20, 20)
		seq = exp(d)
	}
	gs := r.GradScale
	var sL, sAlpha, sRatio float64
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		ratio := seq
		if !k.SequenceRatio {
			ratio = exp(x - old[t])
		}
		a, alpha := adv[t], 1.0
		if a <= k.Threshold {
			alpha, _ = torch.Clamp(ratio, 0, 1)
		}
		g := -alpha * a
		sL += g * x * mt
		sAlpha += alpha * mt
		sRatio += ratio * mt
		grad[t] = gs * mt * g
	}
	s[0] += r.Scale * sL
	s[1] += sAlpha
	s[2] += sRatio
}

// Summary implements Kernel: topr_loss, avg_alpha, avg_ratio.
func (k *TOPR) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	return loss, agg.Metrics{
		"topr_loss": loss,
		"avg_alpha": st.MaskedMean(s[1]),
		"avg_ratio": st.MaskedMean(s[2]),
	}
}

func toprDef() *Def {
	return &Def{
		Name: "topr",
		Params: args.Schema{
			{Name: "advantage_threshold", Kind: args.Float, Ctor: 0.0, Default: 0.0, InDefaults: true,
				Doc: "tokens with advantage <= threshold get the truncated ratio as weight"},
			aggParam("token-mean"),
			{Name: "sequence_ratio", Kind: args.Bool, Ctor: false,
				Doc: "Q-07 fix: truncate the sequence ratio exp(Σ(lp-old)·m) (log clamped to ±20) instead of the token ratio"},
		},
		Inputs: []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		build: func(v args.Values) (planner, error) {
			k := &TOPR{Threshold: v.Float("advantage_threshold"), SequenceRatio: v.Bool("sequence_ratio")}
			return single{k: k, mode: mode(v, "loss_agg_mode")}, nil
		},
	}
}
