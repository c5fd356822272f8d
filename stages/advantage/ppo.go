package advantage

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// PPO is the trainer-side ppo fn: GAE over token_level_rewards and values,
// returns = advantages + values, advantages whitened over the batch and not
// re-masked. The recursion runs over every position of a row.
type PPO struct{ Gamma, Lam float64 }

func ppoSpec() Spec {
	return Spec{
		Name: "ppo",
		Doc:  "GAE with critic values, whitened over the batch",
		Params: args.Schema{
			param("gamma", args.Float, 1.0, "discount"),
			param("lam", args.Float, 1.0, "GAE lambda"),
		},
		New: TrainerCtor(func(a args.Values) (TrainerFn, error) { return &PPO{Gamma: a.Float("gamma"), Lam: a.Float("lam")}, nil }),
	}
}

// Compute implements TrainerFn; needs Mask, TokenLevelRewards, Values. It
// fails, as upstream, when the batch has fewer than two masked tokens.
func (f *PPO) Compute(b *TokenBatch) (*TokenResult, error) {
	gae, ret, err := f.gae(b)
	if err != nil {
		return nil, err
	}
	adv := make([]float64, len(b.Mask))
	if err := agg.Whiten(adv, gae, b.Mask, true); err != nil {
		return nil, errorf("ppo", "%v", err)
	}
	return &TokenResult{Advantages: adv, Returns: ret, Metrics: agg.Metrics{}}, nil
}

// Inputs implements TrainerFn.
func (f *PPO) Inputs() []string { return []string{InTokenLevelRewards, InValues} }

// Stream implements TrainerFn.
func (f *PPO) Stream() Streamed {
	return &whitenStream{fn: "ppo", local: func(c *Chunk, _ []float64) ([]float64, []float64, error) { return f.gae(&c.TokenBatch) }}
}

// gae returns the GAE advantages (before whitening) and the returns.
func (f *PPO) gae(b *TokenBatch) (gae, ret []float64, err error) {
	const fn = "ppo"
	if err := b.needMask(fn); err != nil {
		return nil, nil, err
	}
	for _, c := range []struct {
		name string
		col  []float64
	}{{InTokenLevelRewards, b.TokenLevelRewards}, {InValues, b.Values}} {
		if err := b.need(fn, c.name, c.col); err != nil {
			return nil, nil, err
		}
	}
	gae = make([]float64, len(b.Mask))
	ret = make([]float64, len(b.Mask))
	for r := 0; r < b.Rows.N(); r++ {
		lo, hi := b.Rows.Span(r)
		g, next := 0.0, 0.0
		for t := hi - 1; t >= lo; t-- {
			delta := b.TokenLevelRewards[t] + f.Gamma*next - b.Values[t]
			g = delta + f.Gamma*f.Lam*g
			gae[t] = g
			ret[t] = g + b.Values[t]
			next = b.Values[t]
		}
	}
	return gae, ret, nil
}
