package agg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomBatch is a seeded batch of rows of random lengths with random
// masks (some rows empty) and loss values.
func randomBatch(rng *rand.Rand, rows int) (r Rows, v, m []float64) {
	lens := make([]int, rows)
	for i := range lens {
		lens[i] = 1 + rng.IntN(9)
	}
	r = NewRows(lens)
	v, m = make([]float64, r.Tokens()), make([]float64, r.Tokens())
	for b := 0; b < rows; b++ {
		lo, hi := r.Span(b)
		empty := rng.IntN(5) == 0
		for i := lo; i < hi; i++ {
			v[i] = rng.NormFloat64()
			if !empty && rng.IntN(4) != 0 {
				m[i] = 1
			}
		}
	}
	return r, v, m
}

// TestPiecesSumToWhole: split a mini-batch at random into micro-batches on
// D ranks; with the global denominators of the whole mini-batch the
// composed objective and gradient equal the whole batch's agg_loss (D = 1),
// for every mode.
func TestPiecesSumToWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 20; trial++ {
		rows := 4 + rng.IntN(12)
		r, v, m := randomBatch(rng, rows)
		g := Global{DPSize: 1 + rng.IntN(4), BatchNumTokens: Count(m), GlobalBatchSize: float64(rows), LossScaleFactor: 16}
		var mbs []MicroBatch
		for lo := 0; lo < rows; {
			hi := min(rows, lo+1+rng.IntN(4))
			lens := make([]int, hi-lo)
			for i := range lens {
				a, b := r.Span(lo + i)
				lens[i] = b - a
			}
			t0, _ := r.Span(lo)
			_, t1 := r.Span(hi - 1)
			mbs = append(mbs, MicroBatch{Rank: rng.IntN(g.DPSize), Rows: NewRows(lens), Loss: v[t0:t1], Mask: m[t0:t1]})
			lo = hi
		}
		for mode := TokenMean; mode <= TokenSum; mode++ {
			whole := g
			whole.DPSize = 1
			grad := make([]float64, r.Tokens())
			want, err := whole.Loss(r, v, m, mode, grad)
			if err != nil {
				t.Fatal(err)
			}
			c, err := ComposeEngine(mbs, mode, g)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(c.Objective-want) > 1e-12*(1+math.Abs(want)) {
				t.Errorf("trial %d %v: pieces %v, whole %v", trial, mode, c.Objective, want)
			}
			i := 0
			for _, gm := range c.Grad {
				for _, x := range gm {
					if math.Abs(x-grad[i]) > 1e-15 {
						t.Errorf("trial %d %v: grad[%d] pieces %v, whole %v", trial, mode, i, x, grad[i])
					}
					i++
				}
			}
		}
	}
}

