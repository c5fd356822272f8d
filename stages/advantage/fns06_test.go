package advantage

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestNew06Errors: bad inputs and args of gigpo, gdpo and cod are one-line
// errors naming the fn.
func TestNew06Errors(t *testing.T) {
	tasks := GroupBy([]string{"0/0", "0/0", "0/1"})
	comps := [][]float64{{1, 0, 1}, {0.5, 0.5, 0}}
	for _, c := range []struct {
		fn   string
		args map[string]any
		in   *Input
		want string
	}{
		{"gigpo", map[string]any{"fnorm": "mean"}, nil, "invalid value \"mean\""},
		{"gigpo", nil, &Input{Reward: []float64{1, 0, 1}, Tasks: tasks, Runs: GroupBy([]string{"a", "b", "c"})}, "needs eid.step"},
		{"gdpo", map[string]any{"num_generations": int64(2)}, &Input{Reward: make([]float64, 3), Tasks: tasks, Components: comps}, "task group 1 has 1 rows, num_generations is 2"},
		{"gdpo", map[string]any{"reward_weights": []any{1.0}}, &Input{Reward: make([]float64, 3), Tasks: tasks, Components: comps}, "reward_weights has 1 values for 2 reward components"},
		{"gdpo", nil, &Input{Reward: make([]float64, 3), Tasks: tasks}, "no reward components"},
		// TRL reshapes with view(-1, G, K): G = 0 raises.
		{"gdpo", map[string]any{"num_generations": int64(0)}, nil, "num_generations: 0 is outside its valid range [1,inf)"},
		// Each weight is finite, their float32 sum is not.
		{"gdpo", map[string]any{"reward_weights": []any{3e38, -3e38}}, nil, "float32 sum overflows"},
		{"gdpo", map[string]any{"reward_weights": []any{1.0, 1e39}}, nil, "float32 sum overflows"},
		{"cod", map[string]any{"std_cal_level": "task"}, nil, "invalid value \"task\""},
		{"cod", map[string]any{"iterative_hint_e2e_causal": true, "red_weight_adaptive_temp": true, "red_weight_adaptive_version": "halving"}, nil, "Invalid red_weight_adaptive_version: halving"},
		{"cod", map[string]any{"iterative_hint_e2e_causal": true}, &Input{Reward: []float64{1}, Tasks: GroupBy([]string{"0/0"}),
			CoD: []CoDInfo{{Task: "0", Type: "other"}}}, "Invalid exp_type other"},
		{"cod", map[string]any{"iterative_hint_e2e_causal": true}, &Input{Reward: []float64{1}, Tasks: GroupBy([]string{"0/0"})}, "needs the CoD info"},
	} {
		fn, err := Pipeline(Default(), c.fn, c.args)
		if err == nil && c.in != nil {
			_, err = fn.Plan(c.in)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.fn) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %v: err = %v, want one line with %q", c.fn, c.args, err, c.want)
		}
	}
}

// TestGiGPOAnchorsByText: an integer hash and its string rendering are one
// anchor state, shared across tasks; rows without a hash get A_S = 0.
func TestGiGPOAnchorsByText(t *testing.T) {
	exps := []GoldenExperience{
		{EID: GoldenEID{Batch: "0", Task: "0"}, Info: map[string]json.RawMessage{"step_reward": json.RawMessage("1"), "env_state_hash": json.RawMessage("7")}},
		{EID: GoldenEID{Batch: "0", Task: "1"}, Info: map[string]json.RawMessage{"step_reward": json.RawMessage("0"), "env_state_hash": json.RawMessage(`"7"`)}},
		{EID: GoldenEID{Batch: "0", Task: "2"}, Info: map[string]json.RawMessage{"step_reward": json.RawMessage("3")}},
	}
	in := GoldenInput(exps, 0)
	fn, err := Pipeline(Default(), "gigpo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := GoldenNeeds(in, exps, NeedsOf(fn)); err != nil {
		t.Fatal(err)
	}
	if in.Anchor[0] != in.Anchor[1] || in.Anchor[2] != -1 {
		t.Fatalf("anchors %v", in.Anchor)
	}
	p, err := fn.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	// Single-run tasks: A_E = E/(1+ε); the anchor {1, 0}: A_S = ±0.5/(1+ε).
	eps := float32(1 + 1e-6)
	want := []float32{1/eps + 0.5/eps, 0/eps - 0.5/eps, 3 / eps}
	for i, w := range want {
		if math.Abs(float64(p.Score[i]-w)) > 1e-6 {
			t.Errorf("row %d: score %v, want %v", i, p.Score[i], w)
		}
	}
	if p.Metrics["gigpo/anchor_groups_total"] != 1 || p.Metrics["gigpo/anchor_group_hit_ratio"] != 1 {
		t.Errorf("metrics %v", p.Metrics)
	}
}

