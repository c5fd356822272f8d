package advantage

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// TestBadInput checks that missing or inconsistent columns are bad-input
// errors naming the problem.
func TestBadInput(t *testing.T) {
	rows := agg.NewRows([]int{2, 1})
	mask := []float64{1, 1, 1}
	tests := []struct {
		name    string
		run     func() error
		mention string
	}{
		{"ppo without values", func() error {
			_, err := (&PPO{Gamma: 1, Lam: 1}).Compute(&TokenBatch{Rows: rows, Mask: mask, TokenLevelRewards: []float64{0, 1, 1}})
			return err
		}, "missing column values"},
		{"ppo with one masked token", func() error {
			_, err := (&PPO{Gamma: 1, Lam: 1}).Compute(&TokenBatch{Rows: rows, Mask: []float64{1, 0, 0},
				TokenLevelRewards: []float64{0, 1, 1}, Values: []float64{0, 0, 0}})
			return err
		}, "sum of the mask is one"},
		{"ragged column", func() error {
			_, err := ReMax{}.Compute(&TokenBatch{Rows: rows, Mask: mask, TokenLevelRewards: []float64{1}})
			return err
		}, "has 1 values, the batch has 3 tokens"},
		{"remax without baselines", func() error {
			_, err := ReMax{}.Compute(&TokenBatch{Rows: rows, Mask: mask, TokenLevelRewards: []float64{0, 1, 1}})
			return err
		}, "reward_baseline"},
		{"grpo_verl without uid groups", func() error {
			_, err := (&GRPOVerl{Epsilon: 1e-6}).Compute(&TokenBatch{Rows: rows, Mask: mask, TokenLevelRewards: []float64{0, 1, 1}})
			return err
		}, "uid grouping is missing"},
		{"clipv without necs", func() error {
			_, err := (&ClipV{Epsilon: 1e-6, Mu: 2, MaxFrac: 1e-4}).Compute(&TokenBatch{Rows: rows, Mask: mask,
				TokenLevelRewards: []float64{0, 1, 1}, OldLogprobs: []float64{-1, -1, -1}, Entropys: []float64{1, 1, 1},
				Groups: GroupBy([]string{"a", "a"})})
			return err
		}, "missing column necs"},
		{"grpo rank penalty without logprobs", func() error {
			penalty := 0.1
			_, err := (&GRPO{Epsilon: 1e-6, RankPenalty: &penalty}).Plan(input([]string{"a", "a"}, []float64{0, 1}))
			return err
		}, "mean logprob"},
		{"grouping of another batch", func() error {
			_, err := Reinforce{}.Plan(input([]string{"a"}, []float64{0, 1}))
			return err
		}, "covers 1 rows, the batch has 2"},
		{"runs across tasks", func() error {
			_, err := (&StepWiseGRPO{GRPO: GRPO{Epsilon: 1e-6}}).Plan(&Input{Reward: []float64{1, 0},
				Tasks: GroupBy([]string{"a", "b"}), Runs: GroupBy([]string{"r", "r"})})
			return err
		}, "spans two task groups"},
		{"step_wise_grpo without runs", func() error {
			_, err := (&StepWiseGRPO{GRPO: GRPO{Epsilon: 1e-6}}).Plan(input([]string{"a"}, []float64{1}))
			return err
		}, "rid grouping is missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("got %v, want a bad-input error mentioning %q", err, tc.mention)
			}
		})
	}
}

// TestRaggedGroupFns checks the trainer-side group fns on rows of different
// lengths against float64 references on the row sums.
func TestRaggedGroupFns(t *testing.T) {
	rows := agg.NewRows([]int{3, 1, 2, 2})
	mask := []float64{1, 1, 0, 1, 0, 1, 1, 1}
	tlr := []float64{0, 0, 1, 0.5, 0, 2, 0, -1} // row sums 1, 0.5, 2, -1
	groups := GroupBy([]string{"x", "x", "x", "y"})
	m, s := refMeanStd([]float64{1, 0.5, 2})
	tests := []struct {
		name string
		fn   TrainerFn
		row  []float64 // per-row score
	}{
		{"grpo_verl", &GRPOVerl{Epsilon: 1e-6}, []float64{(1 - m) / (s + 1e-6), (0.5 - m) / (s + 1e-6), (2 - m) / (s + 1e-6), -1 / (1 + 1e-6)}},
		{"rloo", RLOO{}, []float64{1 - 1.25, 0.5 - 1.5, 2 - 0.75, -1}},
		{"opmd_verl", &OPMDVerl{Tau: 1}, []float64{1 - m, 0.5 - m, 2 - m, -1}},
		{"asymre_verl", &ASYMREVerl{BaselineShift: -0.1}, []float64{1 - m + 0.1, 0.5 - m + 0.1, 2 - m + 0.1, -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.fn.Compute(&TokenBatch{Rows: rows, Mask: mask, TokenLevelRewards: tlr, Groups: groups})
			if err != nil {
				t.Fatal(err)
			}
			for r := 0; r < rows.N(); r++ {
				lo, hi := rows.Span(r)
				for i := lo; i < hi; i++ {
					if want := tc.row[r] * mask[i]; !close32(res.Advantages[i], want) || res.Returns[i] != res.Advantages[i] {
						t.Errorf("token %d: %v / %v, want %v", i, res.Advantages[i], res.Returns[i], want)
					}
				}
			}
		})
	}
}

// TestBroadcastOverTheCores: a batch of several spans gets score[row] × mask
// at every token (the sign of a zero included) at GOMAXPROCS 1 and 8.
func TestBroadcastOverTheCores(t *testing.T) {
	lens := make([]int, 300)
	for i := range lens {
		lens[i] = 400 + i%97
	}
	b := &TokenBatch{Rows: agg.NewRows(lens)}
	b.Mask = make([]float64, b.Rows.Tokens())
	score := make([]float64, len(lens))
	for r := range score {
		score[r] = float64(r%13) - 6.5
		lo, hi := b.Rows.Span(r)
		for k := lo; k < hi; k++ {
			b.Mask[k] = float64((k + r) % 3 % 2)
		}
	}
	for _, procs := range []int{1, 8} {
		prev := runtime.GOMAXPROCS(procs)
		out := b.broadcast(score)
		runtime.GOMAXPROCS(prev)
		for r := range score {
			lo, hi := b.Rows.Span(r)
			for k := lo; k < hi; k++ {
				if want := score[r] * b.Mask[k]; math.Float64bits(out[k]) != math.Float64bits(want) {
					t.Fatalf("GOMAXPROCS %d: row %d token %d is %v, want %v", procs, r, k, out[k], want)
				}
			}
		}
	}
}
