package addstrategy

import (
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/args"
)

// opmdSpec is OPMDAddStrategy: today's opmd fn, one write per group, no
// metrics (its group_baseline was an unconverted tensor that gather_metrics
// dropped, Q-37). opmd_baseline must be mean or logavgexp, as it asserted.
func opmdSpec() Spec {
	return Spec{
		Name: "opmd",
		Doc:  "OPMD advantages per task group",
		Params: args.Schema{
			{Name: "opmd_baseline", Kind: args.String, Ctor: "mean", Default: "mean", InDefaults: true,
				Choices: []string{"mean", "logavgexp"}, Doc: "group mean or log-avg-exp"},
			param("tau", args.Float, 1.0, "logavgexp temperature"),
		},
		New: func(a args.Values) (*Strategy, error) {
			stage := &advantage.OPMD{LogAvgExp: a.String("opmd_baseline") == "logavgexp", Tau: a.Float("tau")}
			return &Strategy{stage: stage, unit: perGroup}, nil
		},
	}
}
