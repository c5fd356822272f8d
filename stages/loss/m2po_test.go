package loss

import (
	"maps"
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

// float32Inputs returns b with its log-probs and advantages moved by up to
// 1e-3 and rounded to float32, as a store of float32 columns holds them:
// converted to float64 (what the evaluation reads), and as float32 with
// the mask alone converted (what the statistics passes read, Set32).
func float32Inputs(t *testing.T, rng *rand.Rand, b *tokens.Batch) (b64, b32 *tokens.Batch) {
	t.Helper()
	b64, b32 = tokens.New(b.Rows), tokens.New(b.Rows)
	for _, bb := range []*tokens.Batch{b64, b32} {
		if err := bb.Set(tokens.ActionMask, b.Col(tokens.ActionMask)); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range []string{tokens.LogProb, tokens.OldLogProb, tokens.Advantages} {
		v64, v32 := make([]float64, b.Rows.Tokens()), make([]float32, b.Rows.Tokens())
		for i, x := range b.Col(in) {
			v32[i] = float32(x + (rng.Float64()-0.5)*2e-3)
			v64[i] = float64(v32[i])
		}
		if err := b64.Set(in, v64); err != nil {
			t.Fatal(err)
		}
		if err := b32.Set32(in, v32); err != nil {
			t.Fatal(err)
		}
	}
	return b64, b32
}

// TestM2POStreamFloat32: m2po's statistics passes over float32 inputs as
// stored (Set32) select the tokens the passes over the converted inputs
// select: the same loss, metrics and gradient, bit for bit, in one pass
// and in two.
func TestM2POStreamFloat32(t *testing.T) {
	rng := rand.New(rand.NewSource(40))
	defer func(n int) { m2poHeld = n }(m2poHeld)
	for _, held := range []int{m2poHeld, 2} {
		m2poHeld = held
		for _, thr := range []float64{0, 1e-4, 4e-4, 1e-3, 0.04} {
			b64, b32 := float32Inputs(t, rng, m2poBatch(rng, 60))
			l, err := New(Default(), "m2po", args.Values{"m2_threshold": thr})
			if err != nil {
				t.Fatal(err)
			}
			want, wantGrad, wantPasses := evalInWindowsPasses(t, l, b64, 7)
			if thr < 0.04 && want.Metrics["m2po/masked_fraction"] == 0 {
				t.Fatalf("threshold %v: nothing masked", thr)
			}
			got, grad, passes := evalObserving(t, l, b64, b32, 7)
			if passes != wantPasses || got.Loss != want.Loss || !maps.Equal(got.Metrics, want.Metrics) || !slices.Equal(grad, wantGrad) {
				t.Errorf("threshold %v, %d held: float32 passes: %d passes, loss %v, metrics %v; converted: %d, %v, %v",
					thr, held, passes, got.Loss, got.Metrics, wantPasses, want.Loss, want.Metrics)
			}
		}
	}
	// An input missing as float32 and as float64 is refused, naming it.
	b64, b32 := float32Inputs(t, rng, m2poBatch(rng, 4))
	mixed := tokens.New(b64.Rows)
	_ = mixed.Set(tokens.ActionMask, b64.Col(tokens.ActionMask))
	_ = mixed.Set(tokens.LogProb, b64.Col(tokens.LogProb))
	_ = mixed.Set32(tokens.OldLogProb, b32.Col32(tokens.OldLogProb))
	_ = mixed.Set32(tokens.Advantages, b32.Col32(tokens.Advantages))
	l, _ := New(Default(), "m2po", args.Values{"m2_threshold": 1e-4})
	s, _ := l.Stream()
	if err := s.Observe(0, mixed); err == nil || !strings.Contains(err.Error(), "all as float64 or all as float32") {
		t.Errorf("inputs of both types: %v", err)
	}
}

// TestM2POWindowMaskUntilKeptTies: a window takes a mask only until the
// windows have met every tie at the cut value that is kept; after, the
// kernel drops the tokens from the cut value up by itself.
func TestM2POWindowMaskUntilKeptTies(t *testing.T) {
	b := m2poCrossing(t) // row 0 below the threshold, rows 1..10 tied
	l, err := New(Default(), "m2po", args.Values{"m2_threshold": 0.04})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := l.Stream()
	tot := tokens.TotalsOf(b)
	window := func(r int) *tokens.Batch {
		w := b.Slice(r, r+1)
		if err := w.SetWindow(r, tot); err != nil {
			t.Fatal(err)
		}
		return w
	}
	for r := range b.Rows.N() {
		if err := s.Observe(0, window(r)); err != nil {
			t.Fatal(err)
		}
	}
	st := s.impl.(*m2poStream)
	for r := range b.Rows.N() {
		if err := s.Window(window(r)); err != nil {
			t.Fatal(err)
		}
		if st.ties < 1 || st.ties >= 10 {
			t.Fatalf("%d ties kept, want some of the ten", st.ties)
		}
		if masked := st.cur.Keep != nil; masked != (r <= int(st.ties)) {
			t.Errorf("row %d (%d ties kept): mask %v, want %v", r, st.ties, masked, r <= int(st.ties))
		}
		if st.cur.Keep == nil && st.cur.Cut != st.cut {
			t.Errorf("row %d: cut %#x, want %#x", r, st.cur.Cut, st.cut)
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
