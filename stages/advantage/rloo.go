package advantage

import "github.com/rftpipe/rftpipe/stages/args"

// RLOO is the trainer-side rloo fn: each row's summed token reward minus the
// mean of the other rows of its uid group; a one-row group keeps its score.
type RLOO struct{}

func rlooSpec() Spec {
	return Spec{
		Name: "rloo",
		Doc:  "leave-one-out baseline per uid group",
		New:  TrainerCtor(func(args.Values) (TrainerFn, error) { return RLOO{}, nil }),
	}
}

// Compute implements TrainerFn; needs Mask, TokenLevelRewards, Groups.
func (RLOO) Compute(b *TokenBatch) (*TokenResult, error) {
	return b.groupResult("rloo", rlooRule{})
}

// Inputs implements TrainerFn.
func (RLOO) Inputs() []string { return []string{InTokenLevelRewards, InGroups} }

// Stream implements TrainerFn.
func (RLOO) Stream() Streamed { return newGroupStream("rloo", rlooRule{}) }

// rlooRule: s·n/(n−1) − mean·n/(n−1), the mean taken on a float32 tensor.
type rlooRule struct{}

func (rlooRule) metricNames() []string { return nil }

func (rlooRule) apply(g *group) (bool, error) {
	n := float64(len(g.v))
	copy(g.score, g.v)
	if n > 1 {
		mean := prec32Stats.round(prec32Stats.mean(g.v))
		for i, x := range g.v {
			g.score[i] = x*n/(n-1) - mean*n/(n-1)
		}
	}
	return true, nil
}
