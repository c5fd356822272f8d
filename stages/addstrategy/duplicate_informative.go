package addstrategy

import (
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/args"
)

// duplicateInformativeSpec is DuplicateInformativeAddStrategy (POLARIS): keep
// the informative groups as reward_variance does, then refill up to the input
// row count with copies of them whose eid.task is shifted
// (advantage.RefillRows, seeded by Input.Seed); no advantages; one write;
// metrics {add_strategy_time}. Nothing is written if no group is informative.
func duplicateInformativeSpec() Spec {
	return Spec{
		Name:   "duplicate_informative",
		Doc:    "keep informative task groups and refill the row count with copies (new task ids)",
		Params: args.Schema{paramVariance},
		New: func(a args.Values) (*Strategy, error) {
			stage := &advantage.RewardStdFilter{Threshold: a.Float("variance_threshold"), Variance: true}
			return &Strategy{stage: stage, unit: single, timed: true, refill: true}, nil
		},
	}
}