// TestGiGPONonFinite: a NaN or infinite final reward (sparse runs) or step
// reward (dense runs) propagates as upstream's float arithmetic does: the
// run's return E makes every A_E of its task non-finite, its
// return-to-go every A_S of its anchor group (row 2 shares row 0's
// anchor); the other task keeps its finite values.
func TestGiGPONonFinite(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	eps := 1 + 1e-6
	tasks := GroupBy([]string{"0/0", "0/0", "0/1", "0/1"})
	runs := GroupBy([]string{"0/0/0", "0/0/1", "0/1/0", "0/1/1"})
	for _, tc := range []struct {
		name        string
		reward, srw []float64 // srw nil: sparse (no step rewards)
		want        []float64
	}{
		{"sparse NaN reward", []float64{nan, 1, 0, 1}, nil, []float64{nan, nan, nan, 0.5 / eps}},
		{"dense NaN step reward", []float64{0, 0, 0, 0}, []float64{nan, 1, 0, 1}, []float64{nan, nan, nan, 0.5 / eps}},
		// E = [inf, 1]: mean inf, A_E = (inf − inf, 1 − inf)/(1+ε); the
		// anchor's returns [inf, 0] likewise give A_S = (NaN, −inf).
		{"dense infinite step reward", []float64{0, 0, 0, 0}, []float64{inf, 1, 0, 1}, []float64{nan, -inf, -inf, 0.5 / eps}},
		{"finite", []float64{0, 1, 0, 1}, nil, []float64{-0.5 / eps, 0.5 / eps, -0.5 / eps, 0.5 / eps}},
	} {
		in := &Input{Reward: tc.reward, Tasks: tasks, Runs: runs, Step: make([]int64, 4), Anchor: []int32{0, -1, 0, -1},
			StepReward: []float64{nan, nan, nan, nan}, HasStepReward: make([]bool, 4)}
		if tc.srw != nil {
			in.StepReward, in.HasStepReward = tc.srw, []bool{true, true, true, true}
		}
		p, err := (&GiGPO{Omega: 1, Gamma: 1, Epsilon: 1e-6}).Plan(in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i, w := range tc.want {
			got := float64(p.Score[i])
			same := got == w || math.IsNaN(got) && math.IsNaN(w) || math.Abs(got-w) <= 1e-6
			if !same {
				t.Errorf("%s: row %d: score %v, want %v", tc.name, i, got, w)
			}
		}
	}
}

// TestDropReasons: every row a plan drops says why — a singleton or a
// low-std group of grpo's std filter and reward_std_filter, an invalid
// reward, a judge-flagged CoD row — and kept rows say nothing.
func TestDropReasons(t *testing.T) {
	tasks := GroupBy([]string{"0/a", "0/a", "0/b", "0/c", "0/c"})
	reward := []float64{1, 1, 0.5, 0, 1}
	in := &Input{Reward: reward, Tasks: tasks, Runs: GroupBy([]string{"a0", "a1", "b0", "c0", "c1"})}
	dropped := []string{DropStdBelow, DropStdBelow, DropSingleton, "", ""} // task a: std 0; task b: one row (one run)
	for _, c := range []struct {
		fn   string
		args map[string]any
		in   *Input
		want []string
	}{
		{"grpo", map[string]any{"std_threshold": 0.0}, in, dropped},
		{"step_wise_grpo", map[string]any{"std_threshold": 0.0}, in, dropped},
		{"reward_std_filter", nil, in, dropped},
		{"grpo", nil, in, []string{"", "", "", "", ""}},
		{"invalid_reward_filter", nil, &Input{Reward: []float64{1, math.NaN()}, Tasks: GroupBy([]string{"0/a", "0/a"})}, []string{"", DropInvalid}},
		{"cod", map[string]any{"iterative_hint_e2e_causal": true}, &Input{Reward: []float64{1, 0}, Tasks: GroupBy([]string{"0/a", "0/a"}),
			CoD: []CoDInfo{{Task: "a", Type: "solve_task", TaskRewards: []float64{1}, RespLen: 1}, {Task: "a", Run: 1, Type: "solve_task", TaskRewards: []float64{0}, Judge: true}}},
			[]string{"", DropJudgeFlagged}},
	} {
		fn, err := Pipeline(Default(), c.fn, c.args)
		if err != nil {
			t.Fatal(err)
		}
		p, err := fn.Plan(c.in)
		if err != nil {
			t.Fatal(err)
		}
		for r, w := range c.want {
			if got := p.DropReason(r); got != w || p.Keep[r] != (w == "") {
				t.Errorf("%s %v: row %d: reason %q keep %v, want %q", c.fn, c.args, r, got, p.Keep[r], w)
			}
		}
	}
}

// TestGiGPOStepRewardValues: a golden step reward is read as upstream's
// float(value): booleans are 1 and 0, "nan" and "inf" their numbers, null
// and other values raise.
func TestGiGPOStepRewardValues(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want float64
		ok   bool
	}{
		{"0.5", 0.5, true}, {"true", 1, true}, {"false", 0, true}, {`"nan"`, math.NaN(), true}, {`"-inf"`, math.Inf(-1), true},
		{"null", 0, false}, {`"x"`, 0, false}, {"[1]", 0, false},
	} {
		exps := []GoldenExperience{{EID: GoldenEID{Batch: "0", Task: "0"}, Info: map[string]json.RawMessage{"step_reward": json.RawMessage(tc.raw)}}}
		in := GoldenInput(exps, 0)
		err := GoldenNeeds(in, exps, Needs{StepReward: "step_reward"})
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok %v", tc.raw, err, tc.ok)
			continue
		}
		if got := in.StepReward[0]; tc.ok && !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("%s: %v, want %v", tc.raw, got, tc.want)
		}
	}
}
