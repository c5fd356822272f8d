package loss

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/parallel"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// TestVerl2026GradientFiniteDifference checks dLoss/dlogprob of clip_cov,
// kl_cov and dro (with IS weights and verl's aggregation) against central
// differences; the selections do not move within ±h. DPPO's value holds lp
// under stop-gradients (V26-02): its gradient is checked by the vectors.
func TestVerl2026GradientFiniteDifference(t *testing.T) {
	tests := []struct {
		loss string
		args args.Values
	}{
		{"clip_cov", args.Values{"clip_cov_ratio": 0.2, "clip_cov_lb": -1.0, "clip_cov_ub": 1.0}},
		{"clip_cov", args.Values{"clip_cov_ratio": 0.1, "clip_cov_lb": -1.0, "loss_agg_mode": "seq-mean-token-mean", "global_batch_size": 7.0}},
		{"kl_cov", args.Values{"kl_cov_ratio": 0.3, "ppo_kl_coef": 2.0, "dp_size": 2, "batch_num_tokens": 21.0}},
		{"kl_cov", args.Values{"kl_cov_ratio": 0.5, "loss_agg_mode": "seq-mean-token-sum-norm"}},
		{"dro", args.Values{"dro_beta": 0.7, "loss_agg_mode": "seq-mean-token-sum"}},
	}
	for _, tc := range tests {
		b := weighted(t, nil)
		res, grad := eval(t, tc.loss, tc.args, b)
		checkFiniteDifference(t, tc.loss, tc.args, b, grad)
		if tc.loss == "clip_cov" && res.Metrics["pg_clipfrac"] == 0 {
			t.Errorf("%s %v: no token clipped, the case checks nothing of the selection", tc.loss, tc.args)
		}
	}
}

