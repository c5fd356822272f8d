package advantage

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

// Independent float64 references for the opt-in fixes: plain formulas from
// the spec, no float32 emulation, compared with a float32 tolerance.

func refMeanStd(x []float64) (mean, std float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		std += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(std / float64(len(x)-1))
}

func close32(got, want float64) bool { return math.Abs(got-want) <= 1e-6+1e-5*math.Abs(want) }

// input builds an Input from task keys and rewards.
func input(tids []string, reward []float64) *Input {
	return &Input{Reward: reward, Tasks: GroupBy(tids)}
}

// checkScores compares the plan's scores of the kept rows with want (NaN = row dropped).
func checkScores(t *testing.T, p *Plan, want []float64) {
	t.Helper()
	for i, w := range want {
		switch {
		case math.IsNaN(w) && p.Keep[i]:
			t.Errorf("row %d kept, want dropped", i)
		case math.IsNaN(w):
		case !p.Keep[i]:
			t.Errorf("row %d dropped, want score %v", i, w)
		case !close32(float64(p.Score[i]), w):
			t.Errorf("row %d: score %v, want %v", i, p.Score[i], w)
		}
	}
}

// TestRankPenaltyAdjustedScore checks Q-01: with rank_penalty_adjusted_score
// the numerator is the adjusted reward; by default the raw one.
func TestRankPenaltyAdjustedScore(t *testing.T) {
	const eps, pen = 1e-6, 0.2
	reward := []float64{0, 1, 2, 3, 0.5, 0.5, 0.5}
	q := []float64{-4, -3, -2, -1, -0.1, -0.3, -0.2} // ranks 0,1,2,3 and 2,0,1
	ranks := []float64{0, 1, 2, 3, 2, 0, 1}
	tids := []string{"a", "a", "a", "a", "b", "b", "b"}
	want := func(adjusted bool) []float64 {
		out := make([]float64, len(reward))
		for _, rows := range [][]int{{0, 1, 2, 3}, {4, 5, 6}} {
			n := float64(len(rows))
			adj := make([]float64, len(rows))
			for k, i := range rows {
				adj[k] = reward[i] * (1 - ranks[i]/n*pen)
			}
			mean, std := refMeanStd(adj)
			for k, i := range rows {
				num := reward[i]
				if adjusted {
					num = adj[k]
				}
				out[i] = (num - mean) / (std + eps)
			}
		}
		return out
	}
	tests := []struct {
		name     string
		adjusted bool
	}{{"upstream raw numerator", false}, {"Q-01 adjusted numerator", true}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := Pipeline(Default(), "grpo", map[string]any{"rank_penalty": pen, "rank_penalty_adjusted_score": tc.adjusted})
			if err != nil {
				t.Fatal(err)
			}
			in := input(tids, reward)
			in.LogprobMean = q
			p, err := fn.Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			checkScores(t, p, want(tc.adjusted))
			if tc.adjusted { // the bias-corrected advantages of a group sum to ~0
				if s := float64(p.Score[4] + p.Score[5] + p.Score[6]); math.Abs(s) > 1e-4 {
					t.Errorf("equal-reward group sums to %v", s)
				}
			}
		})
	}
}

// TestSingletonGroupPolicy checks Q-02 for the fns that accept the policy.
func TestSingletonGroupPolicy(t *testing.T) {
	const eps = 1e-6
	tids := []string{"solo", "pair", "pair"}
	reward := []float64{0.7, 0, 1}
	pairMean, pairStd := refMeanStd([]float64{0, 1})
	nan := math.NaN()
	tests := []struct {
		fn, policy string
		want       []float64
		filtered   int
	}{
		{"grpo", "upstream", []float64{0.7 / (1 + eps), (0 - pairMean) / (pairStd + eps), (1 - pairMean) / (pairStd + eps)}, 0},
		{"grpo", "unit", []float64{0.7 / (1 + eps), (0 - pairMean) / (pairStd + eps), (1 - pairMean) / (pairStd + eps)}, 0},
		{"grpo", "zero", []float64{0, (0 - pairMean) / (pairStd + eps), (1 - pairMean) / (pairStd + eps)}, 0},
		{"grpo", "drop", []float64{nan, (0 - pairMean) / (pairStd + eps), (1 - pairMean) / (pairStd + eps)}, 1},
		{"opmd", "upstream", []float64{0.7, -0.5, 0.5}, 0},
		{"opmd", "zero", []float64{0, -0.5, 0.5}, 0},
		{"asymre", "upstream", []float64{0.7, -0.4, 0.6}, 0},
		{"asymre", "drop", []float64{nan, -0.4, 0.6}, 1},
		{"rec", "unit", []float64{0.7, -0.5, 0.5}, 0},
		{"rec", "zero", []float64{0, -0.5, 0.5}, 0},
		{"rec", "drop", []float64{nan, -0.5, 0.5}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.fn+"/"+tc.policy, func(t *testing.T) {
			fn, err := Pipeline(Default(), tc.fn, map[string]any{"singleton_group_policy": tc.policy})
			if err != nil {
				t.Fatal(err)
			}
			p, err := fn.Plan(input(tids, reward))
			if err != nil {
				t.Fatal(err)
			}
			checkScores(t, p, tc.want)
			if p.Filtered != tc.filtered {
				t.Errorf("filtered %d, want %d", p.Filtered, tc.filtered)
			}
		})
	}
}

