package advantage

import (
	"slices"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// ReinforcePlusPlus is the trainer-side reinforceplusplus fn: discounted
// returns of token_level_rewards, whitened over the batch, then masked.
type ReinforcePlusPlus struct{ Gamma float64 }

func reinforcePlusPlusSpec() Spec {
	return Spec{
		Name:   "reinforceplusplus",
		Doc:    "discounted returns whitened over the batch",
		Params: args.Schema{param("gamma", args.Float, 1.0, "discount")},
		New:    TrainerCtor(func(a args.Values) (TrainerFn, error) { return &ReinforcePlusPlus{Gamma: a.Float("gamma")}, nil }),
	}
}

// Compute implements TrainerFn; needs Mask, TokenLevelRewards. It fails, as
// upstream, when the batch has fewer than two masked tokens.
func (f *ReinforcePlusPlus) Compute(b *TokenBatch) (*TokenResult, error) {
	ret, err := f.returns(b, nil)
	if err != nil {
		return nil, err
	}
	adv := make([]float64, len(b.Mask))
	if err := agg.Whiten(adv, ret, b.Mask, true); err != nil {
		return nil, errorf("reinforceplusplus", "%v", err)
	}
	for i, m := range b.Mask {
		adv[i] *= m
	}
	return &TokenResult{Advantages: adv, Returns: ret, Metrics: agg.Metrics{}}, nil
}

// Inputs implements TrainerFn.
func (f *ReinforcePlusPlus) Inputs() []string { return []string{InTokenLevelRewards} }

// Stream implements TrainerFn.
func (f *ReinforcePlusPlus) Stream() Streamed {
	return &whitenStream{fn: "reinforceplusplus", remask: true, rowConstant: f.Gamma == 1, local: func(c *Chunk, buf []float64) ([]float64, []float64, error) {
		ret, err := f.returns(&c.TokenBatch, buf)
		return ret, ret, err
	}}
}

// returns returns the discounted returns of token_level_rewards, in buf's
// memory when it has room (every token is written).
func (f *ReinforcePlusPlus) returns(b *TokenBatch, buf []float64) ([]float64, error) {
	const fn = "reinforceplusplus"
	if err := b.needMask(fn); err != nil {
		return nil, err
	}
	if err := b.need(fn, InTokenLevelRewards, b.TokenLevelRewards); err != nil {
		return nil, err
	}
	ret := slices.Grow(buf[:0], len(b.Mask))[:len(b.Mask)]
	tlr := b.TokenLevelRewards[:len(ret)]
	for r := 0; r < b.Rows.N(); r++ {
		lo, hi := b.Rows.Span(r)
		running := 0.0
		if f.Gamma == 1 { // the same sums without the multiply in the chain
			for t := hi - 1; t >= lo; t-- {
				running += tlr[t]
				ret[t] = running
			}
			continue
		}
		for t := hi - 1; t >= lo; t-- {
			running = tlr[t] + f.Gamma*running
			ret[t] = running
		}
	}
	return ret, nil
}
