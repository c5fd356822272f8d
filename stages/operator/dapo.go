package operator

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
)

// DAPODynamicSampling is dapo_dynamic_sampling (DAPODynamicSamplingFilter):
// it keeps a task group only when some but not all of its rows are correct,
// correct = metrics[MetricKey] (else the reward) > CorrectThreshold, NaN
// wrong. Singleton groups are dropped (counted in filtered_count only).
// Output: the kept groups in first-appearance order.
type DAPODynamicSampling struct {
	MetricKey        string
	CorrectThreshold float64
}

func dapoDynamicSamplingSpec() Spec {
	return Spec{
		Name: "dapo_dynamic_sampling",
		Doc:  "DAPO dynamic sampling: drop task groups whose rows are all correct or all wrong (and singletons)",
		Params: args.Schema{
			param("metric_key", args.String, "accuracy", "metrics key that decides correctness (else the reward)"),
			param("correct_threshold", args.Float, 0.0, "correct = score > threshold"),
		},
		New: func(a args.Values) (Operator, error) {
			return &DAPODynamicSampling{MetricKey: a.String("metric_key"), CorrectThreshold: a.Float("correct_threshold")}, nil
		},
	}
}

// Needs implements Operator.
func (f *DAPODynamicSampling) Needs() Needs { return Needs{Metric: f.MetricKey} }

// Apply implements Operator. Metrics: filtered_count, dropped_all_correct,
// dropped_all_wrong.
func (f *DAPODynamicSampling) Apply(in *Input) (*Result, error) {
	const op = "dapo_dynamic_sampling"
	n := in.N()
	res := &Result{Reason: make([]string, n)}
	allCorrect, allWrong := 0, 0
	for g := 0; g < in.Tasks.Len(); g++ {
		rows := in.Tasks.Group(g)
		if len(rows) < 2 {
			res.Reason[rows[0]] = ReasonSingleton
			continue
		}
		c := 0
		for _, r := range rows {
			var score float64
			switch {
			case in.HasMetric != nil && in.HasMetric[r]:
				score = in.Metric[r]
			case !math.IsNaN(in.Reward[r]):
				score = in.Reward[r]
			case in.rewardNull(r):
				return nil, errorf(op, "Experience missing '%s' in metrics and has no reward.", f.MetricKey)
			default:
				score = math.NaN() // NaN is wrong
			}
			if score > f.CorrectThreshold {
				c++
			}
		}
		reason := ""
		switch c {
		case 0:
			allWrong += len(rows)
			reason = ReasonAllWrong
		case len(rows):
			allCorrect += len(rows)
			reason = ReasonAllCorrect
		default:
			res.Order = append(res.Order, rows...)
			continue
		}
		for _, r := range rows {
			res.Reason[r] = reason
		}
	}
	res.Metrics = agg.Metrics{"filtered_count": float64(res.Dropped()),
		"dropped_all_correct": float64(allCorrect), "dropped_all_wrong": float64(allWrong)}
	return res, nil
}

// MaskResponseTruncated is mask_response_truncated
// (MaskResponseTruncatedOperator): the action mask of every
// "response_truncated" row is set to all zero; nothing is dropped.
type MaskResponseTruncated struct{}

func maskResponseTruncatedSpec() Spec {
	return Spec{
		Name: "mask_response_truncated",
		Doc:  "DAPO overlong filtering: zero the action mask of response-truncated rows",
		New:  func(args.Values) (Operator, error) { return MaskResponseTruncated{}, nil },
	}
}

// Needs implements Operator.
func (MaskResponseTruncated) Needs() Needs { return Needs{Truncated: true} }

// Apply implements Operator. Metrics: masked_truncated_count.
func (MaskResponseTruncated) Apply(in *Input) (*Result, error) {
	res := keepAll(in.N())
	res.MaskZero = make([]bool, in.N())
	count := 0
	for r := range res.MaskZero {
		if in.Truncated != nil && in.Truncated[r] {
			res.MaskZero[r] = true
			count++
		}
	}
	res.Metrics["masked_truncated_count"] = float64(count)
	return res, nil
}
