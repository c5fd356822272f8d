package tokens

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
)

// TestAliasesResolve: a batch takes an input under verl's name and gives it
// back under the canonical one.
func TestAliasesResolve(t *testing.T) {
	for in, want := range map[string]string{
		"log_prob": LogProb, "old_log_probs": OldLogProb, "ref_log_prob": RefLogProb, "response_mask": ActionMask,
		"entropys": Entropy, "teacher_logprobs": TeacherLogProb, "advantages": Advantages, "rollout_is_weights": RolloutISWeights,
	} {
		b := New(agg.NewRows([]int{2}))
		if err := b.Set(in, []float64{1, 0.5}); err != nil {
			t.Fatalf("Set(%q): %v", in, err)
		}
		if !b.Has(want) || b.Col(want) == nil {
			t.Errorf("Set(%q): no input %s", in, want)
		}
	}
}

func TestBatchInputs(t *testing.T) {
	b := New(agg.NewRows([]int{2, 3}))
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"short column", b.Set("old_log_probs", []float64{1}), "input old_logprob has 1 tokens, the batch has 5"},
		{"unknown column", b.Set("rewardz", make([]float64, 5)), `unknown token input "rewardz"`},
		{"ragged row", b.SetMatrix(LogProb, [][]float64{{1, 2}, {3}}), "input logprob row 1 has 1 tokens, want 3"},
		{"expert rows", b.SetExpertMask([]bool{true}), "expert_mask has 1 rows, the batch has 2"},
		{"missing", b.Require(LogProb, "ref_log_prob"), "missing input logprob, ref_logprob (batch has: )"},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, schema.ErrBadInput) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	if err := b.Set("response_mask", []float64{1, 0, 1, 1, 0.5}); err != nil {
		t.Fatal(err)
	}
	if b.RowCount(0) != 1 || b.RowCount(1) != 2.5 || b.MaskTotal() != 3.5 || !b.Has(ActionMask) {
		t.Errorf("counts %v %v %v", b.RowCount(0), b.RowCount(1), b.MaskTotal())
	}
}

// TestBatchFloat32: an input set by Set32 is present (Has, Require) and
// read by Col32 alone, a window (Slice) keeps its rows' values, and a
// short column, an unknown name or action_mask is refused.
func TestBatchFloat32(t *testing.T) {
	b := New(agg.NewRows([]int{2, 3}))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"short column", b.Set32(LogProb, []float32{1}), "input logprob has 1 tokens, the batch has 5"},
		{"unknown column", b.Set32("rewardz", make([]float32, 5)), `unknown float32 token input "rewardz"`},
		{"mask", b.Set32("response_mask", make([]float32, 5)), `unknown float32 token input "action_mask"`},
	} {
		if !errors.Is(tc.err, schema.ErrBadInput) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	if err := b.Set32("old_log_probs", []float32{1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	if !b.Has(OldLogProb) || b.Require(OldLogProb) != nil || b.Col(OldLogProb) != nil || b.Has(LogProb) {
		t.Errorf("has %v, require %v, col %v, has logprob %v", b.Has(OldLogProb), b.Require(OldLogProb), b.Col(OldLogProb), b.Has(LogProb))
	}
	if got := b.Slice(1, 2).Col32(OldLogProb); !slices.Equal(got, []float32{3, 4, 5}) {
		t.Errorf("window of row 1: %v", got)
	}
}

// sumKernel adds c·Σ m·x and writes grad = GradScale·m; it counts rows.
type sumKernel struct{}

func (sumKernel) Sums() int { return 2 }
func (sumKernel) Row(r *Row, s []float64) {
	for t, m := range r.Mask {
		s[0] += r.Scale * m * r.LP[t]
		r.Grad[t] = r.GradScale * m
	}
	s[1]++
}

func TestEval(t *testing.T) {
	b, err := FromMatrix(LogProb, [][]float64{{1, 2}, {3, 4, 5}, {6}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetMatrix(ActionMask, [][]float64{{1, 1}, {1, 0, 1}, {1}}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetExpertMask([]bool{false, true, false}); err != nil {
		t.Fatal(err)
	}
	grad := make([]float64, 6)
	for i := range grad {
		grad[i] = 99 // stale values must be overwritten
	}
	res, err := b.Eval(grad, Term{Kernel: sumKernel{}, Rows: UsualRows, Mode: agg.TokenMean, Coef: 2})
	if err != nil {
		t.Fatal(err)
	}
	st := res[0].Stats
	if st.Rows != 2 || st.Total != 3 || st.Width != 3 || res[0].Sums[1] != 2 {
		t.Errorf("stats %+v sums %v", st, res[0].Sums)
	}
	if want := (1 + 2 + 6) / (3 + agg.Eps); res[0].Sums[0] != want {
		t.Errorf("sum %v, want %v", res[0].Sums[0], want)
	}
	c := 2 / (3 + agg.Eps)
	for i, want := range []float64{c, c, 0, 0, 0, c} { // the expert row is not covered: zeroed
		if grad[i] != want {
			t.Errorf("grad = %v", grad)
			break
		}
	}
	if _, err := b.Eval(grad[:2], Term{Kernel: sumKernel{}}); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("short grad: %v", err)
	}
}

// TestMaskCountsOverTheCores: setting a mask of several spans gives each
// row's count and the total, added in row order, as one loop does, at
// GOMAXPROCS 1 and 8.
func TestMaskCountsOverTheCores(t *testing.T) {
	src := Synthetic(300, 517, 3) // 155,100 tokens: three spans
	mask := src.Col(ActionMask)
	for i := range mask {
		if i%5 == 0 {
			mask[i] = 0.1 * float64(i%9) // fractional: the order of the adds shows
		}
	}
	for _, procs := range []int{1, 8} {
		prev := runtime.GOMAXPROCS(procs)
		b := New(src.Rows)
		if err := b.Set(ActionMask, mask); err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for r := range b.counts {
			lo, hi := b.Rows.Span(r)
			c := 0.0
			for _, m := range mask[lo:hi] {
				c += m
			}
			if b.counts[r] != c {
				t.Fatalf("GOMAXPROCS %d: row %d counts %v, want %v", procs, r, b.counts[r], c)
			}
			total += c
		}
		if math.Float64bits(b.total) != math.Float64bits(total) {
			t.Errorf("GOMAXPROCS %d: total %v, want %v", procs, b.total, total)
		}
		runtime.GOMAXPROCS(prev)
	}
}
