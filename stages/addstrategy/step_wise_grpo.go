package addstrategy

import (
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/args"
)

// stepWiseGRPOSpec is StepWiseGRPOStrategy: today's step_wise_grpo without
// filter or batch std, one write per run, only the group_advantages/* metrics.
func stepWiseGRPOSpec() Spec {
	return Spec{
		Name: "step_wise_grpo",
		Doc:  "GRPO over last-step rewards, broadcast to every step of the run",
		Params: args.Schema{paramEpsilon,
			param("enable_step_norm", args.Bool, false, "divide by the number of steps of the run")},
		New: func(a args.Values) (*Strategy, error) {
			stage := &advantage.StepWiseGRPO{GRPO: advantage.GRPO{Epsilon: a.Float("epsilon")}, StepNorm: a.Bool("enable_step_norm")}
			return &Strategy{stage: stage, unit: perRun, groupMetrics: true}, nil
		},
	}
}
