package agg

import (
	"math"
	"math/rand/v2"
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
// for every mode, sum-norm included (verl at 1dda039b: its value is
// seq-mean-token-sum's divided by F).
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
		for mode := TokenMean; mode <= SeqMeanTokenSumNorm; mode++ {
			whole := g
			whole.DPSize = 1
			grad := make([]float64, r.Tokens())
			want := whole.Loss(r, v, m, mode, grad)
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
// without epsilon, seq-means over the non-empty rows, sum-norm the
// seq-mean-token-sum over T.
func TestGlobalLocal(t *testing.T) {
	r := NewRows([]int{3, 2, 2})
	v := []float64{1, 2, 3, 4, 5, 6, math.Inf(1)}
	m := []float64{1, 1, 0, 0, 0, 1, 0}
	tests := []struct {
		mode Mode
		want float64
	}{
		{TokenMean, 9.0 / 3},
		{SeqMeanTokenSum, math.NaN()},     // inf·0 in a partly valid row poisons it, as upstream
		{SeqMeanTokenSumNorm, math.NaN()}, // likewise
		{SeqMeanTokenMean, math.NaN()},
	}
	for _, tc := range tests {
		if got := (Global{}).Loss(r, v, m, tc.mode, nil); !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) {
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
		{SeqMeanTokenSumNorm, (3.0 + 6) / 2 / 3},
	} {
		grad := make([]float64, len(v))
		if got := (Global{}).Loss(r, v, m, tc.mode, grad); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("%v: %v, want %v", tc.mode, got, tc.want)
		}
		if grad[2] != 0 || grad[3] != 0 || grad[0] == 0 {
			t.Errorf("%v: grad %v: want 0 exactly at masked tokens", tc.mode, grad)
		}
	}
	empty := []float64{0, 0, 0, 0, 0, 0, 0}
	if got := (Global{}).Loss(r, v, empty, TokenMean, nil); !math.IsNaN(got) {
		t.Errorf("empty micro-batch, local token-mean: %v, want NaN", got)
	}
	if got := (Global{BatchNumTokens: 10, DPSize: 2}).Loss(r, v, empty, TokenMean, nil); got != 0 {
		t.Errorf("empty micro-batch, global token-mean: %v, want 0", got)
	}
}

// TestComposeLegacy: each micro-batch's local loss times 1/GA (or
// rows/mini-batch with dynamic batch size), averaged over the ranks.
func TestComposeLegacy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	var mbs []MicroBatch
	for i := 0; i < 4; i++ {
		r, v, m := randomBatch(rng, 2+i)
		for m[0] == 0 { // a valid token in every micro-batch
			m[0] = 1
		}
		mbs = append(mbs, MicroBatch{Rank: i % 2, Rows: r, Loss: v, Mask: m})
	}
	for _, dyn := range []bool{false, true} {
		c, err := ComposeLegacy(mbs, TokenMean, Legacy{DPSize: 2, MiniBatchSize: 8, MicroBatchSizePerGPU: 2, DynamicBatchSize: dyn})
		if err != nil {
			t.Fatal(err)
		}
		want := 0.0
		for i, mb := range mbs {
			s := 1 / 4.0
			if dyn {
				s = float64(mb.Rows.N()) / 8
			}
			l := Sum(mb.Loss, mb.Mask) / Count(mb.Mask) * s
			if math.Abs(c.MicroLosses[i]-l) > 1e-15 {
				t.Errorf("dynamic=%v micro %d: %v, want %v", dyn, i, c.MicroLosses[i], l)
			}
			want += l / 2
		}
		if math.Abs(c.Objective-want) > 1e-15 {
			t.Errorf("dynamic=%v: objective %v, want %v", dyn, c.Objective, want)
		}
	}
	if _, err := ComposeLegacy(mbs, TokenMean, Legacy{DPSize: 2, MiniBatchSize: 1, MicroBatchSizePerGPU: 2}); err == nil {
		t.Error("micro-batch larger than the mini-batch: no error")
	}
	if _, err := ComposeEngine(mbs, TokenMean, Global{DPSize: 1}); err == nil {
		t.Error("rank 1 with dp_size 1: no error")
	}
}
