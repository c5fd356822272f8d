package advantage

import "github.com/rftpipe/rftpipe/stages/args"

// OPMDVerl is the trainer-side opmd_verl fn: opmd on the summed token rewards,
// grouped by uid; baseline in float32, subtraction in float64.
type OPMDVerl struct {
	LogAvgExp bool
	Tau       float64
}

func opmdVerlSpec() Spec {
	return Spec{
		Name:   "opmd_verl",
		Doc:    "opmd on summed token rewards, grouped by uid (trainer side)",
		Params: args.Schema{paramOPMDBaseline, paramTau},
		New: TrainerCtor(func(a args.Values) (TrainerFn, error) {
			return &OPMDVerl{LogAvgExp: a.String("opmd_baseline") == "logavgexp", Tau: a.Float("tau")}, nil
		}),
	}
}

// Compute implements TrainerFn; needs Mask, TokenLevelRewards, Groups.
func (f *OPMDVerl) Compute(b *TokenBatch) (*TokenResult, error) {
	return b.groupResult("opmd_verl", f.rule())
}

// Inputs implements TrainerFn.
func (f *OPMDVerl) Inputs() []string { return []string{InTokenLevelRewards, InGroups} }

// Stream implements TrainerFn.
func (f *OPMDVerl) Stream() Streamed { return newGroupStream("opmd_verl", f.rule()) }

func (f *OPMDVerl) rule() groupRule {
	return &opmdRule{logAvgExp: f.LogAvgExp, tau: f.Tau, prec: prec32Stats}
}
