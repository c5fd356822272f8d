package operator

import (
	"math"

	"github.com/rftpipe/rftpipe/stages/args"
)

// MathDAPOReward is DAPO's rule reward with overlong shaping
// (math_dapo_reward, MathDAPORewardFn of the 0.6 line): accuracy = +1 when
// the checker's score >= 0.5, else −1; with the penalty enabled,
// format_score = 0 up to MaxLength − CacheLength response tokens, then
// linear down to −PenaltyFactor at MaxLength, −PenaltyFactor beyond (Q-54:
// the later upstream's 0 at L = MaxLength with CacheLength 0);
// reward = accuracy + format_score.
//
// As an operator it rescores every row: the score is metrics[ScoreKey]
// when present, else the reward (the math checker itself is outside
// rftpipe), the length the row's response length.
type MathDAPOReward struct {
	Penalty                bool
	PenaltyFactor          float64
	MaxLength, CacheLength int64
	ScoreKey               string
}

func mathDAPORewardSpec() Spec {
	return Spec{
		Name: "math_dapo_reward",
		Doc:  "DAPO reward: ±1 accuracy plus the overlong penalty of the response length",
		Params: args.Schema{
			param("enable_overlong_penalty", args.Bool, nil, "shape the reward by the response length"),
			param("penalty_factor", args.Float, nil, "penalty at max_response_length"),
			param("max_response_length", args.Int, nil, "response length of the full penalty (> cache_length)"),
			param("cache_length", args.Int, nil, "length of the linear penalty window before max_response_length"),
			param("score_key", args.String, "accuracy", "metrics key of the checker's score (else the reward)"),
		},
		New: func(a args.Values) (Operator, error) {
			f := &MathDAPOReward{Penalty: a.Bool("enable_overlong_penalty"), ScoreKey: a.String("score_key")}
			if !f.Penalty {
				return f, nil
			}
			pf, okP := a.OptFloat("penalty_factor")
			ml, okM := a["max_response_length"].(int64)
			cl, okC := a["cache_length"].(int64)
			switch {
			case !okP || !okM || !okC:
				return nil, errorf("math_dapo_reward", "When enable_overlong_penalty = true, max_response_length, penalty_factor, cache_length must be set")
			case ml <= cl:
				return nil, errorf("math_dapo_reward", "max_response_length must be greater than cache_length")
			}
			f.PenaltyFactor, f.MaxLength, f.CacheLength = pf, ml, cl
			return f, nil
		},
	}
}

// Score returns the accuracy, the format score and the reward of a response
// of length tokens whose checker score is score.
func (f *MathDAPOReward) Score(length int64, score float64) (accuracy, format, reward float64) {
	accuracy = -1
	if score >= 0.5 {
		accuracy = 1
	}
	if f.Penalty {
		// e = max_response_length − cache_length > 0, as Python's exact
		// integers: past MaxInt64 (a negative cache_length) every length
		// is below it.
		e := f.MaxLength - f.CacheLength
		switch {
		case e < f.MaxLength && f.CacheLength < 0 || length <= e:
		case length > f.MaxLength:
			format = -f.PenaltyFactor
		default:
			format = float64(e-length) / float64(f.CacheLength) * f.PenaltyFactor
		}
	}
	return accuracy, format, accuracy + format
}

// Needs implements Operator.
func (f *MathDAPOReward) Needs() Needs { return Needs{Metric: f.ScoreKey, ResponseLength: true} }

// Apply implements Operator: every row's reward, accuracy and format_score.
// No metrics.
func (f *MathDAPOReward) Apply(in *Input) (*Result, error) {
	n := in.N()
	res := keepAll(n)
	res.Reward = make([]float64, n)
	acc, fs := make([]float64, n), make([]float64, n)
	res.RowMetrics = map[string][]float64{"accuracy": acc, "format_score": fs}
	for r := 0; r < n; r++ {
		score := in.Reward[r]
		if in.HasMetric != nil && in.HasMetric[r] {
			score = in.Metric[r]
		}
		if math.IsNaN(score) {
			return nil, errorf("math_dapo_reward", "row %d has no score (metrics.%s or reward)", r, f.ScoreKey)
		}
		acc[r], fs[r], res.Reward[r] = f.Score(in.ResponseLength[r], score)
	}
	return res, nil
}
