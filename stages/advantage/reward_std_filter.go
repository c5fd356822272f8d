package advantage

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// RewardStdFilter is the reward_std_filter operator: it drops every tid group
// with fewer than two rows or whose POPULATION std (float64) of rewards is <=
// Threshold; the kept groups are written in first-appearance order. With
// Variance the test is on the population variance instead (the old
// reward_variance strategy). It computes no advantage.
type RewardStdFilter struct {
	Threshold float64
	Variance  bool
}

func rewardStdFilterSpec() Spec {
	return Spec{
		Name:   "reward_std_filter",
		Doc:    "drop task groups with < 2 rows or population reward std <= threshold",
		Params: args.Schema{param("threshold", args.Float, 0.0, "population std threshold")},
		New: PipelineCtor(func(a args.Values) (PipelineFn, error) {
			return &RewardStdFilter{Threshold: a.Float("threshold")}, nil
		}),
	}
}

// Plan implements PipelineFn. Metrics: filtered_count.
func (f *RewardStdFilter) Plan(in *Input) (*Plan, error) {
	if err := checkInput("reward_std_filter", in); err != nil {
		return nil, err
	}
	p := newPlan(in, false)
	out := groupOut[float64]{keep: p.Keep, reason: p.Reason}
	if err := runGroups(in.Tasks, in.Reward, f, SingletonUpstream, &out); err != nil {
		return nil, err
	}
	p.Filtered = out.filtered
	p.Metrics = agg.Metrics{"filtered_count": float64(p.Filtered)}
	return p, nil
}

func (f *RewardStdFilter) metricNames() []string { return nil }

func (f *RewardStdFilter) apply(g *group) (bool, error) {
	n := len(g.v)
	if n < 2 {
		return false, nil
	}
	v := prec64.mean(g.v)
	ss := 0.0
	for _, x := range g.v {
		ss += (x - v) * (x - v)
	}
	spread := ss / float64(n)
	if !f.Variance {
		spread = math.Sqrt(spread)
	}
	return spread > f.Threshold, nil
}
