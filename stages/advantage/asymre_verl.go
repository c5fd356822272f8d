package advantage

import "github.com/rftpipe/rftpipe/stages/args"

// ASYMREVerl is the trainer-side asymre_verl fn: asymre on the summed token
// rewards, grouped by uid, in the score dtype (float64 here).
type ASYMREVerl struct{ BaselineShift float64 }

func asymreVerlSpec() Spec {
	return Spec{
		Name:   "asymre_verl",
		Doc:    "asymre on summed token rewards, grouped by uid (trainer side)",
		Params: args.Schema{paramBaselineShift},
		New: TrainerCtor(func(a args.Values) (TrainerFn, error) {
			return &ASYMREVerl{BaselineShift: a.Float("baseline_shift")}, nil
		}),
	}
}

// Compute implements TrainerFn; needs Mask, TokenLevelRewards, Groups.
func (f *ASYMREVerl) Compute(b *TokenBatch) (*TokenResult, error) {
	return b.groupResult("asymre_verl", f.rule())
}

// Inputs implements TrainerFn.
func (f *ASYMREVerl) Inputs() []string { return []string{InTokenLevelRewards, InGroups} }

// Stream implements TrainerFn.
func (f *ASYMREVerl) Stream() Streamed { return newGroupStream("asymre_verl", f.rule()) }

func (f *ASYMREVerl) rule() groupRule { return &asymreRule{shift: f.BaselineShift, prec: prec64} }
