package pipeline

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/operator"
)

// TestOperatorsStream: the operator stage then grpo give the same output
// and rejected store read in 7-row batches as in one batch.
func TestOperatorsStream(t *testing.T) {
	dir := t.TempDir()
	in := "../fixtures/stores/full.parquet"
	run := func(rows int) (string, string) {
		reg := operator.Default()
		dyn, err := operator.New(reg, "dapo_dynamic_sampling", map[string]any{"correct_threshold": 0.5})
		if err != nil {
			t.Fatal(err)
		}
		mask, _ := operator.New(reg, "mask_response_truncated", nil)
		fn, err := advantage.Pipeline(advantage.Default(), "grpo", nil)
		if err != nil {
			t.Fatal(err)
		}
		out, rej := filepath.Join(dir, "out.parquet"), filepath.Join(dir, "rej.parquet")
		os.Remove(out)
		os.Remove(rej)
		stages := append([]Stage{Operators([]Operator{{"dapo_dynamic_sampling", dyn}, {"mask_response_truncated", mask}})}, PipelineSide("grpo", fn)...)
		res, err := Run(context.Background(), Job{In: in, Out: out, Rejected: rej, Stages: stages, BatchRows: rows})
		if err != nil {
			t.Fatal(err)
		}
		if res.Filtered == 0 || res.Rejected != res.Filtered {
			t.Errorf("batch %d: filtered %d, rejected %d: want equal, > 0", rows, res.Filtered, res.Rejected)
		}
		return rowsOf(t, out), rowsOf(t, rej)
	}
	o1, r1 := run(1 << 20)
	o7, r7 := run(7)
	if o1 != o7 || r1 != r7 {
		t.Error("7-row batches give another output or rejected store than one batch")
	}
}

