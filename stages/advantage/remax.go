package advantage

import (
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// ReMax is the trainer-side remax fn: returns = reverse cumsum of the masked
// token rewards, advantages = returns − baseline × mask. It needs the
// per-row RewardBaselines that no upstream component produces.
type ReMax struct{}

func remaxSpec() Spec {
	return Spec{
		Name: "remax",
		Doc:  "returns minus the greedy-rollout reward baseline",
		New:  TrainerCtor(func(args.Values) (TrainerFn, error) { return ReMax{}, nil }),
	}
}

// Inputs implements TrainerFn.
func (ReMax) Inputs() []string { return []string{InTokenLevelRewards, InRewardBaselines} }

// Stream implements TrainerFn: rows are independent.
func (f ReMax) Stream() Streamed {
	return &localStream{compute: func(c *Chunk) (*TokenResult, []rowValues, error) {
		res, err := f.Compute(&c.TokenBatch)
		return res, nil, err
	}}
}

// Compute implements TrainerFn; needs Mask, TokenLevelRewards, RewardBaselines.
func (ReMax) Compute(b *TokenBatch) (*TokenResult, error) {
	const fn = "remax"
	if err := b.needMask(fn); err != nil {
		return nil, err
	}
	if err := b.need(fn, InTokenLevelRewards, b.TokenLevelRewards); err != nil {
		return nil, err
	}
	if len(b.RewardBaselines) != b.Rows.N() {
		return nil, errorf(fn, "needs one reward_baseline per row (%d of %d)", len(b.RewardBaselines), b.Rows.N())
	}
	ret := make([]float64, len(b.Mask))
	adv := make([]float64, len(b.Mask))
	for r := 0; r < b.Rows.N(); r++ {
		lo, hi := b.Rows.Span(r)
		running := 0.0
		for t := hi - 1; t >= lo; t-- {
			running += b.TokenLevelRewards[t] * b.Mask[t]
			ret[t] = running
			adv[t] = running - b.RewardBaselines[r]*b.Mask[t]
		}
	}
	return &TokenResult{Advantages: adv, Returns: ret, Metrics: agg.Metrics{}}, nil
}
