package loss

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// SFT weightings of the negative log-likelihood.
const (
	WeightNone = iota // sft:     L = -lp
	WeightProb        // sft_is:  L = -lp · sg(exp(lp))
	WeightPhi         // sft_phi: L = -min(lp, ln Cutoff) · sg(p(1-p)), p = exp(lp)
)

// SFT is the kernel of the supervised losses sft, sft_is and sft_phi (and of
// the expert rows of mix and mix_chord). Metric is the loss's metric name.
// Sums: loss.
type SFT struct {
	Weight int
	Cutoff float64 // sft_phi: log-probs above ln(Cutoff) are clamped (Cutoff < 1)
	Metric string
}

// Sums implements tokens.Kernel.
func (k *SFT) Sums() int { return 1 }

// Row implements tokens.Kernel.
func (k *SFT) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	m, grad := r.Mask[:n], r.Grad[:n]
	lnCut := math.Inf(1)
	if k.Cutoff < 1 {
		lnCut = math.Log(k.Cutoff)
	}
	gs, sL := r.GradScale, 0.0
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		var l, g float64
		switch k.Weight {
		case WeightNone:
			l, g = -x, -1
		case WeightProb:
			p := exp(x)
			l, g = -x*p, -p
		default:
			p := exp(x) // before the cutoff clamp
			phi := p * (1 - p)
			xc, pass := x, 1.0
			if x > lnCut {
				xc, pass = lnCut, 0
			}
			l, g = -xc*phi, -phi*pass
		}
		sL += l * mt
		grad[t] = gs * mt * g
	}
	s[0] += r.Scale * sL
}

// Summary implements Kernel: the loss under the kernel's metric name.
func (k *SFT) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	loss := agg.Total(mode, r.Stats.Rows, r.Sums[0])
	return loss, agg.Metrics{k.Metric: loss}
}

func sftDef() *Def {
	return &Def{
		Name:   "sft",
		Params: args.Schema{aggParam("token-mean")},
		Inputs: []string{tokens.ActionMask},
		build: func(v args.Values) (planner, error) {
			return single{k: &SFT{Weight: WeightNone, Metric: "sft_loss"}, mode: mode(v, "loss_agg_mode")}, nil
		},
	}
}

func sftISDef() *Def {
	return &Def{
		Name:   "sft_is",
		Params: args.Schema{aggParam("token-mean")},
		Inputs: []string{tokens.ActionMask},
		build: func(v args.Values) (planner, error) {
			return single{k: &SFT{Weight: WeightProb, Metric: "sft_is_loss"}, mode: mode(v, "loss_agg_mode")}, nil
		},
	}
}

func sftPhiDef() *Def {
	return &Def{
		Name: "sft_phi",
		Params: args.Schema{
			aggParam("token-mean"),
			{Name: "cutoff_prob", Kind: args.Float, Range: "(0,1]", Ctor: 1.0, Default: 1.0, InDefaults: true,
				Doc: "log-probs are clamped at ln(cutoff_prob), 0 < cutoff_prob <= 1"},
		},
		Inputs: []string{tokens.ActionMask},
		build: func(v args.Values) (planner, error) {
			return single{k: &SFT{Weight: WeightPhi, Cutoff: v.Float("cutoff_prob"), Metric: "sft_phi_loss"}, mode: mode(v, "loss_agg_mode")}, nil
		},
	}
}
