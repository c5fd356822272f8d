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
	// StepReward and Anchor name info keys read per row into
	// Input.StepReward and Input.Anchor ("" = not read).
	StepReward, Anchor string
	// Components: Input.Components (the reward components of gdpo).
	Components bool
	// CoD: Input.CoD (the info of CoD's meta-trajectories).
	CoD bool
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

// CrossBatcher is implemented by the fns whose result for a row may depend
// on rows of other explore batches: a statistic over the whole input, or
// one random stream drawn from group after group. CrossBatch says why, ""
// when the fn as configured does not. A job of such a fn cannot be split by
// batch (sharded) and give the result of one run.
type CrossBatcher interface {
	CrossBatch() string
}

// CrossBatchOf returns why fn (a pipeline-side fn or a trainer-side fn's
// Streamed form) needs more than one batch, "" when it does not.
func CrossBatchOf(fn any) string {
	if c, ok := fn.(CrossBatcher); ok {
		return c.CrossBatch()
	}
	return ""
}

// CrossBatch implements CrossBatcher: std_cal_level=batch takes the std of
// every reward; duplication draws the copies from the kept groups of the
// whole input.
func (g *GRPO) CrossBatch() string {
	switch {
	case g.BatchStd:
		return "std_cal_level=batch takes the std over every reward of the input"
	case g.Duplicate && g.StdThreshold != nil:
		return "duplicate_experiences draws the copies from the kept groups of the whole input"
	}
	return ""
}

// CrossBatch implements CrossBatcher: drop=balance draws from one random
// stream, group after group.
func (f *REC) CrossBatch() string {
	if f.DropBalance {
		return "drop=balance draws the dropped rows from one random stream over every group of the input"
	}
	return ""
}

// CrossBatch implements CrossBatcher: whitening takes the moments of the
// whole trainer batch.
func (w *whitenStream) CrossBatch() string {
	return w.fn + " whitens over the whole trainer batch (the store)"
}

// CrossBatch implements CrossBatcher: the fn is computed over the whole
// trainer batch at once.
func (w *wholeStream) CrossBatch() string {
	return "the fn is computed over the whole trainer batch (the store) at once"
}
