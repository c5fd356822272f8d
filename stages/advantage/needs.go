package advantage

// Needs says what a pipeline-side fn reads besides each row's reward and
// its task grouping, which every such fn reads.
type Needs struct {
	Runs        bool // Input.Runs (the run grouping)
	Step        bool // Input.Step
	LogprobMean bool // Input.LogprobMean
	// InvalidRewards: the fn is handed rows with a null (NaN), NaN or
	// infinite reward and deals with them itself.
	InvalidRewards bool
}

// Needer is implemented by the fns that read more than rewards and tasks.
type Needer interface {
	Needs() Needs
}

// NeedsOf returns what fn reads (the zero Needs when it does not say).
func NeedsOf(fn PipelineFn) Needs {
	if n, ok := fn.(Needer); ok {
		return n.Needs()
	}
	return Needs{}
}

// Needs implements Needer: rank_penalty ranks rows by their mean log-prob.
func (g *GRPO) Needs() Needs { return Needs{LogprobMean: g.RankPenalty != nil} }

// Needs implements Needer: runs are scored by their last step.
func (s *StepWiseGRPO) Needs() Needs { return Needs{Runs: true, Step: s.LastByStep} }

// Needs implements Needer: the filter drops the invalid rewards itself.
func (InvalidRewardFilter) Needs() Needs { return Needs{InvalidRewards: true} }
