package addstrategy

import "github.com/rftpipe/rftpipe/stages/advantage"

// grpoSpec is GRPOAddStrategy: today's grpo fn with default args, one write
// per group, only the group_advantages/* metrics.
func grpoSpec() advantage.Spec {
	return advantage.Spec{
		Name:   "grpo",
		Doc:    "GRPO advantages per task group (no filter)",
		Params: []advantage.Param{paramEpsilon},
		NewPipeline: func(a advantage.Args) (advantage.PipelineFn, error) {
			return &Strategy{stage: &advantage.GRPO{Epsilon: a.Float("epsilon")}, unit: perGroup, groupMetrics: true}, nil
		},
	}
}
