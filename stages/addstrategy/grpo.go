package addstrategy

import (
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/args"
)

// grpoSpec is GRPOAddStrategy: today's grpo fn with default args, one write
// per group, only the group_advantages/* metrics.
func grpoSpec() Spec {
	return Spec{
		Name:   "grpo",
		Doc:    "GRPO advantages per task group (no filter)",
		Params: args.Schema{paramEpsilon},
		New: func(a args.Values) (*Strategy, error) {
			return &Strategy{stage: &advantage.GRPO{Epsilon: a.Float("epsilon")}, unit: perGroup, groupMetrics: true}, nil
		},
	}
}
