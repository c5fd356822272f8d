package agg

import (
	"math"
	"slices"
	"testing"
)

func TestAggregateModes(t *testing.T) {
	// rows: [1 2 3] mask [1 1 0]; [4] mask [0]; [5 NaN] mask [1 0]
	r := NewRows([]int{3, 1, 2})
	v := []float64{1, 2, 3, 4, 5, math.NaN()}
	m := []float64{1, 1, 0, 0, 1, 0}
	tests := []struct {
		mode Mode
		want float64
	}{
		{TokenMean, 8 / (3 + Eps)},
		{SeqMeanTokenSum, (3 + 0 + 5) / 3.0},
		{SeqMeanTokenMean, (3/(2+Eps) + 0 + 5/(1+Eps)) / 3},
		{SeqMeanTokenSumNorm, 8 / (3 + Eps)},
		{TokenSum, 8},
	}
	for _, tc := range tests {
		got := Aggregate(r, v, m, tc.mode)
		if math.Abs(got-tc.want) > 1e-15*math.Abs(tc.want) {
			t.Errorf("%v: got %v, want %v", tc.mode, got, tc.want)
		}
		// Weights are the gradient: Σ w·v over unmasked-finite values equals the aggregate.
		w := make([]float64, len(v))
		Weights(r, m, tc.mode, w)
		s := 0.0
		for i := range v {
			s += sel(v[i], w[i])
		}
		if math.Abs(s-tc.want) > 1e-15*math.Abs(tc.want) {
			t.Errorf("%v: Σ w·v = %v, want %v", tc.mode, s, tc.want)
		}
	}
}

func TestEmptyInputs(t *testing.T) {
	empty := NewRows(nil)
	if got := Aggregate(empty, nil, nil, SeqMeanTokenMean); !math.IsNaN(got) {
		t.Errorf("seq-mean over zero rows = %v, want NaN", got)
	}
	if got := Mean([]float64{math.Inf(1)}, []float64{0}); got != 0 {
		t.Errorf("mean of an all-masked row = %v, want 0", got)
	}
	if _, err := Var([]float64{1}, []float64{1}, true); err != ErrOneMask {
		t.Errorf("unbiased var of one value: err = %v", err)
	}
	if _, err := Var([]float64{1}, []float64{0}, true); err != ErrEmptyMask {
		t.Errorf("unbiased var of none: err = %v", err)
	}
}

func TestWhitenAndParseMode(t *testing.T) {
	v := []float64{1, 2, 3, 100}
	m := []float64{1, 1, 1, 0}
	out := make([]float64, 4)
	if err := Whiten(out, v, m, true); err != nil {
		t.Fatal(err)
	}
	// mean 2, unbiased var 1 (up to the 1e-8 epsilons); the masked value is whitened too
	for i, want := range []float64{-1, 0, 1, 98} {
		if math.Abs(out[i]-want) > 1e-7*math.Max(1, math.Abs(want)) {
			t.Errorf("whiten[%d] = %v, want ≈ %v", i, out[i], want)
		}
	}
	for _, name := range []string{"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm", "token-sum"} {
		if md, err := ParseMode(name); err != nil || md.String() != name {
			t.Errorf("ParseMode(%q) = %v, %v", name, md, err)
		}
	}
	if _, err := ParseMode("seq-sum"); err == nil {
		t.Error("ParseMode accepts an unknown mode")
	}
}

// TestRowsChunks: runs of whole rows of at least n tokens, the last run
// whatever is left; no rows gives [0], rows without tokens join a run.
func TestRowsChunks(t *testing.T) {
	for _, tc := range []struct {
		lens []int
		n    int
		want []int
	}{
		{nil, 4, []int{0}},
		{[]int{0, 0, 0}, 4, []int{0, 3}},
		{[]int{2, 2, 2, 2, 1}, 4, []int{0, 2, 4, 5}},
		{[]int{5, 1, 3}, 4, []int{0, 1, 3}},
		{[]int{1, 2, 3}, 100, []int{0, 3}},
		{[]int{0, 4, 0, 4}, 4, []int{0, 2, 4}},
	} {
		if got := NewRows(tc.lens).Chunks(tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("rows %v, %d tokens: %v, want %v", tc.lens, tc.n, got, tc.want)
		}
	}
}
