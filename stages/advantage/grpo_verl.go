package advantage

import "github.com/rftpipe/rftpipe/stages/args"

// GRPOVerl is the trainer-side grpo_verl fn: GRPO on the summed token rewards
// of each row, grouped by uid; statistics in float32, score in float64.
type GRPOVerl struct{ Epsilon float64 }

func grpoVerlSpec() Spec {
	return Spec{
		Name:   "grpo_verl",
		Doc:    "GRPO on summed token rewards, grouped by uid (trainer side)",
		Params: args.Schema{paramEpsilon},
		New:    TrainerCtor(func(a args.Values) (TrainerFn, error) { return &GRPOVerl{Epsilon: a.Float("epsilon")}, nil }),
	}
}

// Compute implements TrainerFn; needs Mask, TokenLevelRewards, Groups.
func (f *GRPOVerl) Compute(b *TokenBatch) (*TokenResult, error) {
	return b.groupResult("grpo_verl", f.rule())
}

// Inputs implements TrainerFn.
func (f *GRPOVerl) Inputs() []string { return []string{InTokenLevelRewards, InGroups} }

// Stream implements TrainerFn.
func (f *GRPOVerl) Stream() Streamed { return newGroupStream("grpo_verl", f.rule()) }

func (f *GRPOVerl) rule() *grpoRule {
	return (&GRPO{Epsilon: f.Epsilon}).rule(prec32Stats, nil)
}
