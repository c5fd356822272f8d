package advantage

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// InvalidRewardFilter is the invalid_reward_filter operator: it keeps the rows
// whose reward is neither null nor NaN, in input order. The pipeline passes a
// null reward as NaN. It computes no advantage.
type InvalidRewardFilter struct{}

func invalidRewardFilterSpec() Spec {
	return Spec{
		Name: "invalid_reward_filter",
		Doc:  "drop rows whose reward is null or NaN",
		New:  PipelineCtor(func(args.Values) (PipelineFn, error) { return InvalidRewardFilter{}, nil }),
	}
}

// Plan implements PipelineFn; the plan's single group lists every row in
// input order. Metrics: filtered_count. It needs no grouping.
func (InvalidRewardFilter) Plan(in *Input) (*Plan, error) {
	n := in.N()
	rows := make([]int32, n)
	p := &Plan{Groups: Groups{Off: []int32{0, int32(n)}, Rows: rows}, Keep: make([]bool, n), Reason: make([]uint8, n)}
	for i, r := range in.Reward {
		rows[i] = int32(i)
		p.Keep[i] = !math.IsNaN(r)
		if !p.Keep[i] {
			p.Filtered++
			p.Reason[i] = reasonInvalid
		}
	}
	p.Metrics = agg.Metrics{"filtered_count": float64(p.Filtered)}
	return p, nil
}