// TestGlobalLocal: with no field set, verl's local agg_loss — token-mean
// without epsilon, token-sum the masked sum, seq-means over the non-empty
// rows, sum-norm the seq-mean-token-sum value over T.
func TestGlobalLocal(t *testing.T) {
	r := NewRows([]int{3, 2, 2})
	v := []float64{1, 2, 3, 4, 5, 6, math.Inf(1)}
	m := []float64{1, 1, 0, 0, 0, 1, 0}
	tests := []struct {
		mode Mode
		want float64
	}{
		{TokenMean, 9.0 / 3},
		{TokenSum, 9},
		{SeqMeanTokenSum, math.NaN()},     // inf·0 in a partly valid row poisons it, as upstream
		{SeqMeanTokenSumNorm, math.NaN()}, // likewise
		{SeqMeanTokenMean, math.NaN()},
	}
	for _, tc := range tests {
		if got, _ := (Global{}).Loss(r, v, m, tc.mode, nil); !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("%v: %v, want %v", tc.mode, got, tc.want)
		}
	}
	v[6] = 7
	for _, tc := range []struct {
		mode Mode
		want float64
	}{
		{SeqMeanTokenSum, (3.0 + 6) / 2},
		{SeqMeanTokenMean, (3/(2+Eps) + 6/(1+Eps)) / 2},
		{SeqMeanTokenSumNorm, (3.0 + 6) / 2 / 3}, // the empty row 1 is left out
		{TokenSum, 9},
	} {
		grad := make([]float64, len(v))
		if got, _ := (Global{}).Loss(r, v, m, tc.mode, grad); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("%v: %v, want %v", tc.mode, got, tc.want)
		}
		if grad[2] != 0 || grad[3] != 0 || grad[0] == 0 {
			t.Errorf("%v: grad %v: want 0 exactly at masked tokens", tc.mode, grad)
		}
	}
	empty := []float64{0, 0, 0, 0, 0, 0, 0}
	for _, tc := range []struct {
		g    Global
		mode Mode
		want float64
	}{
		{Global{}, TokenMean, math.NaN()},
		{Global{}, SeqMeanTokenSumNorm, math.NaN()},
		{Global{}, TokenSum, 0},
		{Global{BatchNumTokens: 10, DPSize: 2}, TokenMean, 0},
		{Global{GlobalBatchSize: 4, DPSize: 2}, SeqMeanTokenSumNorm, 0},
	} {
		if got, _ := tc.g.Loss(r, v, empty, tc.mode, nil); !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("empty micro-batch, %+v %v: %v, want %v", tc.g, tc.mode, got, tc.want)
		}
	}
}

// TestGlobalCheck: with dp_size > 1 a mode's missing global count is
// verl's error (token-sum needs none); dp_size 1 falls back to local.
func TestGlobalCheck(t *testing.T) {
	r := NewRows([]int{2})
	v, m := []float64{1, 2}, []float64{1, 1}
	tests := []struct {
		g       Global
		mode    Mode
		wantErr string
	}{
		{Global{DPSize: 2}, TokenMean, "(global) batch_num_tokens is required when dp_size > 1"},
		{Global{DPSize: 2, GlobalBatchSize: 8}, TokenMean, "(global) batch_num_tokens is required when dp_size > 1"},
		{Global{DPSize: 2, BatchNumTokens: 8}, TokenMean, ""},
		{Global{DPSize: 2, BatchNumTokens: 8}, SeqMeanTokenSum, "global_batch_size is required when dp_size > 1"},
		{Global{DPSize: 2, BatchNumTokens: 8}, SeqMeanTokenMean, "global_batch_size is required when dp_size > 1"},
		{Global{DPSize: 2, LossScaleFactor: 4}, SeqMeanTokenSumNorm, "global_batch_size is required when dp_size > 1"},
		{Global{DPSize: 2, GlobalBatchSize: 8}, SeqMeanTokenSumNorm, ""},
		{Global{DPSize: 2}, TokenSum, ""},
		{Global{DPSize: 1}, TokenMean, ""},
		{Global{}, SeqMeanTokenMean, ""},
	}
	for _, tc := range tests {
		err := tc.g.Check(tc.mode)
		if got := fmt.Sprint(err); (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(got, tc.wantErr) {
			t.Errorf("%+v %v: error %v, want %q", tc.g, tc.mode, err, tc.wantErr)
		}
		if _, lerr := tc.g.Loss(r, v, m, tc.mode, nil); (lerr == nil) != (err == nil) {
			t.Errorf("%+v %v: Loss error %v, Check error %v", tc.g, tc.mode, lerr, err)
		}
	}
}

// TestComposeRanks: a micro-batch's rank must lie in 0..dp_size−1.
func TestComposeRanks(t *testing.T) {
	r := NewRows([]int{2})
	mbs := []MicroBatch{{Rank: 1, Rows: r, Loss: []float64{1, 2}, Mask: []float64{1, 1}}}
	if _, err := ComposeEngine(mbs, TokenSum, Global{DPSize: 1}); err == nil {
		t.Error("rank 1 with dp_size 1: no error")
	}
	if _, err := ComposeEngine(mbs, TokenSum, Global{DPSize: 2}); err != nil {
		t.Errorf("rank 1 with dp_size 2: %v", err)
	}
}
