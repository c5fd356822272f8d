package loss

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// DPOSums is the first kernel of dpo: it writes each row's masked sums
// Σ lp·m and Σ ref·m into Out[2b] and Out[2b+1] and no gradient (the gradient
// depends on the batch's margin; RowFactor writes it). Out must hold 2·B
// values; rows write disjoint entries, so rows may run concurrently.
type DPOSums struct {
	Out []float64
}

// Sums implements tokens.Kernel.
func (k *DPOSums) Sums() int { return 0 }

// Row implements tokens.Kernel.
func (k *DPOSums) Row(r *tokens.Row, _ []float64) {
	var pol, ref float64
	for t, mt := range r.Mask {
		if mt != 0 {
			pol += r.LP[t] * mt
			ref += r.Ref[t] * mt
		}
	}
	k.Out[2*r.Index], k.Out[2*r.Index+1] = pol, ref
}

// RowFactor is a gradient-only kernel: Grad[t] = F[row]·m_t, the gradient of
// a loss that is a function of per-row masked sums of the differentiated
// input. It ignores the term's scale and coefficient and accumulates nothing.
type RowFactor struct {
	F []float64
}

// Sums implements tokens.Kernel.
func (k *RowFactor) Sums() int { return 0 }

// Row implements tokens.Kernel.
func (k *RowFactor) Row(r *tokens.Row, _ []float64) {
	f := k.F[r.Index]
	for t, mt := range r.Mask {
		r.Grad[t] = f * mt
	}
}

// logSigmoid is log(sigmoid(x)), stable for large |x|.
func logSigmoid(x float64) float64 {
	if x >= 0 {
		return -math.Log1p(math.Exp(-x))
	}
	return x - math.Log1p(math.Exp(x))
}

// dpo is the planner of the sigmoid DPO loss with label smoothing; rows
// alternate chosen (even) and rejected (odd).
type dpo struct {
	beta, smoothing float64
	perPair         bool
}

// margin returns the loss of one log-ratio margin z and its derivative.
func (d dpo) margin(z float64) (float64, float64) {
	bz := d.beta * z
	loss := -logSigmoid(bz)*(1-d.smoothing) - logSigmoid(-bz)*d.smoothing
	s := sigmoid(bz)
	return loss, d.beta * (-(1-d.smoothing)*(1-s) + d.smoothing*s)
}

func (d dpo) plan(b *tokens.Batch) (*Plan, error) {
	B := b.Totals().Rows[tokens.AllRows]
	if d.perPair && B%2 != 0 {
		return nil, bad("per_pair needs chosen/rejected pairs: odd row count %d", B)
	}
	sums := &DPOSums{Out: make([]float64, 2*B)}
	return &Plan{
		Terms: []tokens.Term{{Kernel: sums, Rows: tokens.AllRows, Coef: 1}},
		Finish: func([]tokens.TermResult) (Outcome, error) {
			f := make([]float64, B)
			grad := []tokens.Term{{Kernel: &RowFactor{F: f}, Rows: tokens.AllRows, Coef: 1}}
			// Row b's log-ratio sum; chosen rows are even, rejected odd.
			ratio := func(r int) float64 { return sums.Out[2*r] - sums.Out[2*r+1] }
			if !d.perPair {
				// Upstream: one margin summed over every pair.
				var cr, rr float64
				for r := 0; r < B; r++ {
					if r%2 == 0 {
						cr += ratio(r)
					} else {
						rr += ratio(r)
					}
				}
				loss, dz := d.margin(cr - rr)
				for r := range f {
					f[r] = dz * float64(1-2*(r%2))
				}
				return Outcome{Loss: loss, GradTerms: grad, Metrics: agg.Metrics{
					"chosen_reward":   d.beta * cr,
					"rejected_reward": d.beta * rr,
					"accuracy_mean":   b2f(cr > rr),
					"dpo_loss":        loss,
				}}, nil
			}
			// Q-20 fix: one margin per pair, losses averaged over pairs.
			K := float64(B / 2)
			var loss, acc, cw, rw float64
			for p := 0; p < B/2; p++ {
				cr, rr := ratio(2*p), ratio(2*p+1)
				l, dz := d.margin(cr - rr)
				loss += l / K
				acc += b2f(cr > rr) / K
				cw += d.beta * cr / K
				rw += d.beta * rr / K
				f[2*p], f[2*p+1] = dz/K, -dz/K
			}
			return Outcome{Loss: loss, GradTerms: grad, Metrics: agg.Metrics{
				"chosen_reward":   cw,
				"rejected_reward": rw,
				"accuracy_mean":   acc,
				"dpo_loss":        loss,
			}}, nil
		},
	}, nil
}

func dpoDef() *Def {
	return &Def{
		Name: "dpo",
		Params: args.Schema{
			{Name: "beta", Kind: args.Float, Ctor: 0.1, Default: 0.1, InDefaults: true,
				Doc: "inverse temperature of the preference margin"},
			{Name: "label_smoothing", Kind: args.Float, Ctor: 0.0, Default: 0.0, InDefaults: true,
				Doc: "probability that a preference label is flipped, in [0, 1]"},
			{Name: "per_pair", Kind: args.Bool, Ctor: false,
				Doc: "Q-20 fix: one margin per chosen/rejected pair, losses and metrics averaged over pairs (rewards: mean per pair; accuracy: fraction of pairs); odd row counts rejected"},
		},
		Inputs:        []string{tokens.RefLogProb, tokens.ActionMask},
		GradAfterSums: true,
		build: func(v args.Values) (planner, error) {
			return dpo{beta: v.Float("beta"), smoothing: v.Float("label_smoothing"), perPair: v.Bool("per_pair")}, nil
		},
	}
}
