package addstrategy

import (
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/args"
)

// rewardVarianceSpec is RewardVarianceAddStrategy: keep task groups with >= 2
// rows and population reward variance (float64) > variance_threshold; no
// advantages; one write per kept group; metrics {add_strategy_time}.
func rewardVarianceSpec() Spec {
	return Spec{
		Name:   "reward_variance",
		Doc:    "drop low-variance task groups (no advantages)",
		Params: args.Schema{paramVariance},
		New: func(a args.Values) (*Strategy, error) {
			stage := &advantage.RewardStdFilter{Threshold: a.Float("variance_threshold"), Variance: true}
			return &Strategy{stage: stage, unit: perGroup, timed: true}, nil
		},
	}
}
