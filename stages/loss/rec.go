package loss

import (
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/internal/torch"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// REC clip modes, weightings and regularizers (argument values).
var (
	recClipModes    = []string{"none", "one-side", "gspo-one-side", "two-side", "ring"}
	recWeights      = []string{"none", "importance_sampling", "gspo_importance_sampling", "advantage", "truncated_importance_sampling"}
	recRegularizers = []string{"none", "k2", "forward-kl"}
)

// REC is the kernel of the group-relative REINFORCE family. With
// r = sg(exp(lp - old)) and, for clip mode gspo-one-side, the row ratio
// ρ = exp(sg(masked_mean(lp - old, m))):
//
//	keep K: none: 1; two-side: 1-Low <= r <= 1+High;
//	        one-side: (r <= 1+High, A >= 0) or (A <= 0, r >= 1-Low);
//	        gspo-one-side: as one-side with ρ for r;
//	        ring: two-side or (A >= 0, r <= 1-LowPrime) or (A <= 0, r >= 1+HighPrime)
//	A' = A (none), A·r (importance_sampling), A·ρ (gspo_importance_sampling),
//	     A·exp(A/Temp) (advantage), A·clamp(r, 1-LowPrime, 1+HighPrime)
//	     (truncated_importance_sampling, 0.6 line)
//	A' += old - sg(lp) with FixOPD (fix_opd_advantage, 0.6 line)
//	L = -A'·lp·[K], then - Coef·lp (forward-kl) or + Coef·(lp-old)² (k2)
//
// Sums: loss, Σ(1-K)·m.
type REC struct {
	ClipMode, Weight, Regularizer  string
	Low, High, LowPrime, HighPrime float64
	Coef, Temp                     float64
	FixOPD                         bool
}

// Sums implements tokens.Kernel.
func (k *REC) Sums() int { return 2 }

// Row implements tokens.Kernel.
func (k *REC) Row(r *tokens.Row, s []float64) {
	lp := r.LP
	n := len(lp)
	old, adv, m, grad := r.Old[:n], r.Adv[:n], r.Mask[:n], r.Grad[:n]
	rho := 0.0
	if k.ClipMode == "gspo-one-side" {
		rho = exp(rowMeanLogRatio(r))
	}
	gs := r.GradScale
	var sL, sDrop float64
	for t, x := range lp {
		mt := m[t]
		if mt == 0 {
			grad[t] = 0
			continue
		}
		a, d := adv[t], x-old[t]
		ratio := exp(d)
		keep := k.keep(a, ratio, rho)
		w := a
		switch k.Weight {
		case "importance_sampling":
			w = a * ratio
		case "gspo_importance_sampling":
			w = a * rho
		case "advantage":
			w = a * exp(a/k.Temp)
		case "truncated_importance_sampling":
			c, _ := torch.Clamp(ratio, 1-k.LowPrime, 1+k.HighPrime)
			w = a * c
		}
		if k.FixOPD {
			w -= d // + old − sg(lp)
		}
		kf := b2f(keep)
		l, g := -w*x*kf, -w*kf
		switch k.Regularizer {
		case "forward-kl":
			l, g = l-k.Coef*x, g-k.Coef
		case "k2":
			l, g = l+k.Coef*d*d, g+2*k.Coef*d
		}
		sL += l * mt
		sDrop += (1 - kf) * mt
		grad[t] = gs * mt * g
	}
	s[0] += r.Scale * sL
	s[1] += sDrop
}

func (k *REC) keep(a, ratio, rho float64) bool {
	lo, hi := 1-k.Low, 1+k.High
	switch k.ClipMode {
	case "two-side":
		return ratio >= lo && ratio <= hi
	case "one-side":
		return ratio <= hi && a >= 0 || a <= 0 && ratio >= lo
	case "gspo-one-side":
		return rho <= hi && a >= 0 || rho >= lo && a <= 0
	case "ring":
		return lo <= ratio && ratio <= hi || a >= 0 && ratio <= 1-k.LowPrime || a <= 0 && ratio >= 1+k.HighPrime
	}
	return true
}

// Summary implements Kernel: pg_clipfrac, pg_loss.
func (k *REC) Summary(mode agg.Mode, r tokens.TermResult) (float64, agg.Metrics) {
	loss := agg.Total(mode, r.Stats.Rows, r.Sums[0])
	return loss, agg.Metrics{"pg_clipfrac": r.Stats.MaskedMean(r.Sums[1]), "pg_loss": loss}
}

func recDef() *Def {
	f := func(name string, ctor, def float64, doc string) args.Param {
		return args.Param{Name: name, Kind: args.Float, Ctor: ctor, Default: def, InDefaults: true, Doc: doc}
	}
	s := func(name string, choices []string, doc string) args.Param {
		return args.Param{Name: name, Kind: args.String, Ctor: "none", Default: "none", InDefaults: true, Choices: choices, Doc: doc}
	}
	return &Def{
		Name: "rec",
		// Constructor and default_args() differ for the primed epsilons.
		Params: args.Schema{
			f("epsilon_low", 0.2, 0.2, "ratio lower bound 1 - epsilon_low, 0 < epsilon_low <= 1").In("(0,1]"),
			f("epsilon_high", 0.2, 0.2, "ratio upper bound 1 + epsilon_high, > 0").In(schema.Positive),
			f("epsilon_low_prime", 0.4, 0.6, "ring mode: A >= 0 tokens with ratio <= 1 - epsilon_low_prime are kept, 0 < x <= 1").In("(0,1]"),
			f("epsilon_high_prime", 0.4, 2, "ring mode: A <= 0 tokens with ratio >= 1 + epsilon_high_prime are kept, > 0").In(schema.Positive),
			s("clip_mode", recClipModes, "which tokens are kept"),
			s("weight", recWeights, "advantage weighting"),
			s("regularizer", recRegularizers, "regularizer added to every token"),
			f("regularizer_coef", 0, 0, "regularizer coefficient, >= 0").In(schema.NonNeg),
			f("temp", 1, 1, "temperature of weight=advantage, > 0").In(schema.Positive),
			// 0.6 line: the mode is honoured (Q-16 fixed upstream), except
			// for gspo-one-side; null is refused here, not at call time.
			aggParam("token-mean"),
			{Name: "fix_opd_advantage", Kind: args.Bool, Ctor: false, Default: false, InDefaults: true,
				Doc: "add old − sg(logprob) to the weighted advantage (on-policy distillation)"},
		},
		Inputs: []string{tokens.OldLogProb, tokens.ActionMask, tokens.Advantages},
		build: func(v args.Values) (planner, error) {
			k := &REC{ClipMode: v.String("clip_mode"), Weight: v.String("weight"), Regularizer: v.String("regularizer"),
				Low: v.Float("epsilon_low"), High: v.Float("epsilon_high"),
				LowPrime: v.Float("epsilon_low_prime"), HighPrime: v.Float("epsilon_high_prime"),
				Coef: v.Float("regularizer_coef"), Temp: v.Float("temp"), FixOPD: v.Bool("fix_opd_advantage")}
			switch {
			case k.Weight == "gspo_importance_sampling" && k.ClipMode != "gspo-one-side":
				// Upstream fails at call time on an undefined variable.
				return nil, bad("weight gspo_importance_sampling requires clip_mode gspo-one-side, got %s", k.ClipMode)
			}
			// gspo-one-side forces seq-mean-token-mean.
			md := mode(v, "loss_agg_mode")
			if k.ClipMode == "gspo-one-side" {
				md = agg.SeqMeanTokenMean
			}
			return single{k: k, mode: md}, nil
		},
	}
}
