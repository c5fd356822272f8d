package operator

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/stages/advantage"
)

// batchInput builds an Input from tids, rewards and accuracies (NaN: no
// metric).
func batchInput(tids []string, reward, acc []float64) *Input {
	in := &Input{Tasks: advantage.GroupBy(tids), Reward: reward, Metric: acc, HasMetric: make([]bool, len(acc))}
	for i, a := range acc {
		in.HasMetric[i] = !math.IsNaN(a)
	}
	return in
}

// TestDropReasons: every dropped row carries the reason of its filter, kept
// rows none, and the metrics count them.
func TestDropReasons(t *testing.T) {
	nan := math.NaN()
	tids := []string{"0/a", "0/a", "0/b", "0/b", "0/c", "0/d", "0/d", "0/e", "0/e"}
	reward := []float64{1, 1, 0, 0, 1, 1, 0, nan, nan}
	acc := []float64{1, 1, -1, -1, 1, 1, -1, nan, 1}
	for _, c := range []struct {
		op      Operator
		reasons []string
		metrics map[string]float64
	}{
		{&DAPODynamicSampling{MetricKey: "accuracy"},
			[]string{ReasonAllCorrect, ReasonAllCorrect, ReasonAllWrong, ReasonAllWrong, ReasonSingleton, "", "", "", ""},
			map[string]float64{"filtered_count": 5, "dropped_all_correct": 2, "dropped_all_wrong": 2}},
		{&RewardStdFilter{Threshold: 0},
			[]string{ReasonStdBelow, ReasonStdBelow, ReasonStdBelow, ReasonStdBelow, ReasonSingleton, "", "", "", ""},
			map[string]float64{"operator_filtered_count": 5}},
	} {
		res, err := c.op.Apply(batchInput(tids, reward, acc))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Reason, c.reasons) {
			t.Errorf("%T: reasons %q, want %q", c.op, res.Reason, c.reasons)
		}
		if want := []int32{5, 6, 7, 8}; !slices.Equal(res.Order, want) {
			t.Errorf("%T: kept %v, want %v", c.op, res.Order, want)
		}
		for k, v := range c.metrics {
			if res.Metrics[k] != v {
				t.Errorf("%T: %s = %v, want %v", c.op, k, res.Metrics[k], v)
			}
		}
	}
	// A NaN reward makes the group's std NaN: kept, and the statistics NaN.
	res, _ := (&RewardStdFilter{}).Apply(batchInput(tids, reward, acc))
	if !math.IsNaN(res.Metrics["origin_group_advantages/reward_std/mean"]) {
		t.Errorf("reward_std/mean = %v, want NaN", res.Metrics["origin_group_advantages/reward_std/mean"])
	}
}

// TestOperatorsPerBatch: groups are keyed by batch/task, so an operator over
// a whole store equals the operator over each explore batch, kept rows and
// drop reasons concatenated batch by batch.
func TestOperatorsPerBatch(t *testing.T) {
	var tids []string
	var reward, acc []float64
	for i := 0; i < 60; i++ {
		b, task := i/12, (i%12)/3
		tids = append(tids, string(rune('0'+b))+"/"+string(rune('a'+task)))
		r := float64((i * 7 % 5) % 2)
		reward, acc = append(reward, r), append(acc, 2*r-1)
	}
	for _, op := range []Operator{&DAPODynamicSampling{MetricKey: "accuracy"}, &RewardStdFilter{Threshold: 0.1}} {
		whole, err := op.Apply(batchInput(tids, reward, acc))
		if err != nil {
			t.Fatal(err)
		}
		var order []int32
		var reasons []string
		for lo := 0; lo < 60; lo += 12 {
			part, err := op.Apply(batchInput(tids[lo:lo+12], reward[lo:lo+12], acc[lo:lo+12]))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range part.Order {
				order = append(order, r+int32(lo))
			}
			reasons = append(reasons, part.Reason...)
		}
		if !slices.Equal(order, whole.Order) || !slices.Equal(reasons, whole.Reason) {
			t.Errorf("%T: per batch %v %q, whole %v %q", op, order, reasons, whole.Order, whole.Reason)
		}
		if whole.Dropped() == 0 || len(whole.Order) == 0 {
			t.Errorf("%T: dropped %d of 60: the case tests nothing", op, whole.Dropped())
		}
	}
}

