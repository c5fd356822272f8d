package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// DRO is the kernel of verl's dro (Direct Reward Optimization with a
// quadratic log-ratio penalty; spec verl_losses_2026.md §7):
//
//	λ = lp − old, L = −(lp·A − ½·Beta·λ²)·w, ∂L/∂lp = −(A − Beta·λ)·w
//
// with w the rollout_is_weights; Seq as DPPO's. Sums: loss, Σ(−λ)·m.
type DRO struct {
	Beta float64
	Seq  bool
}

// Sums implements tokens.Kernel.
func (k *DRO) Sums() int { return 2 }

// Row implements tokens.Kernel; the gradient is written at every token, as
// DPPO's.
func (k *DRO) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	gs, beta := r.GradScale, k.Beta
	seq := k.Seq && r.Count > 0
	var sL, sKL float64
	for t, x := range lp {
		mt, a := m[t], adv[t]
		lam := x - old[t]
		wt := weight(r.Weights, t)
		if mt != 0 || seq {
			sL += -(x*a - 0.5*beta*lam*lam) * wt * mt
		}
		g := -(a - beta*lam) * wt
		if mt != 0 {
			sKL -= lam * mt
			grad[t] = gs * mt * g
		} else {
			grad[t] = 0 * g
		}
	}
	s[0] += r.Scale * sL
	s[1] += sKL
}

// Summary implements Kernel: ppo_kl, pg_loss.
func (k *DRO) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	loss := agg.Total(mode, r.Stats.Rows, r.Sums[0])
	return loss, agg.Metrics{"ppo_kl": r.Stats.MaskedMean(r.Sums[1]), "pg_loss": loss}
}

// droDef is verl's dro (compute_policy_loss_dro).
func droDef() *Def {
	return &Def{
		Name: "dro",
		Params: append(args.Schema{
			{Name: "dro_beta", Kind: args.Float, Nullable: true, InDefaults: true,
				Doc: "weight β of the penalty ½·β·(lp − old)², > 0 (verl's default null is refused, as upstream)"},
			aggParam("token-mean"),
		}, globalParams...),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		CPUOnly:  true,
		build: func(v args.Values) (planner, error) {
			beta, ok := v.OptFloat("dro_beta")
			if !ok || !(beta > 0) {
				return nil, bad("policy_loss.dro_beta must be a positive value when using DRO")
			}
			md := mode(v, "loss_agg_mode")
			return single{k: &DRO{Beta: beta, Seq: md != agg.TokenMean}, mode: md, global: verlGlobal(v)}, nil
		},
	}
}
