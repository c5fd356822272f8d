package pipeline

import (
	"context"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TestLossStreamsLikeOneBatch: the loss step over a store read in record
// batches of 7 rows equals the same step over the store as one batch, for
// a loss of each shape (plain, mixed row sets, gradient after the sums, the
// rollout correction first: bypass_mode with rejection and normalised
// weights, whose batch mean and rejection-sampled mask totals are gathered
// in the statistics pass; m2po, whose token selection over the whole batch
// takes one statistics pass).
func TestLossStreamsLikeOneBatch(t *testing.T) {
	bypass := args.Values{"rollout_is": "token", "rollout_is_batch_normalize": true,
		"rollout_rs": "token_k1,seq_mean_k3", "rollout_rs_threshold": "0.97_1.03,0.0002"}
	for _, c := range []struct {
		name, fn, store string
		args            args.Values
	}{
		{"ppo", "ppo", "full.parquet", nil}, {"mix", "mix", "full.parquet", nil}, {"gspo", "gspo", "full.parquet", nil},
		{"dpo", "dpo", "dpo_pairs.parquet", nil},
		{"m2po", "m2po", "full.parquet", nil}, {"m2po_selecting", "m2po", "full.parquet", args.Values{"m2_threshold": 1e-4}},
		{"bypass_ppo_clip", "bypass_mode", "full.parquet", bypass},
		{"bypass_reinforce", "bypass_mode", "full.parquet", args.Overlay(bypass, args.Values{"loss_type": "reinforce", "rollout_is": "sequence", "loss_agg_mode": "seq-mean-token-mean"})},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(rows int) (objective.Result, int64) {
				o, err := objective.New(objective.Config{PolicyLoss: c.fn, Args: c.args, KLLoss: "k3", KLCoef: 0.01, Entropy: "default", EntropyCoef: 0.001})
				if err != nil {
					t.Fatal(err)
				}
				st := NewLoss(o, tokens.CPU, nil, 1)
				res, err := Run(context.Background(), Job{In: stores + c.store, Stages: []Stage{st}, BatchRows: rows})
				if err != nil {
					t.Fatal(err)
				}
				return st.Result(), res.In
			}
			whole, n := run(1 << 20)
			parts, m := run(7)
			if n != m || n < 14 {
				t.Fatalf("%d and %d rows", n, m)
			}
			close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
			if !close(parts.Loss, whole.Loss) {
				t.Errorf("loss in batches of 7: %v, as one batch: %v", parts.Loss, whole.Loss)
			}
			for k, v := range whole.Metrics {
				if !close(parts.Metrics[k], v) {
					t.Errorf("%s in batches of 7: %v, as one batch: %v", k, parts.Metrics[k], v)
				}
			}
		})
	}
}

// TestTrainerSideStreamsLikeOneBatch: every trainer-side fn over a store
// read in record batches of 7 rows writes the advantages and returns it
// writes reading the store as one batch (float32 storage: 1e-6). The
// batched run writes Arrow IPC, so its streaming pass is batched too (a
// Parquet output reads whole row groups, deferred).
func TestTrainerSideStreamsLikeOneBatch(t *testing.T) {
	for _, fn := range []string{"ppo", "reinforceplusplus", "rloo", "grpo_verl", "opmd_verl", "asymre_verl", "jsd", "on_policy_distill"} {
		t.Run(fn, func(t *testing.T) {
			dir := t.TempDir()
			out := func(rows int, ext string) *table {
				path := dir + "/" + fn + ext
				run(t, withFn(t, Job{In: stores + "full.parquet", Out: path, BatchRows: rows}, fn, ""))
				return readTable(t, path)
			}
			whole, parts := out(1<<20, ".parquet"), out(7, ".arrow")
			for i := range whole.adv {
				for k := range whole.adv[i] {
					a, b := float64(parts.adv[i][k]), float64(whole.adv[i][k])
					r, s := float64(parts.ret[i][k]), float64(whole.ret[i][k])
					if math.Abs(a-b) > 1e-6*math.Max(1, math.Abs(b)) || math.Abs(r-s) > 1e-6*math.Max(1, math.Abs(s)) {
						t.Fatalf("row %d token %d: advantage %v return %v in batches of 7, %v and %v as one batch", i, k, a, r, b, s)
					}
				}
			}
		})
	}
}

