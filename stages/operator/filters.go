package operator

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// RewardStdFilter is reward_std_filter of the 0.6 line: it drops every task
// group with fewer than two rows or whose population std of rewards
// (float64) is <= Threshold (a NaN std is kept); the kept groups are output
// in first-appearance order.
type RewardStdFilter struct{ Threshold float64 }

func rewardStdFilterSpec() Spec {
	return Spec{
		Name:   "reward_std_filter",
		Doc:    "drop task groups with < 2 rows or population reward std <= threshold (0.6 metric names)",
		Params: args.Schema{param("threshold", args.Float, 0.0, "population std threshold")},
		New: func(a args.Values) (Operator, error) {
			return &RewardStdFilter{Threshold: a.Float("threshold")}, nil
		},
	}
}

// Needs implements Operator.
func (f *RewardStdFilter) Needs() Needs { return Needs{} }

// Apply implements Operator. Metrics: operator_filtered_count and, over the
// groups of two or more rows (dropped ones included),
// origin_group_advantages/reward_{mean,std}/{mean,max,min} (NaN
// propagating, Q-55).
func (f *RewardStdFilter) Apply(in *Input) (*Result, error) {
	res := &Result{Reason: make([]string, in.N())}
	var means, stds []float64
	for g := 0; g < in.Tasks.Len(); g++ {
		rows := in.Tasks.Group(g)
		if len(rows) < 2 {
			res.Reason[rows[0]] = ReasonSingleton
			continue
		}
		for _, r := range rows {
			if in.rewardNull(r) {
				return nil, errorf("reward_std_filter", "row %d has a null reward", r)
			}
		}
		mean := 0.0
		for _, r := range rows {
			mean += in.Reward[r]
		}
		mean /= float64(len(rows))
		ss := 0.0
		for _, r := range rows {
			d := in.Reward[r] - mean
			ss += d * d
		}
		std := math.Sqrt(ss / float64(len(rows)))
		means, stds = append(means, mean), append(stds, std)
		if std <= f.Threshold {
			for _, r := range rows {
				res.Reason[r] = ReasonStdBelow
			}
			continue
		}
		res.Order = append(res.Order, rows...)
	}
	res.Metrics = agg.Metrics{"operator_filtered_count": float64(res.Dropped())}
	res.Metrics.Summarize("origin_group_advantages", "reward_mean", means)
	res.Metrics.Summarize("origin_group_advantages", "reward_std", stds)
	return res, nil
}

// CoDOverwriteReward is cod_overwrite_reward_with_returns
// (OverwriteRewardWithReturns): reward := info.returns_norm for every row;
// order kept, nothing dropped; a row without returns_norm is an error.
type CoDOverwriteReward struct{}

func codOverwriteSpec() Spec {
	return Spec{
		Name: "cod_overwrite_reward_with_returns",
		Doc:  "CoD: set every reward to info.returns_norm (written by the cod advantage fn)",
		New:  func(args.Values) (Operator, error) { return CoDOverwriteReward{}, nil },
	}
}

// Needs implements Operator.
func (CoDOverwriteReward) Needs() Needs { return Needs{ReturnsNorm: true} }

// Apply implements Operator. No metrics.
func (CoDOverwriteReward) Apply(in *Input) (*Result, error) {
	res := keepAll(in.N())
	res.Reward = make([]float64, in.N())
	for r := range res.Reward {
		if in.HasReturnsNorm == nil || !in.HasReturnsNorm[r] {
			return nil, errorf("cod_overwrite_reward_with_returns", "row %d: info has no returns_norm", r)
		}
		res.Reward[r] = in.ReturnsNorm[r]
	}
	return res, nil
}