// TestCovWindows: clip_cov and kl_cov choose their tokens over the whole
// batch, so the batch streamed in windows (Loss.Stream) gives the bits of
// the batch evaluated at once: the same gradient bits (the same tokens
// chosen), the sums equal up to their order of addition. The batch of 48
// rows spans several runs of rows of the statistics passes, evaluated on
// one thread and on eight: the same bits again.
func TestCovWindows(t *testing.T) {
	small, large := tokens.Synthetic(24, 40, 5), tokens.Synthetic(48, 3000, 6)
	for _, tc := range []struct {
		loss string
		args args.Values
		b    *tokens.Batch
	}{
		{"clip_cov", args.Values{"clip_cov_ratio": 0.02, "clip_cov_lb": 0.2, "seed": 9}, small},
		{"clip_cov", args.Values{"clip_cov_ratio": 0.5, "clip_cov_lb": 0.2, "loss_agg_mode": "seq-mean-token-mean"}, small},
		{"kl_cov", args.Values{"kl_cov_ratio": 0.01}, small},
		{"kl_cov", args.Values{"kl_cov_ratio": 0.3, "loss_agg_mode": "seq-mean-token-sum"}, small},
		{"clip_cov", args.Values{"clip_cov_ratio": 0.001, "clip_cov_lb": 0.2, "seed": 4}, large},
		{"kl_cov", args.Values{"kl_cov_ratio": 0.002}, large},
	} {
		b := tc.b
		if b.Rows.Tokens() > parallel.SpanSize && len(b.Rows.Chunks(parallel.SpanSize)) < 3 {
			t.Fatalf("%d tokens in fewer than 2 runs of rows", b.Rows.Tokens())
		}
		prev := runtime.GOMAXPROCS(1)
		one, oneGrad := eval(t, tc.loss, tc.args, b)
		runtime.GOMAXPROCS(8)
		whole, grad := eval(t, tc.loss, tc.args, b)
		runtime.GOMAXPROCS(prev)
		if math.Float64bits(one.Loss) != math.Float64bits(whole.Loss) || !equalBits(oneGrad, grad) {
			t.Errorf("%s %v: loss %v on one thread, %v on eight, or another gradient", tc.loss, tc.args, one.Loss, whole.Loss)
		}
		l, err := New(Default(), tc.loss, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		for _, rows := range []int{1, 5, 24} {
			out, wgrad := evalInWindows(t, l, b, rows)
			if !near(out.Loss, whole.Loss) {
				t.Errorf("%s %v, windows of %d rows: loss %v, whole %v", tc.loss, tc.args, rows, out.Loss, whole.Loss)
			}
			for k, v := range whole.Metrics {
				if !near(out.Metrics[k], v) {
					t.Errorf("%s %v, windows of %d rows: %s %v, whole %v", tc.loss, tc.args, rows, k, out.Metrics[k], v)
				}
			}
			for i := range grad {
				if math.Float64bits(grad[i]) != math.Float64bits(wgrad[i]) {
					t.Fatalf("%s %v, windows of %d rows: grad[%d] %v, whole %v", tc.loss, tc.args, rows, i, wgrad[i], grad[i])
				}
			}
		}
		win := b.Slice(0, 5)
		if err := win.SetWindow(0, tokens.TotalsOf(b)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Plan(win); err == nil || !strings.Contains(err.Error(), "whole batch") {
			t.Errorf("%s planned on a window without its stream: error %v", tc.loss, err)
		}
	}
}

// TestClipCovSeed: clip_cov clips min(K, n) of its n candidates, chosen by
// the seed: the same seed the same tokens, other seeds other tokens.
func TestClipCovSeed(t *testing.T) {
	b := tokens.Synthetic(16, 32, 3)
	a := func(seed int) args.Values {
		return args.Values{"clip_cov_ratio": 0.01, "clip_cov_lb": 0.1, "clip_cov_ub": 100.0, "seed": seed}
	}
	n := b.MaskTotal()
	k := math.Floor(0.01 * n)
	res, grad := eval(t, "clip_cov", a(1), b)
	if got := res.Metrics["pg_clipfrac"] * (n + 1e-8); math.Abs(got-k) > 1e-6 {
		t.Fatalf("clipped %v tokens, want K = %v", got, k)
	}
	again, same := eval(t, "clip_cov", a(1), b)
	if again.Loss != res.Loss || !equalBits(same, grad) {
		t.Error("seed 1 twice: different results")
	}
	differ := 0
	for seed := 2; seed < 6; seed++ {
		if _, g := eval(t, "clip_cov", a(seed), b); !equalBits(g, grad) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("seeds 2..5 clip the tokens seed 1 clips")
	}
}

func equalBits(x, y []float64) bool {
	for i := range x {
		if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
			return false
		}
	}
	return true
}

// TestVerl2026MaskedNaN (spec §8): a NaN old_logprob at a masked position
// leaves token-mean's loss and metrics finite and makes the gradient NaN
// there only; the seq-mean modes' plain row products take the NaN.
func TestVerl2026MaskedNaN(t *testing.T) {
	old := [][]float64{{-0.5, -1.0, -0.3, math.NaN()}, {-0.6, -0.4, -1.1, -0.2}, {-0.2, -0.9, -0.6, -1.6}}
	for _, tc := range []struct {
		loss string
		args args.Values
	}{
		{"dppo_tv", nil}, {"dppo_kl", nil}, {"clip_cov", nil}, {"kl_cov", nil}, {"dro", args.Values{"dro_beta": 0.1}},
	} {
		b := batch(t, lp3, old, nil, adv3, mask3)
		res, grad := eval(t, tc.loss, tc.args, b)
		if math.IsNaN(res.Loss) {
			t.Errorf("%s token-mean: loss NaN", tc.loss)
		}
		for k, v := range res.Metrics {
			if math.IsNaN(v) {
				t.Errorf("%s token-mean: metric %s NaN", tc.loss, k)
			}
		}
		for i, g := range grad {
			if math.IsNaN(g) != (i == 3) {
				t.Errorf("%s token-mean: grad[%d] = %v", tc.loss, i, g)
			}
		}
		seq := args.Overlay(tc.args, args.Values{"loss_agg_mode": "seq-mean-token-sum"})
		if res, _ := eval(t, tc.loss, seq, b); !math.IsNaN(res.Loss) {
			t.Errorf("%s seq-mean-token-sum: loss %v, want NaN", tc.loss, res.Loss)
		}
	}
}

// TestKLCovTooMany: k = int(n·kl_cov_ratio) above the n valid tokens is
// torch.topk's error, as upstream.
func TestKLCovTooMany(t *testing.T) {
	l, err := New(Default(), "kl_cov", args.Values{"kl_cov_ratio": 1.5})
	if err != nil {
		t.Fatal(err)
	}
	b := batch(t, lp3, old3, nil, adv3, mask3)
	_, err = l.Eval(b, make([]float64, b.Rows.Tokens()))
	if err == nil || !strings.Contains(err.Error(), "selected index k out of range") {
		t.Errorf("error %v", err)
	}
}

// TestKLBounds: where dppo_kl's bounds on the divergence decide, they
// answer as the divergence computed with math.Log, K ≤ e, for random and
// edge log-probs and bounds e at K, one ulp either side of it, and at the
// usual ε; and they decide most random tokens at the usual ε.
func TestKLBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 11))
	pairs := [][2]float64{{-0.5, -0.5}, {0, -1}, {-1, 0}, {0, 0}, {0.3, -0.2}, {-0.2, 0.3}, {-800, -0.1}, {-0.1, -800},
		{-1e-12, -2e-12}, {-2e-12, -1e-12}, {math.Inf(-1), -1}, {-1, math.Inf(-1)}, {math.NaN(), -1}, {-1e-8, 0}, {-40, -1e-9}}
	for range 20000 {
		scale := math.Pow(10, 4*rng.Float64()-3)
		lp := -math.Abs(rng.NormFloat64()) * scale
		pairs = append(pairs, [2]float64{lp, lp + scale*rng.NormFloat64()*rng.Float64()})
	}
	settled := 0.0
	for _, pr := range pairs {
		lp, old := pr[0], pr[1]
		p, q := math.Exp(lp), math.Exp(old)
		d := old - lp
		k := q*d + (1-q)*math.Log((1-q+1e-8)/(1-p+1e-8))
		for _, e := range []float64{k, math.Nextafter(k, math.Inf(1)), math.Nextafter(k, math.Inf(-1)), 0, 0.2, 0.28, 1e-3} {
			if math.IsNaN(e) || math.IsInf(e, 0) {
				continue
			}
			within, decided := klBounds(p, q, d, e)
			if decided == 1 && (within == 1) != (k <= e) {
				t.Errorf("lp %v, old %v, e %v: within %v, K = %v", lp, old, e, within, k)
			}
			if e == 0.2 {
				settled += decided
			}
		}
	}
	if settled < 0.75*float64(len(pairs)) {
		t.Errorf("the bounds decide %v of %d tokens at e = 0.2", settled, len(pairs))
	}
}

// TestCovMemory: clip_cov's and kl_cov's choice takes memory per row and
// per chosen token, not per token: an evaluation of 262,144 tokens in 64
// rows allocates less than a byte for every 8 of them.
func TestCovMemory(t *testing.T) {
	b := tokens.Synthetic(64, 4096, 8)
	grad := make([]float64, b.Rows.Tokens())
	for _, name := range []string{"clip_cov", "kl_cov"} {
		l, err := New(Default(), name, nil)
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := l.Eval(b, grad); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > uint64(len(grad)/8) {
			t.Errorf("%s: %d bytes allocated for %d tokens", name, got, len(grad))
		}
	}
}
