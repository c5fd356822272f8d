package operator

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/conformance"
)

// goldenExperience is one input experience of an operator case.
type goldenExperience struct {
	EID            advantage.GoldenEID          `json:"eid"`
	Reward         json.RawMessage              `json:"reward"`
	Metrics        map[string]conformance.Float `json:"metrics"`
	TruncateStatus *string                      `json:"truncate_status"`
	ActionMask     []float64                    `json:"action_mask"`
	Info           struct {
		ReturnsNorm *conformance.Float `json:"returns_norm"`
	} `json:"info"`
}

// goldenInput builds the Input of golden experiences for needs n.
func goldenInput(exps []goldenExperience, n Needs) (*Input, error) {
	in := &Input{Reward: make([]float64, len(exps)), NullReward: make([]bool, len(exps))}
	tids := make([]string, len(exps))
	if n.Metric != "" {
		in.Metric, in.HasMetric = make([]float64, len(exps)), make([]bool, len(exps))
	}
	if n.Truncated {
		in.Truncated = make([]bool, len(exps))
	}
	if n.ReturnsNorm {
		in.ReturnsNorm, in.HasReturnsNorm = make([]float64, len(exps)), make([]bool, len(exps))
	}
	for i, e := range exps {
		tids[i] = e.EID.TID()
		if len(e.Reward) == 0 || string(e.Reward) == "null" {
			in.NullReward[i] = true
			in.Reward[i] = math.NaN()
		} else {
			var f conformance.Float
			if err := json.Unmarshal(e.Reward, &f); err != nil {
				return nil, fmt.Errorf("experience %d: reward: %w", i, err)
			}
			in.Reward[i] = float64(f)
		}
		if n.Metric != "" {
			if v, ok := e.Metrics[n.Metric]; ok {
				in.Metric[i], in.HasMetric[i] = float64(v), true
			}
		}
		if n.Truncated {
			in.Truncated[i] = e.TruncateStatus != nil && *e.TruncateStatus == "response_truncated"
		}
		if n.ReturnsNorm && e.Info.ReturnsNorm != nil {
			in.ReturnsNorm[i], in.HasReturnsNorm[i] = float64(*e.Info.ReturnsNorm), true
		}
	}
	in.Tasks = advantage.GroupBy(tids)
	return in, nil
}

// ConformanceRunner returns the runner of golden kind "operator" over the
// operators of reg (Default() if nil).
func ConformanceRunner(reg *Registry) conformance.Runner {
	if reg == nil {
		reg = Default()
	}
	return func(c *conformance.Case, chk *conformance.Checker) error {
		user, err := advantage.GoldenArgs(c)
		if err != nil {
			return err
		}
		op, err := New(reg, c.Fn, user)
		if err != nil {
			return err
		}
		if f, ok := op.(*MathDAPOReward); ok {
			return runReward(f, c, chk)
		}
		var exps []goldenExperience
		if err := json.Unmarshal(c.Inputs["experiences"], &exps); err != nil {
			return fmt.Errorf("%s: inputs.experiences: %w", c.Name, err)
		}
		in, err := goldenInput(exps, op.Needs())
		if err != nil {
			return err
		}
		res, err := op.Apply(in)
		if err != nil {
			return err
		}
		var want struct {
			Outputs []struct {
				EID        advantage.GoldenEID `json:"eid"`
				ActionMask []float64           `json:"action_mask"`
				Reward     *conformance.Float  `json:"reward"`
			} `json:"outputs"`
			Metrics     json.RawMessage `json:"metrics"`
			InputCount  int             `json:"input_count"`
			OutputCount int             `json:"output_count"`
		}
		if err := json.Unmarshal(c.Expected, &want); err != nil {
			return fmt.Errorf("%s: expected: %w", c.Name, err)
		}
		if err := chk.MetricsJSON("metrics", res.Metrics, want.Metrics); err != nil {
			return err
		}
		chk.Int("input_count", len(exps), want.InputCount)
		chk.Int("output_count", len(res.Order), want.OutputCount)
		checkReasons(chk, res)
		if len(res.Order) != len(want.Outputs) {
			return nil
		}
		for i, w := range want.Outputs {
			r := res.Order[i]
			f := "outputs[" + strconv.Itoa(i) + "]"
			if got := exps[r].EID; got != w.EID {
				chk.Failf(f+".eid", got.String(), w.EID.String())
				continue
			}
			mask := append([]float64(nil), exps[r].ActionMask...)
			if res.MaskZero != nil && res.MaskZero[r] {
				clear(mask)
			}
			chk.Vector(f+".action_mask", mask, w.ActionMask)
			if w.Reward != nil {
				got := in.Reward[r]
				if res.Reward != nil {
					got = res.Reward[r]
				}
				chk.Scalar(f+".reward", got, float64(*w.Reward))
			}
		}
		return nil
	}
}

// checkReasons checks that exactly the dropped rows carry a drop reason.
func checkReasons(chk *conformance.Checker, res *Result) {
	kept := make([]bool, len(res.Reason))
	for _, r := range res.Order {
		kept[r] = true
	}
	for r, why := range res.Reason {
		if kept[r] == (why != "") {
			chk.Failf(fmt.Sprintf("drop_reason[%d]", r), strconv.Quote(why), fmt.Sprintf("kept=%v", kept[r]))
		}
	}
}

// runReward runs a math_dapo_reward case: one (accuracy, format_score,
// reward) per response.
func runReward(f *MathDAPOReward, c *conformance.Case, chk *conformance.Checker) error {
	var responses []struct {
		Length int64             `json:"response_length"`
		Score  conformance.Float `json:"score"`
	}
	if err := json.Unmarshal(c.Inputs["responses"], &responses); err != nil {
		return fmt.Errorf("%s: inputs.responses: %w", c.Name, err)
	}
	var want struct {
		Outputs []struct {
			Accuracy    conformance.Float `json:"accuracy"`
			FormatScore conformance.Float `json:"format_score"`
			Reward      conformance.Float `json:"reward"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(c.Expected, &want); err != nil {
		return fmt.Errorf("%s: expected: %w", c.Name, err)
	}
	if len(want.Outputs) != len(responses) {
		chk.Failf("outputs count", strconv.Itoa(len(responses)), strconv.Itoa(len(want.Outputs)))
		return nil
	}
	for i, r := range responses {
		a, fs, rw := f.Score(r.Length, float64(r.Score))
		w := want.Outputs[i]
		p := "outputs[" + strconv.Itoa(i) + "]."
		chk.Scalar(p+"accuracy", a, float64(w.Accuracy))
		chk.Scalar(p+"format_score", fs, float64(w.FormatScore))
		chk.Scalar(p+"reward", rw, float64(w.Reward))
	}
	return nil
}
