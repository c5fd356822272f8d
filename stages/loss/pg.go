package loss

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// PG is the kernel of the plain policy gradient of verl's gpg and
// compute_policy_loss_reinforce:
//
//	L = -A·lp·w     (w the rollout_is_weights, 1 without them)
//
// KL adds the metric ppo_kl = masked_mean(-(lp - old)) (reinforce, where
// old is the rollout log-prob). Sums: loss, Σ-(lp - old)·m.
type PG struct {
	KL bool
}

// Sums implements tokens.Kernel.
func (k *PG) Sums() int { return 2 }

// Row implements tokens.Kernel.
func (k *PG) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	adv, m, grad := r.Adv[:n], r.Mask[:n], r.Grad[:n]
	gs := r.GradScale
	var sL, sKL float64
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		wt := weight(r.Weights, t)
		g := -adv[t] * wt
		sL += -adv[t] * x * wt * mt
		if k.KL {
			sKL -= (x - r.Old[t]) * mt
		}
		grad[t] = gs * mt * g
	}
	s[0] += r.Scale * sL
	s[1] += sKL
}

// Summary implements Kernel: pg_loss, and ppo_kl with KL.
func (k *PG) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	loss := agg.Total(mode, r.Stats.Rows, r.Sums[0])
	m := agg.Metrics{"pg_loss": loss}
	if k.KL {
		m["ppo_kl"] = r.Stats.MaskedMean(r.Sums[1])
	}
	return loss, m
}

// gpgDef is verl's gpg (core_algos.py compute_policy_loss_gpg).
func gpgDef() *Def {
	return &Def{
		Name:     "gpg",
		Params:   append(args.Schema{aggParam("token-mean")}, globalParams...),
		Inputs:   []string{tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		build: func(v args.Values) (planner, error) {
			return single{k: &PG{}, mode: mode(v, "loss_agg_mode"), global: global(v)}, nil
		},
	}
}

// reinforceDef is verl's compute_policy_loss_reinforce, the REINFORCE branch
// of bypass mode; old_logprob holds the rollout log-probs.
func reinforceDef() *Def {
	return &Def{
		Name:     "reinforce",
		Params:   append(args.Schema{aggParam("token-mean")}, globalParams...),
		Inputs:   []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		Weighted: true,
		build: func(v args.Values) (planner, error) {
			return single{k: &PG{KL: true}, mode: mode(v, "loss_agg_mode"), global: global(v)}, nil
		},
	}
}
