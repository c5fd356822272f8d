package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/fastexp"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// IS is the kernel of the unclipped importance-sampling surrogate:
// d = clamp(lp - old, -20, 20), L = -A·exp(d). Sums: loss, Σr·m, Σ(-d)·m.
type IS struct{}

// Sums implements tokens.Kernel.
func (k *IS) Sums() int { return 3 }

// Row implements tokens.Kernel.
func (k *IS) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	gs := r.GradScale
	var sL, sRatio, sKL float64
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		d, dd := torch.Clamp(x-old[t], -20, 20)
		ratio := fastexp.Core(d) // d is clamped to ±20
		l := -adv[t] * ratio
		sL += l * mt
		sRatio += ratio * mt
		sKL -= d * mt
		grad[t] = gs * mt * l * dd
	}
	s[0] += r.Scale * sL
	s[1] += sRatio
	s[2] += sKL
}

// Summary implements Kernel: pg_loss, ratio/mean, approx_kl.
func (k *IS) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	s, st := r.Sums, r.Stats
	loss := agg.Total(mode, st.Rows, s[0])
	return loss, agg.Metrics{
		"pg_loss":    loss,
		"ratio/mean": st.MaskedMean(s[1]),
		"approx_kl":  st.MaskedMean(s[2]),
	}
}

func isDef() *Def {
	return &Def{
		Name:   "importance_sampling",
		Params: args.Schema{aggParam("token-mean")},
		Inputs: []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		build: func(v args.Values) (planner, error) {
			return single{k: &IS{}, mode: mode(v, "loss_agg_mode")}, nil
		},
	}
}
