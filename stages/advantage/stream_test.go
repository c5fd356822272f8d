package advantage

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rftpipe/rftpipe/stages/agg"
)

// synthTokenBatch returns a seeded trainer batch with every column a
// trainer-side fn reads: 8 groups of 5 rows of 3..12 tokens.
func synthTokenBatch(seed uint64) (*TokenBatch, []int32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	const rows = 40
	lens := make([]int, rows)
	ids := make([]int32, rows)
	for r := range lens {
		lens[r] = 3 + rng.IntN(10)
		ids[r] = int32(r / 5)
	}
	b := &TokenBatch{Rows: agg.NewRows(lens)}
	n := b.Rows.Tokens()
	col := func(f func(i int) float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = f(i)
		}
		return v
	}
	b.Mask = col(func(int) float64 { return float64(rng.IntN(5)/4 ^ 1) })
	b.TokenLevelRewards = col(func(int) float64 { return rng.NormFloat64() })
	b.Values = col(func(int) float64 { return rng.NormFloat64() })
	b.OldLogprobs = col(func(int) float64 { return -rng.ExpFloat64() })
	b.RolloutLogprobs = col(func(i int) float64 { return b.OldLogprobs[i] + 0.05*rng.NormFloat64() })
	b.TeacherLogprobs = col(func(int) float64 { return -rng.ExpFloat64() })
	b.Entropys = col(func(int) float64 { return 3 * rng.Float64() })
	b.Necs = col(func(int) float64 { return rng.NormFloat64() })
	for r := 0; r < rows; r++ {
		b.RewardBaselines = append(b.RewardBaselines, rng.Float64())
	}
	g, _ := GroupByIDs(ids, rows/5)
	b.Groups = g
	return b, ids
}

// window returns rows [lo, hi) of b as a Chunk.
func window(b *TokenBatch, ids []int32, lo, hi int) *Chunk {
	t0, t1 := b.Rows.Off[lo], b.Rows.Off[hi]
	lens := make([]int, hi-lo)
	for r := lo; r < hi; r++ {
		lens[r-lo] = b.Rows.Off[r+1] - b.Rows.Off[r]
	}
	cut := func(v []float64) []float64 { return v[t0:t1:t1] }
	return &Chunk{First: lo, Group: ids[lo:hi], TokenBatch: TokenBatch{
		Rows: agg.NewRows(lens), Mask: cut(b.Mask), TokenLevelRewards: cut(b.TokenLevelRewards),
		Values: cut(b.Values), OldLogprobs: cut(b.OldLogprobs), RolloutLogprobs: cut(b.RolloutLogprobs),
		TeacherLogprobs: cut(b.TeacherLogprobs), Entropys: cut(b.Entropys), Necs: cut(b.Necs),
		RewardBaselines: b.RewardBaselines[lo:hi],
	}}
}

// TestStreamEqualsCompute runs every trainer-side fn over a batch whole
// (Compute) and in windows (Stream): advantages, returns, masks and metrics
// agree to 1e-12.
func TestStreamEqualsCompute(t *testing.T) {
	reg := Default()
	b, ids := synthTokenBatch(3)
	cuts := []int{0, 7, 8, 23, 40}
	for _, name := range reg.Names() {
		s, _ := reg.Get(name)
		if s.New.Side() != TrainerSide {
			continue
		}
		t.Run(name, func(t *testing.T) {
			fn, err := Trainer(reg, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := fn.Compute(b)
			if err != nil {
				t.Fatal(err)
			}
			st := fn.Stream()
			for p := 0; p < st.Passes(); p++ {
				for k := 0; k+1 < len(cuts); k++ {
					if err := st.Observe(p, window(b, ids, cuts[k], cuts[k+1])); err != nil {
						t.Fatal(err)
					}
				}
			}
			var adv, ret, mask []float64
			for k := 0; k+1 < len(cuts); k++ {
				res, err := st.Apply(window(b, ids, cuts[k], cuts[k+1]))
				if err != nil {
					t.Fatal(err)
				}
				adv, ret, mask = append(adv, res.Advantages...), append(ret, res.Returns...), append(mask, res.Mask...)
			}
			same(t, "advantages", adv, want.Advantages)
			same(t, "returns", ret, want.Returns)
			if want.Mask != nil {
				same(t, "mask", mask, want.Mask)
			}
			got := st.Metrics()
			for k, v := range want.Metrics {
				same(t, k, []float64{got[k]}, []float64{v})
			}
		})
	}
}

// TestRowScores hands the group fns their row scores directly.
func TestRowScores(t *testing.T) {
	b, ids := synthTokenBatch(4)
	for _, name := range []string{"grpo_verl", "rloo", "opmd_verl", "asymre_verl"} {
		fn, err := Trainer(Default(), name, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fn.Compute(b)
		if err != nil {
			t.Fatal(err)
		}
		st := fn.Stream()
		rs, ok := st.(RowScored)
		if !ok {
			t.Fatalf("%s: streamed form takes no row scores", name)
		}
		if err := rs.SetRowScores(b.rowSums(b.TokenLevelRewards), ids); err != nil {
			t.Fatal(err)
		}
		if st.Passes() != 0 {
			t.Fatalf("%s: %d passes with row scores given", name, st.Passes())
		}
		res, err := st.Apply(window(b, ids, 0, 40))
		if err != nil {
			t.Fatal(err)
		}
		same(t, name, res.Advantages, want.Advantages)
		n := b.Rows.N()
		if _, err := rs.RowScores(n-1, 2); err == nil {
			t.Fatalf("%s: RowScores past the %d rows: no error", name, n)
		}
		score, err := rs.RowScores(n-1, 1)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := b.Rows.Span(n - 1)
		for k := lo; k < hi; k++ {
			same(t, name+" last row", []float64{score[0] * b.Mask[k]}, want.Advantages[k:k+1])
		}
	}
}

func same(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		a, b := got[i], want[i]
		if a == b || (math.IsNaN(a) && math.IsNaN(b)) || math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b)) {
			continue
		}
		t.Fatalf("%s[%d] = %v, whole batch %v", what, i, a, b)
	}
}
