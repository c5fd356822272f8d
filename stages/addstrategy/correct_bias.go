package addstrategy

import (
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/args"
)

// correctBiasSpec is CorrectBiasAddStrategy: GRPO with the rank penalty
// applied to the rewards of the statistics AND of the numerator (today's grpo
// uses the raw reward there, Q-01); one write per group.
func correctBiasSpec() Spec {
	return Spec{
		Name: "correct_bias",
		Doc:  "GRPO with rank-bias correction of the rewards (https://arxiv.org/pdf/2506.02355)",
		Params: args.Schema{paramEpsilon,
			param("rank_penalty", args.Float, 0.25, "scale rewards by 1 − rank/n·penalty")},
		New: func(a args.Values) (*Strategy, error) {
			penalty := a.Float("rank_penalty")
			stage := &advantage.GRPO{Epsilon: a.Float("epsilon"), RankPenalty: &penalty, AdjustedScore: true}
			return &Strategy{stage: stage, unit: perGroup, groupMetrics: true}, nil
		},
	}
}
