package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// OPMD is the kernel of the online policy mirror descent surrogate:
// L = -A·lp / (1 + Tau). Sums: loss.
type OPMD struct {
	Tau float64
}

// Sums implements tokens.Kernel.
func (k *OPMD) Sums() int { return 1 }

// Row implements tokens.Kernel.
func (k *OPMD) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	adv, m, grad := r.Adv[:n], r.Mask[:n], r.Grad[:n]
	inv := 1 / (1 + k.Tau)
	gs, sL := r.GradScale, 0.0
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		g := -adv[t] * inv
		sL += g * x * mt
		grad[t] = gs * mt * g
	}
	s[0] += r.Scale * sL
}

// Summary implements Kernel: opmd_loss.
func (k *OPMD) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	loss := agg.Total(mode, r.Stats.Rows, r.Sums[0])
	return loss, agg.Metrics{"opmd_loss": loss}
}

func opmdDef() *Def {
	return &Def{
		Name: "opmd",
		Params: args.Schema{
			{Name: "tau", Kind: args.Float, Range: notMinusOne, Ctor: 1.0, Default: 1.0, InDefaults: true,
				Doc: "the loss is divided by 1 + tau (tau != -1)"},
			aggParam("token-mean"),
		},
		Inputs: []string{tokens.ActionMask, tokens.Advantages},
		build: func(v args.Values) (planner, error) {
			return single{k: &OPMD{Tau: v.Float("tau")}, mode: mode(v, "loss_agg_mode")}, nil
		},
	}
}