// TestOutputInsideInput: an output inside the input store's directory is
// refused unless the job allows it.
func TestOutputInsideInput(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(stores + "demo.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "part-0.parquet"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.parquet")
	_, err = Run(context.Background(), withFn(t, Job{In: dir, Out: out}, "grpo", ""))
	if err == nil || !strings.Contains(err.Error(), "inside the input store") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("refused output was written")
	}
	run(t, withFn(t, Job{In: dir, Out: out, InsideInput: true}, "grpo", ""))
}

// TestReinforcePlusPlusRows: reinforceplusplus with gamma 1 over outcome
// rewards, which the engine computes from each row's reward and masked
// token count (advantage.RowWhitened), writes what the fn's Compute gives
// over the whole store as one token batch (token-level rewards: the reward
// at each row's last token), on a multi-turn store whose masks have holes.
func TestReinforcePlusPlusRows(t *testing.T) {
	for _, in := range []string{"full.parquet", "multi.parquet"} {
		t.Run(in, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.parquet")
			run(t, withFn(t, Job{In: stores + in, Out: path, BatchRows: 50}, "reinforceplusplus", ""))
			got := readTable(t, path)
			var lens []int
			b := &advantage.TokenBatch{}
			holes := false
			for i, m := range got.mask {
				lens = append(lens, len(m))
				for k, bit := range m {
					b.Mask = append(b.Mask, map[bool]float64{true: 1}[bit])
					holes = holes || !bit
					v := 0.0
					if k == len(m)-1 {
						v = got.reward[i]
					}
					b.TokenLevelRewards = append(b.TokenLevelRewards, v)
				}
			}
			b.Rows = agg.NewRows(lens)
			want, err := (&advantage.ReinforcePlusPlus{Gamma: 1}).Compute(b)
			if err != nil {
				t.Fatal(err)
			}
			k := 0
			for i := range got.adv {
				for j := range got.adv[i] {
					a, r := float64(got.adv[i][j]), float64(got.ret[i][j])
					if !close32(got.adv[i][j], want.Advantages[k]) || !close32(got.ret[i][j], want.Returns[k]) {
						t.Fatalf("row %d token %d: advantage %v return %v, Compute %v and %v", i, j, a, r, want.Advantages[k], want.Returns[k])
					}
					k++
				}
			}
			if k != len(want.Advantages) || k == 0 || (in == "multi.parquet" && !holes) {
				t.Fatalf("%d tokens compared of %d (holes in the mask: %v)", k, len(want.Advantages), holes)
			}
		})
	}
}

// TestRowScoredFromMaskBits: the group fns over outcome rewards
// (advantage.RowScored) write advantages = returns = float32(score × mask)
// of the fn's Compute over the whole store as one token batch, bit for
// bit, on a store whose masks have holes — and no stage converts a token
// column to float64 for it: each row's score goes straight onto the
// action_mask bits.
func TestRowScoredFromMaskBits(t *testing.T) {
	for _, fn := range []string{"rloo", "grpo_verl", "opmd_verl", "asymre_verl"} {
		for _, in := range []string{"full.parquet", "multi.parquet"} {
			t.Run(fn+"/"+in, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "out.parquet")
				job := withFn(t, Job{In: stores + in, Out: path, BatchRows: 50}, fn, "")
				spy := &tokenSpy{}
				job.Stages = append(job.Stages, spy)
				run(t, job)
				if spy.batches == 0 || len(spy.converted) > 0 {
					t.Fatalf("%d batches; token columns converted: %v", spy.batches, spy.converted)
				}
				got := readTable(t, path)
				var lens []int
				var ids []int32
				index := map[string]int32{}
				b := &advantage.TokenBatch{}
				for i, m := range got.mask {
					lens = append(lens, len(m))
					for k, bit := range m {
						b.Mask = append(b.Mask, map[bool]float64{true: 1}[bit])
						v := 0.0
						if k == len(m)-1 {
							v = got.reward[i]
						}
						b.TokenLevelRewards = append(b.TokenLevelRewards, v)
					}
					if _, ok := index[got.tid[i]]; !ok {
						index[got.tid[i]] = int32(len(index))
					}
					ids = append(ids, index[got.tid[i]])
				}
				b.Rows = agg.NewRows(lens)
				var err error
				if b.Groups, err = advantage.GroupByIDs(ids, len(index)); err != nil {
					t.Fatal(err)
				}
				f, err := advantage.Trainer(advantage.Default(), fn, nil)
				if err != nil {
					t.Fatal(err)
				}
				want, err := f.Compute(b)
				if err != nil {
					t.Fatal(err)
				}
				k := 0
				for i := range got.adv {
					for j := range got.adv[i] {
						w := math.Float32bits(float32(want.Advantages[k]))
						if math.Float32bits(got.adv[i][j]) != w || math.Float32bits(got.ret[i][j]) != w {
							t.Fatalf("row %d token %d: advantage %v return %v, Compute %v", i, j, got.adv[i][j], got.ret[i][j], want.Advantages[k])
						}
						k++
					}
				}
				if k != len(want.Advantages) || k == 0 || len(index) < 2 {
					t.Fatalf("%d tokens compared of %d, %d groups", k, len(want.Advantages), len(index))
				}
			})
		}
	}
}

