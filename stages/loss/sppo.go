package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// SPPO is the kernel of the soft-clipped log-ratio surrogate:
//
//	r = sg(exp(lp - old)), in = [1/(1+Eps) <= r <= 1+Eps]
//	L = -A·(lp - old)·in
//
// Sums: loss, Σ(1-in)·m.
type SPPO struct {
	Eps float64
}

// Sums implements tokens.Kernel.
func (k *SPPO) Sums() int { return 2 }

// Row implements tokens.Kernel.
func (k *SPPO) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	lo, hi, gs := 1/(1+k.Eps), 1+k.Eps, r.GradScale
	var sL, sOut float64
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		d := x - old[t]
		ratio := exp(d)
		in := b2f(lo <= ratio && ratio <= hi)
		g := -adv[t] * in
		sL += g * d * mt
		sOut += (1 - in) * mt
		grad[t] = gs * mt * g
	}
	s[0] += r.Scale * sL
	s[1] += sOut
}

// Summary implements Kernel: pg_clipfrac, pg_loss.
func (k *SPPO) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	loss := agg.Total(mode, r.Stats.Rows, r.Sums[0])
	return loss, agg.Metrics{"pg_clipfrac": r.Stats.MaskedMean(r.Sums[1]), "pg_loss": loss}
}

func sppoDef() *Def {
	return &Def{
		Name: "sppo",
		Params: args.Schema{
			{Name: "epsilon", Kind: args.Float, Range: notMinusOne, Ctor: 0.3, Default: 0.3, InDefaults: true,
				Doc: "tokens with ratio outside [1/(1+epsilon), 1+epsilon] are dropped (epsilon != -1)"},
			aggParam("token-mean"),
		},
		Inputs: []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		build: func(v args.Values) (planner, error) {
			return single{k: &SPPO{Eps: v.Float("epsilon")}, mode: mode(v, "loss_agg_mode")}, nil
		},
	}
}
