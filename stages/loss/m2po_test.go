package loss

import (
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// m2poBatch returns a random batch whose log-probs lie on a 1/256 grid, so
// that many second moments tie.
func m2poBatch(rng *rand.Rand, rows int) *tokens.Batch {
	var lp, old, adv, mask [][]float64
	for r := 0; r < rows; r++ {
		n := 1 + rng.Intn(9)
		a := float64(rng.Intn(5)-2) / 2
		var l, o, d, m []float64
		for t := 0; t < n; t++ {
			x := -float64(rng.Intn(512)) / 256
			l, o = append(l, x), append(o, x+float64(rng.Intn(33)-16)/256)
			d, m = append(d, a), append(m, b2f(rng.Intn(4) != 0))
		}
		lp, old, adv, mask = append(lp, l), append(old, o), append(adv, d), append(mask, m)
	}
	b, _ := tokens.FromMatrix(tokens.LogProb, lp)
	_ = b.SetMatrix(tokens.OldLogProb, old)
	_ = b.SetMatrix(tokens.Advantages, adv)
	_ = b.SetMatrix(tokens.ActionMask, mask)
	return b
}

// m2poCrossing returns a batch of one-token rows whose second moments all
// lie in the bin (high 16 bits) of float32(0.04): one below 0.04, ten tied
// above it, so that the mean crosses 0.04 inside that bin and only some of
// the tied tokens are kept.
func m2poCrossing(t *testing.T) *tokens.Batch {
	t.Helper()
	lp := [][]float64{{0.1995}}
	for range 10 {
		lp = append(lp, []float64{0.20008})
	}
	from := math.Float32bits(0.04) >> 16
	for _, r := range lp[:2] {
		x := float32(r[0])
		if v := x * x; math.Float32bits(v)>>16 != from || (v < 0.04) != (r[0] < 0.2) {
			t.Fatalf("second moment %v is not in the bin of 0.04 on the intended side", v)
		}
	}
	zero, one := make([][]float64, len(lp)), make([][]float64, len(lp))
	for i := range lp {
		zero[i], one[i] = []float64{0}, []float64{1}
	}
	b, _ := tokens.FromMatrix(tokens.LogProb, lp)
	_ = b.SetMatrix(tokens.OldLogProb, zero)
	_ = b.SetMatrix(tokens.Advantages, one)
	_ = b.SetMatrix(tokens.ActionMask, one)
	return b
}

// TestM2POStreamEqualsWhole: m2po over a batch handed over in windows of 7
// rows (the radix selection) selects the tokens, and gives the loss, metrics
// and gradient, of the sort over the whole batch, ties at the cut included:
// in one statistics pass while the values from the threshold's bin up fit
// in m2poHeld (the values below the threshold in the crossing bin
// included), in two when they do not.
func TestM2POStreamEqualsWhole(t *testing.T) {
	rng := rand.New(rand.NewSource(24))
	type batchCase struct {
		name string
		b    *tokens.Batch
		thr  float64
	}
	var cases []batchCase
	for _, thr := range []float64{0, 1e-4, 4e-4, 1e-3, 0.04} {
		cases = append(cases, batchCase{"grid", m2poBatch(rng, 60), thr})
	}
	cases = append(cases, batchCase{"crossing in the threshold's bin", m2poCrossing(t), 0.04})
	defer func(n int) { m2poHeld = n }(m2poHeld)
	for _, held := range []int{m2poHeld, 2} {
		m2poHeld = held
		for _, c := range cases {
			l, err := New(Default(), "m2po", args.Values{"m2_threshold": c.thr})
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float64, c.b.Rows.Tokens())
			whole, err := l.Eval(c.b, want)
			if err != nil {
				t.Fatal(err)
			}
			masked := whole.Metrics["m2po/masked_fraction"]
			if c.thr < 0.04 && masked == 0 || c.name != "grid" && (masked == 0 || masked >= 10.0/11) {
				t.Fatalf("%s, threshold %v: masked fraction %v", c.name, c.thr, masked)
			}
			out, grad, passes := evalInWindowsPasses(t, l, c.b, 7)
			wantPasses := 1
			if held == 2 && masked > 0 {
				wantPasses = 2
			}
			if passes != wantPasses {
				t.Errorf("%s, threshold %v, %d held: %d statistics passes, want %d", c.name, c.thr, held, passes, wantPasses)
			}
			close := func(x, y, tol float64) bool { return x == y || math.Abs(x-y) <= tol*math.Max(1, math.Abs(y)) }
			if !close(out.Loss, whole.Loss, 1e-12) {
				t.Errorf("%s, threshold %v, %d held: loss in windows %v, whole %v", c.name, c.thr, held, out.Loss, whole.Loss)
			}
			for k, v := range whole.Metrics {
				tol := 1e-12
				if strings.HasPrefix(k, "m2po/") {
					tol = 1e-6 // float32 statistics, summed in another order
				}
				if got, ok := out.Metrics[k]; !ok || !close(got, v, tol) {
					t.Errorf("%s, threshold %v, %d held: %s in windows %v, whole %v", c.name, c.thr, held, k, got, v)
				}
			}
			for i := range want {
				if !close(grad[i], want[i], 1e-12) {
					t.Fatalf("%s, threshold %v, %d held: gradient %d in windows %v, whole %v", c.name, c.thr, held, i, grad[i], want[i])
				}
			}
		}
	}
}

