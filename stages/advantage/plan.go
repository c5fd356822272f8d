package advantage

import (
	"github.com/rftpipe/rftpipe/stages/agg"
)

// Input is what a pipeline-side fn reads: per-row scalars of one batch (an
// explore step, or a whole store) and its grouping. Slices are indexed by
// input row; only Reward and Tasks are always required.
type Input struct {
	// Reward is the outcome reward of every row. NaN propagates, as upstream.
	Reward []float64
	// Tasks groups the rows by tid ("batch/task").
	Tasks Groups
	// Runs groups the rows by rid ("batch/task/run"); step_wise_grpo only.
	Runs Groups
	// Step is eid.step; step_wise_grpo with last_by_eid_step only.
	Step []int64
	// LogprobMean is the mean of each row's logprobs over all positions
	// (action_mask not applied); grpo with rank_penalty and correct_bias only.
	LogprobMean []float64
	// Seed seeds the RNG of the random choices (duplication, REC balance drop).
	Seed uint64
	// StepReward is info[step_reward_key] of every row, NaN where HasStepReward
	// is false (the key is absent); gigpo only.
	StepReward    []float64
	HasStepReward []bool
	// Anchor is, per row, the dense id (first-appearance order) of
	// str(info[env_state_hash_key]), -1 where the hash is absent or null;
	// gigpo only.
	Anchor []int32
	// Components holds the reward components of gdpo: Components[k][row] is
	// component k of the row, NaN where the reward function gave none.
	Components [][]float64
	// CoD is the info of every row of a CoD meta-trajectory (cod in
	// iterative mode only).
	CoD []CoDInfo
}

// N returns the number of rows.
func (in *Input) N() int { return len(in.Reward) }

// Plan is the result of a pipeline-side stage over one Input.
//
// A writer streaming the rows in input order writes every row with Keep[r],
// with advantages = returns = Broadcast(Score[r], action_mask), and then the
// duplicate blocks. Output gives upstream's order instead.
type Plan struct {
	// Groups orders the output: kept rows of group 0, then group 1, … Rows
	// inside a group are in input order unless the stage says otherwise
	// (step_wise_grpo orders them run by run).
	Groups Groups
	// Keep says, per input row, whether the row is written.
	Keep []bool
	// Score is, per input row, the scalar broadcast over the action mask; nil
	// for stages that compute no advantage (filters, some add strategies).
	Score []float32
	// Return, when set, is the scalar of the returns (returns = Return[r] ×
	// action_mask); nil: returns = advantages (every fn but cod's iterative
	// mode).
	Return []float32
	// Dups are the duplicate blocks appended after the kept rows, in order.
	Dups []Dup
	// Reason, when set, says per input row why the plan drops it: an index
	// into DropReasons (0 for a kept row).
	Reason []uint8
	// Filtered is the number of input rows removed.
	Filtered int
	// Metrics holds the stage's metrics under upstream's names.
	Metrics agg.Metrics
	// Weights gives, for the metrics that are means (over groups), the
	// number of values each averages: what combines the metrics of the
	// parts of a sharded job.
	Weights agg.Metrics
}

// Dup is one duplicate block: a copy of every kept row of group Group (an
// index into Plan.Groups), with the same scores. TaskOffset is added to
// eid.task of the copies (the old duplicate_informative strategy; 0 = the
// copies keep their eids, as grpo's duplication does).
type Dup struct {
	Group      int32
	TaskOffset int64
}

// OutRow is one output row: the input row it is (or copies), and the index
// of its duplicate block in Plan.Dups (-1 for an original row).
type OutRow struct {
	Row int32
	Dup int32
}

// Output lists the output rows in upstream's order: the kept rows group by
// group, then the duplicate blocks.
func (p *Plan) Output() []OutRow {
	out := make([]OutRow, 0, len(p.Keep)-p.Filtered)
	for g := 0; g < p.Groups.Len(); g++ {
		for _, r := range p.Groups.Group(g) {
			if p.Keep[r] {
				out = append(out, OutRow{Row: r, Dup: -1})
			}
		}
	}
	for d, dup := range p.Dups {
		for _, r := range p.Groups.Group(int(dup.Group)) {
			if p.Keep[r] {
				out = append(out, OutRow{Row: r, Dup: int32(d)})
			}
		}
	}
	return out
}

// Drop reasons (Plan.Reason), as a store of rejected rows names them.
const (
	DropSingleton    = "singleton_group"            // a one-row group a filter drops
	DropStdBelow     = "reward_std_below_threshold" // the group's reward std is at most the threshold
	DropInvalid      = "invalid_reward"             // null or NaN reward
	DropJudgeFlagged = "cod_judge_flagged"          // cod: the judge flagged the row's trajectory
)

// DropReasons are the values of Plan.Reason, by index.
var DropReasons = []string{"", DropSingleton, DropStdBelow, DropInvalid, DropJudgeFlagged}

// Indices into DropReasons.
const (
	reasonSingleton uint8 = iota + 1
	reasonStdBelow
	reasonInvalid
	reasonJudgeFlagged
)

// DropReason returns why plan p drops input row r ("" if it keeps it or
// does not say).
func (p *Plan) DropReason(r int) string {
	if p.Reason == nil {
		return ""
	}
	return DropReasons[p.Reason[r]]
}

// newPlan returns a plan over in's tasks with every row dropped and, if
// scores, a zero score per row.
func newPlan(in *Input, scores bool) *Plan {
	p := &Plan{Groups: in.Tasks, Keep: make([]bool, in.N()), Reason: make([]uint8, in.N())}
	if scores {
		p.Score = make([]float32, in.N())
	}
	return p
}

// Broadcast writes score × mask into dst (len(dst) = len(mask)): the
// advantages (and returns) of a row of a pipeline-side fn. Masked-out
// positions get score × 0, i.e. -0 for a negative score, as upstream.
func Broadcast(dst []float32, score float32, mask []bool) {
	dst = dst[:len(mask)]
	zero := score * 0
	for i, m := range mask {
		if m {
			dst[i] = score
		} else {
			dst[i] = zero
		}
	}
}

// planGroups runs rule over in's tasks into a fresh plan with scores, and
// gathers the per-group metrics under "group_advantages".
func planGroups(in *Input, rule groupRule, pol SingletonPolicy) (*Plan, error) {
	p := newPlan(in, true)
	gat := agg.NewGatherer(rule.metricNames()...)
	out := groupOut[float32]{score: p.Score, keep: p.Keep, reason: p.Reason, gather: gat}
	if err := runGroups(in.Tasks, in.Reward, rule, pol, &out); err != nil {
		return nil, err
	}
	p.Filtered = out.filtered
	p.Metrics = gat.Metrics("group_advantages")
	p.Weights = gat.Weights("group_advantages")
	return p, nil
}

// checkInput verifies the rewards and the task grouping of in.
func checkInput(fn string, in *Input) error {
	if err := in.Tasks.check("tid", in.N()); err != nil {
		return errorf(fn, "%v", err)
	}
	return nil
}