// TestDefaultOnce: the built-in registry is built once, not per call.
func TestDefaultOnce(t *testing.T) {
	if Default() != Default() {
		t.Error("Default is rebuilt per call")
	}
}

// TestOperatorErrors: upstream's errors, one line each.
func TestOperatorErrors(t *testing.T) {
	reg := Default()
	for _, c := range []struct {
		name string
		args map[string]any
		in   *Input
		want string
	}{
		{"math_dapo_reward", map[string]any{"enable_overlong_penalty": true, "penalty_factor": 1.0}, nil, "must be set"},
		{"math_dapo_reward", map[string]any{"enable_overlong_penalty": true, "penalty_factor": 1.0, "max_response_length": 4, "cache_length": 4}, nil, "greater than cache_length"},
		{"cod_overwrite_reward_with_returns", nil, batchInput([]string{"0/a"}, []float64{1}, []float64{math.NaN()}), "no returns_norm"},
		{"dapo_dynamic_sampling", nil, &Input{Tasks: advantage.GroupBy([]string{"0/a", "0/a"}), Reward: []float64{math.NaN(), 1},
			NullReward: []bool{true, false}}, "missing 'accuracy'"},
		{"no_such_operator", nil, nil, "unknown experience operator"},
	} {
		op, err := New(reg, c.name, c.args)
		if err == nil && c.in != nil {
			_, err = op.Apply(c.in)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %v: err = %v, want one line with %q", c.name, c.args, err, c.want)
		}
	}
}

// TestMathDAPORewardRows: the operator form rescores each row from
// metrics.accuracy, else the reward, and its response length.
func TestMathDAPORewardRows(t *testing.T) {
	op, err := New(Default(), "math_dapo_reward", map[string]any{"enable_overlong_penalty": true,
		"penalty_factor": 1.0, "max_response_length": int64(20), "cache_length": int64(4)})
	if err != nil {
		t.Fatal(err)
	}
	in := batchInput([]string{"0/a", "0/a", "0/a"}, []float64{0.9, 0, 0.2}, []float64{math.NaN(), 1, math.NaN()})
	in.ResponseLength = []int64{10, 18, 30}
	res, err := op.Apply(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 1 - 0.5, -1 - 1}
	if !slices.Equal(res.Reward, want) || !slices.Equal(res.RowMetrics["format_score"], []float64{0, -0.5, -1}) {
		t.Errorf("rewards %v (want %v), format %v", res.Reward, want, res.RowMetrics["format_score"])
	}
}

// TestMathDAPORewardArgs: upstream only asserts that the three are set and
// max_response_length > cache_length; other values shape the reward by the
// same formula, in Python's exact integers.
func TestMathDAPORewardArgs(t *testing.T) {
	for _, tc := range []struct {
		pf       float64
		max, c   int64
		length   int64
		wantForm float64
	}{
		{-1, 20, 4, 18, 0.5},                     // a negative factor rewards length
		{1, 20, 0, 20, 0},                        // cache_length 0: L ≤ e (Q-54, bbb563ed)
		{1, 20, -5, 24, 0},                       // e = 25: no penalty up to it
		{1, 20, -5, 26, -1},                      // past e, past max_response_length
		{1, math.MaxInt64, -5, math.MaxInt64, 0}, // e past MaxInt64
		{2, 0, -4, 2, 0},                         // e = 4
		{2, -3, -10, 7, 0},                       // e = 7
		{2, -3, -10, 8, -2},                      // past e and max_response_length
	} {
		f := &MathDAPOReward{Penalty: true, PenaltyFactor: tc.pf, MaxLength: tc.max, CacheLength: tc.c, ScoreKey: "accuracy"}
		op, err := New(Default(), "math_dapo_reward", map[string]any{"enable_overlong_penalty": true,
			"penalty_factor": tc.pf, "max_response_length": tc.max, "cache_length": tc.c})
		if err != nil {
			t.Errorf("%+v: %v", tc, err)
			continue
		}
		if *op.(*MathDAPOReward) != *f {
			t.Errorf("%+v: built %+v", tc, op)
		}
		if _, form, _ := f.Score(tc.length, 1); form != tc.wantForm {
			t.Errorf("%+v: format score %v, want %v", tc, form, tc.wantForm)
		}
	}
}