// TestRECSingleton checks Q-03: upstream fails, so the default is a clear
// error; unit gives mean 0, std 1, no drop.
func TestRECSingleton(t *testing.T) {
	const eps = 1e-6
	tests := []struct {
		name    string
		args    map[string]any
		wantErr bool
		want    float64
	}{
		{"default fails like upstream", nil, true, 0},
		{"unit", map[string]any{"singleton_group_policy": "unit"}, false, 0.7},
		{"unit with std_normalize", map[string]any{"singleton_group_policy": "unit", "std_normalize": true}, false, 0.7 / (1 + eps)},
		{"unit with balance drop", map[string]any{"singleton_group_policy": "unit", "drop": "balance"}, false, 0.7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := Pipeline(Default(), "rec", tc.args)
			if err != nil {
				t.Fatal(err)
			}
			p, err := fn.Plan(input([]string{"solo"}, []float64{0.7}))
			if tc.wantErr {
				if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "Q-03") {
					t.Fatalf("got %v, want a bad-input error naming Q-03", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkScores(t, p, []float64{tc.want})
			for k, v := range map[string]float64{"drop_balance": 0, "reward_mean": 0, "reward_std": 1} {
				if got := p.Metrics["group_advantages/"+k+"/mean"]; got != v {
					t.Errorf("%s = %v, want %v", k, got, v)
				}
			}
		})
	}
}

// TestStepWiseLastByStep checks Q-28: the last step of a run is the one with
// the largest eid.step with the fix, the last one received by default.
func TestStepWiseLastByStep(t *testing.T) {
	const eps = 1e-6
	// One task, two runs; run 0 arrives as step 1 (reward 1.0), then step 0 (reward 0.2).
	in := &Input{
		Reward: []float64{1.0, 0.2, 0.5},
		Tasks:  GroupBy([]string{"t", "t", "t"}),
		Runs:   GroupBy([]string{"t/0", "t/0", "t/1"}),
		Step:   []int64{1, 0, 0},
	}
	tests := []struct {
		name      string
		fix       bool
		last0     float64
		wantOrder []int32
	}{
		{"upstream: last received", false, 0.2, []int32{0, 1, 2}},
		{"Q-28: largest step", true, 1.0, []int32{1, 0, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := Pipeline(Default(), "step_wise_grpo", map[string]any{"last_by_eid_step": tc.fix})
			if err != nil {
				t.Fatal(err)
			}
			p, err := fn.Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			mean, std := refMeanStd([]float64{tc.last0, 0.5})
			s0, s1 := (tc.last0-mean)/(std+eps), (0.5-mean)/(std+eps)
			checkScores(t, p, []float64{s0, s0, s1})
			for i, o := range p.Output() {
				if o.Row != tc.wantOrder[i] {
					t.Fatalf("output order %v, want %v", p.Output(), tc.wantOrder)
				}
			}
		})
	}
}

// TestAsymreTrueRewardMean checks Q-11: upstream reports baseline − shift as
// reward_mean (0.1 for a singleton); the fix reports the real mean.
func TestAsymreTrueRewardMean(t *testing.T) {
	tests := []struct {
		name string
		fix  bool
		want float64
	}{{"upstream", false, 0.1}, {"Q-11", true, 0.3}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := Pipeline(Default(), "asymre", map[string]any{"true_reward_mean": tc.fix})
			if err != nil {
				t.Fatal(err)
			}
			p, err := fn.Plan(input([]string{"solo"}, []float64{0.3}))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Metrics["group_advantages/reward_mean/mean"]; !close32(got, tc.want) {
				t.Errorf("reward_mean %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDrGRPO checks the opt-in Dr.GRPO option against reward − mean, and the
// batch-level std against a float64 reference.
func TestDrGRPOAndBatchStd(t *testing.T) {
	const eps = 1e-6
	tids := []string{"a", "a", "a", "b", "b"}
	reward := []float64{0.1, 0.9, 0.5, 2, -1}
	ma, sa := refMeanStd(reward[:3])
	mb, sb := refMeanStd(reward[3:])
	_, sAll := refMeanStd(reward)
	tests := []struct {
		name string
		args map[string]any
		want []float64
	}{
		{"group std", nil, []float64{(0.1 - ma) / (sa + eps), (0.9 - ma) / (sa + eps), (0.5 - ma) / (sa + eps), (2 - mb) / (sb + eps), (-1 - mb) / (sb + eps)}},
		{"batch std", map[string]any{"std_cal_level": "batch"}, []float64{(0.1 - ma) / (sAll + eps), (0.9 - ma) / (sAll + eps), (0.5 - ma) / (sAll + eps), (2 - mb) / (sAll + eps), (-1 - mb) / (sAll + eps)}},
		{"dr_grpo", map[string]any{"dr_grpo": true}, []float64{0.1 - ma, 0.9 - ma, 0.5 - ma, 2 - mb, -1 - mb}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := Pipeline(Default(), "grpo", tc.args)
			if err != nil {
				t.Fatal(err)
			}
			p, err := fn.Plan(input(tids, reward))
			if err != nil {
				t.Fatal(err)
			}
			checkScores(t, p, tc.want)
		})
	}
}