// TestMaskedRowsSpreadNoAdvantage: advantages are score × the mask the
// operators left (upstream's order: operators rewrite action_mask, then the
// advantage fn multiplies by it), so a truncated response masked by
// mask_response_truncated holds ±0 on every token (the sign of its
// score), pipeline-side and trainer-side alike; rows left unmasked keep the
// advantages of the same job without the operator, as the fns read the
// mask only to spread their scores.
func TestMaskedRowsSpreadNoAdvantage(t *testing.T) {
	in := "../fixtures/stores/full.parquet"
	for _, tc := range []struct {
		fn        string
		unchanged bool // unmasked rows as without the operator
	}{
		{"grpo", true},
		{"opmd", true},
		{"rloo", true},
	} {
		t.Run(tc.fn, func(t *testing.T) {
			run := func(masking bool) *table {
				stages, err := stagesOf(tc.fn, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				if masking {
					mask, err := operator.New(operator.Default(), "mask_response_truncated", nil)
					if err != nil {
						t.Fatal(err)
					}
					stages = append([]Stage{Operators([]Operator{{"mask_response_truncated", mask}})}, stages...)
				}
				out := filepath.Join(t.TempDir(), "out.parquet")
				if _, err := Run(context.Background(), Job{In: in, Out: out, Stages: stages}); err != nil {
					t.Fatal(err)
				}
				return readTable(t, out)
			}
			plain, masked := run(false), run(true)
			if len(plain.adv) != len(masked.adv) {
				t.Fatalf("%d rows, want %d", len(masked.adv), len(plain.adv))
			}
			zeroed := 0
			for i := range masked.adv {
				was := slices.Contains(plain.mask[i], true)
				if was && !slices.Contains(masked.mask[i], true) {
					zeroed++
					for k, v := range masked.adv[i] {
						if v != 0 {
							t.Fatalf("row %d token %d: masked row has advantage %v, want ±0", i, k, v)
						}
						if tc.unchanged && plain.mask[i][k] && math.Signbit(float64(v)) != math.Signbit(float64(plain.adv[i][k])) {
							t.Fatalf("row %d token %d: %v, want the zero of score %v × 0", i, k, v, plain.adv[i][k])
						}
					}
					continue
				}
				if tc.unchanged && !slices.Equal(masked.adv[i], plain.adv[i]) {
					t.Fatalf("row %d: unmasked row's advantages changed", i)
				}
			}
			if zeroed == 0 {
				t.Fatal("the store has no truncated row with a mask to zero")
			}
		})
	}
}

// TestTrainerAfterOperators: a trainer-side fn after operators that drop
// rows, or mask tokens or set rewards it reads from the store, is refused
// before any output, naming the fn and the way round; rloo, whose scores
// come from the group pass, runs after them (TestGroupFnsAfterOperators).
func TestTrainerAfterOperators(t *testing.T) {
	in := "../fixtures/stores/full.parquet"
	for _, tc := range []struct {
		fn, op string
		want   string // the error's words; "" runs
	}{
		{"rloo", "mask_response_truncated", ""},
		{"reinforceplusplus", "mask_response_truncated", "advantage fn reinforceplusplus after experience operators that mask tokens"},
		{"ppo", "dapo_dynamic_sampling", "advantage fn ppo after experience operators that drop rows"},
		{"reinforceplusplus", "math_dapo_reward", "advantage fn reinforceplusplus after experience operators that set rewards"},
		{"rloo", "math_dapo_reward", ""},
	} {
		t.Run(tc.fn+"/"+tc.op, func(t *testing.T) {
			stages, err := stagesOf(tc.fn, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			op, err := operator.New(operator.Default(), tc.op, nil)
			if err != nil {
				t.Fatal(err)
			}
			stages = append([]Stage{Operators([]Operator{{tc.op, op}})}, stages...)
			out := filepath.Join(t.TempDir(), "out.parquet")
			_, err = Run(context.Background(), Job{In: in, Out: out, Stages: stages})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, schema.ErrBadInput) {
				t.Fatalf("error %v, want a bad-input error saying %q", err, tc.want)
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Errorf("an output was written: %v", serr)
			}
		})
	}
}

// TestGroupFnsAfterOperators: a trainer-side group fn (its row scores from
// the group pass) after operators that mask and drop rows equals the fn run
// over the operators' output written first, as upstream's trainer sees only
// the rows the operators kept.
func TestGroupFnsAfterOperators(t *testing.T) {
	dir := t.TempDir()
	in := "../fixtures/stores/full.parquet"
	names := []string{"mask_response_truncated", "dapo_dynamic_sampling"}
	run := func(in, out, fn string, ops bool) *table {
		t.Helper()
		stages, err := stagesOf(fn, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if ops {
			var chain []Operator
			for _, name := range names {
				op, err := operator.New(operator.Default(), name, nil)
				if err != nil {
					t.Fatal(err)
				}
				chain = append(chain, Operator{name, op})
			}
			stages = append([]Stage{Operators(chain)}, stages...)
		}
		res, err := Run(context.Background(), Job{In: in, Out: out, Stages: stages})
		if err != nil {
			t.Fatal(err)
		}
		if ops && res.Filtered == 0 {
			t.Fatal("the operators dropped no row")
		}
		return readTable(t, out)
	}
	kept := filepath.Join(dir, "kept.parquet")
	run(in, kept, "grpo", true)
	for _, fn := range []string{"rloo", "grpo_verl"} {
		t.Run(fn, func(t *testing.T) {
			one := run(in, filepath.Join(dir, fn+"_one.parquet"), fn, true)
			two := run(kept, filepath.Join(dir, fn+"_two.parquet"), fn, false)
			if !slices.Equal(one.tid, two.tid) || len(one.adv) != len(two.adv) {
				t.Fatalf("%d rows, want the %d the operators kept", len(one.adv), len(two.adv))
			}
			for i := range one.adv {
				if !slices.Equal(one.adv[i], two.adv[i]) || !slices.Equal(one.ret[i], two.ret[i]) {
					t.Fatalf("row %d (%s): advantages or returns differ from the fn over the operators' output", i, one.tid[i])
				}
			}
		})
	}
}
