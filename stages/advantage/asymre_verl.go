package advantage

// ASYMREVerl is the trainer-side asymre_verl fn: asymre on the summed token
// rewards, grouped by uid, in the score dtype (float64 here).
type ASYMREVerl struct{ BaselineShift float64 }

func asymreVerlSpec() Spec {
	return Spec{
		Name:       "asymre_verl",
		Doc:        "asymre on summed token rewards, grouped by uid (trainer side)",
		Params:     []Param{paramBaselineShift},
		NewTrainer: func(a Args) (TrainerFn, error) { return &ASYMREVerl{BaselineShift: a.Float("baseline_shift")}, nil },
	}
}

// Compute implements TrainerFn; needs Mask, TokenLevelRewards, Groups.
func (f *ASYMREVerl) Compute(b *TokenBatch) (*TokenResult, error) {
	return b.groupResult("asymre_verl", &asymreRule{shift: f.BaselineShift, prec: prec64})
}
