package addstrategy

import "github.com/rftpipe/rftpipe/stages/advantage"

// opmdSpec is OPMDAddStrategy: today's opmd fn, one write per group, no
// metrics (its group_baseline was an unconverted tensor that gather_metrics
// dropped, Q-37). opmd_baseline must be mean or logavgexp, as it asserted.
func opmdSpec() advantage.Spec {
	return advantage.Spec{
		Name: "opmd",
		Doc:  "OPMD advantages per task group",
		Params: []advantage.Param{
			{Name: "opmd_baseline", Kind: advantage.Enum, Default: "mean", Choices: []string{"mean", "logavgexp"}, Doc: "group mean or log-avg-exp"},
			{Name: "tau", Kind: advantage.Float, Default: 1.0, Doc: "logavgexp temperature"},
		},
		NewPipeline: func(a advantage.Args) (advantage.PipelineFn, error) {
			stage := &advantage.OPMD{LogAvgExp: a.String("opmd_baseline") == "logavgexp", Tau: a.Float("tau")}
			return &Strategy{stage: stage, unit: perGroup}, nil
		},
	}
}