// tokenSpy is a last stage that records the token columns the stages
// before it converted to float64 (Batch.Tokens) in the streaming pass.
type tokenSpy struct {
	batches   int
	converted []string
}

func (s *tokenSpy) Name() string { return "token_spy" }
func (s *tokenSpy) Needs() Needs { return Needs{} }

func (s *tokenSpy) Apply(b *Batch) error {
	s.batches++
	for name := range b.tokens {
		if !slices.Contains(s.converted, name) {
			s.converted = append(s.converted, name)
		}
	}
	return nil
}

// passProbe is a stage whose statistics pass reads the input logprob
// alone; it records which of its columns the pass's batches have.
type passProbe struct{ has map[string]bool }

func (p *passProbe) Name() string { return "probe" }

func (p *passProbe) Needs() Needs {
	return Needs{Passes: 1, PassColumns: []string{}, PassInputs: []schema.Input{schema.InLogprob}}
}

func (p *passProbe) Observe(_ int, b *Batch) error {
	for _, c := range []string{schema.Logprob, schema.Logprobs} {
		p.has[c] = b.Has(c)
	}
	return nil
}

// TestPassInputsReadOneColumn: a statistics pass reads an input from the
// first of its columns the store has: logprob where the store has it (not
// its fallback logprobs too), else logprobs.
func TestPassInputsReadOneColumn(t *testing.T) {
	for _, c := range []struct {
		store string
		want  map[string]bool
	}{
		{"full.parquet", map[string]bool{schema.Logprob: true, schema.Logprobs: false}},
		{"demo.parquet", map[string]bool{schema.Logprob: false, schema.Logprobs: true}},
	} {
		p := &passProbe{has: map[string]bool{}}
		if _, err := Run(context.Background(), Job{In: stores + c.store, Stages: []Stage{p}}); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(p.has, c.want) {
			t.Errorf("%s: the pass read %v, want %v", c.store, p.has, c.want)
		}
	}
}

// TestStreamedLossPassReadsItsInputs: m2po's statistics pass (one) reads
// the mask, the expert flags, the columns named by --col and the policy
// loss's inputs, not every input the objective could read.
func TestStreamedLossPassReadsItsInputs(t *testing.T) {
	o, err := objective.New(objective.Config{PolicyLoss: "m2po", KLLoss: "k3", KLCoef: 0.01, Entropy: "default", EntropyCoef: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	n := NewLoss(o, tokens.CPU, map[string]string{tokens.Advantages: "adv"}, 1).Needs()
	wantCols := []string{schema.ActionMask, schema.ExpertMask, "adv"}
	wantIns := []schema.Input{schema.InLogprob, schema.InOldLogprob, schema.InActionMask, schema.InAdvantages}
	if n.Passes != 1 || !slices.Equal(n.PassColumns, wantCols) || !slices.Equal(n.PassInputs, wantIns) {
		t.Errorf("needs %d passes reading %v and %v, want 1 reading %v and %v", n.Passes, n.PassColumns, n.PassInputs, wantCols, wantIns)
	}
}