// TestM2POArgs: upstream's validation (its numeric checks are the
// arguments' ranges).
func TestM2POArgs(t *testing.T) {
	for _, c := range []struct {
		args args.Values
		want string
	}{
		{args.Values{"m2_threshold": -1.0}, "m2_threshold: -1 is outside its valid range [0,inf)"},
		{args.Values{"m2_threshold": math.Inf(1)}, "m2_threshold: +Inf is outside its valid range [0,inf)"},
		{args.Values{"log_ratio_clip": 0.0}, "log_ratio_clip: 0 is outside its valid range (0,inf)"},
		{args.Values{"loss_agg_mode": "seq-mean-token-mean"}, "M2PO requires loss_agg_mode='token-mean'"},
		// upstream: ValueError if batch_num_tokens is not finite or < 0, or dp_size <= 0
		{args.Values{"batch_num_tokens": -1.0}, "batch_num_tokens: -1 is outside its valid range [0,inf)"},
		{args.Values{"batch_num_tokens": math.Inf(1)}, "batch_num_tokens: +Inf is outside"},
		{args.Values{"batch_num_tokens": 4.0, "dp_size": 0}, "dp_size: 0 is outside its valid range [1,inf)"},
		{args.Values{"global_batch_size": 4.0}, "unknown argument global_batch_size"},
	} {
		_, err := New(Default(), "m2po", c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
	l, err := New(Default(), "m2po", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's denominators: Σ L·m / (Σ m + 1e-8) when batch_num_tokens
	// is null (dp_size then unused), else Σ L / max(batch_num_tokens, 1e-8)
	// · (dp_size or 1) — 0 included.
	b := batch(t, lp3, old3, nil, adv3, mask3)
	loss := func(a args.Values) float64 {
		t.Helper()
		l, err := New(Default(), "m2po", a)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Eval(b, make([]float64, b.Rows.Tokens()))
		if err != nil {
			t.Fatal(err)
		}
		return res.Loss
	}
	null := loss(nil)
	sum := null * (9 + 1e-8) // Σ L over the 9 valid tokens
	for _, c := range []struct {
		args args.Values
		want float64
	}{
		{args.Values{"dp_size": int64(4)}, null},
		{args.Values{"batch_num_tokens": 0.0}, sum / 1e-8},
		{args.Values{"batch_num_tokens": 0.0, "dp_size": int64(2)}, sum / 1e-8 * 2},
		{args.Values{"batch_num_tokens": 1e-9}, sum / 1e-8},
		{args.Values{"batch_num_tokens": 18.0, "dp_size": int64(2)}, sum / 9},
	} {
		if got := loss(c.args); math.Abs(got-c.want) > 1e-9*math.Abs(c.want) {
			t.Errorf("%v: loss %v, want %v", c.args, got, c.want)
		}
	}
	if null == 0 {
		t.Fatal("the batch selects no token: the denominators are not tested")
	}
	if got := l.Args; got["m2_threshold"] != 0.04 || got["log_ratio_clip"] != 20.0 || got["loss_agg_mode"] != "token-mean" {
		t.Errorf("default args %v", got)
	}
}

// TestRadixSortStable pins the radix sort to a stable comparison sort on
// keys with many ties and the full bit range.
func TestRadixSortStable(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, n := range []int{0, 1, 7, 1000, 70000} {
		v := make([]uint32, n)
		idx := make([]int, n)
		for i := range v {
			switch i % 3 {
			case 0:
				v[i] = rng.Uint32()
			case 1:
				v[i] = uint32(rng.Intn(8)) << 16
			default:
				v[i] = uint32(rng.Intn(8))
			}
			idx[i] = i
		}
		want := slices.Clone(idx)
		sort.SliceStable(want, func(i, j int) bool { return v[want[i]] < v[want[j]] })
		gotIdx, gotV := radixSort(slices.Clone(idx), slices.Clone(v))
		for k := range want {
			if gotIdx[k] != want[k] || gotV[k] != v[want[k]] {
				t.Fatalf("n=%d: position %d holds index %d (key %d), want index %d (key %d)", n, k, gotIdx[k], gotV[k], want[k], v[want[k]])
			}
		}
	}
}
