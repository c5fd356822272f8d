package addstrategy

import "github.com/rftpipe/rftpipe/stages/advantage"

// correctBiasSpec is CorrectBiasAddStrategy: GRPO with the rank penalty
// applied to the rewards of the statistics AND of the numerator (today's grpo
// uses the raw reward there, Q-01); one write per group.
func correctBiasSpec() advantage.Spec {
	return advantage.Spec{
		Name: "correct_bias",
		Doc:  "GRPO with rank-bias correction of the rewards (https://arxiv.org/pdf/2506.02355)",
		Params: []advantage.Param{paramEpsilon,
			{Name: "rank_penalty", Kind: advantage.Float, Default: 0.25, Doc: "scale rewards by 1 − rank/n·penalty"}},
		NewPipeline: func(a advantage.Args) (advantage.PipelineFn, error) {
			penalty := a.Float("rank_penalty")
			stage := &advantage.GRPO{Epsilon: a.Float("epsilon"), RankPenalty: &penalty, AdjustedScore: true}
			return &Strategy{stage: stage, unit: perGroup, groupMetrics: true}, nil
		},
	}
}
