package loss

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// batch builds a small batch from rows of (lp, old, ref, adv, mask).
func batch(t *testing.T, lp, old, ref, adv, mask [][]float64) *tokens.Batch {
	t.Helper()
	b, err := tokens.FromMatrix(tokens.LogProb, lp)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string][][]float64{tokens.OldLogProb: old, tokens.RefLogProb: ref, tokens.Advantages: adv, tokens.ActionMask: mask} {
		if m != nil {
			if err := b.SetMatrix(name, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b
}

func eval(t *testing.T, name string, a args.Values, b *tokens.Batch) (Result, []float64) {
	t.Helper()
	l, err := New(Default(), name, a)
	if err != nil {
		t.Fatal(err)
	}
	grad := make([]float64, b.Rows.Tokens())
	res, err := l.Eval(b, grad)
	if err != nil {
		t.Fatal(err)
	}
	return res, grad
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12+1e-12*math.Abs(b) }

var (
	lp3   = [][]float64{{-0.3, -1.2, -0.05, -2.0}, {-0.7, -0.1, -1.5, -0.2}, {-0.9, -0.4, -0.6, -1.1}}
	old3  = [][]float64{{-0.5, -1.0, -0.3, -1.2}, {-0.6, -0.4, -1.1, -0.2}, {-0.2, -0.9, -0.6, -1.6}}
	adv3  = [][]float64{{0.8, 0.8, 0.8, 0}, {-1.1, -1.1, -1.1, -1.1}, {0.4, 0.4, 0, 0}}
	mask3 = [][]float64{{1, 1, 1, 0}, {1, 1, 1, 1}, {1, 1, 0, 0}}
)

func TestRegistry(t *testing.T) {
	want := []string{"bypass_mode", "cispo", "clip_cov", "dpo", "dppo_kl", "dppo_tv", "dro", "geo_mean", "gpg", "gspo", "importance_sampling",
		"kl_cov", "m2po", "mix", "mix_chord", "opmd", "ppo", "rec", "reinforce", "sapo", "sft", "sft_is", "sft_phi", "sppo", "topr"}
	if got := Default().Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Names = %v", got)
	}
	if _, err := Default().With(Spec{Name: "ppo", New: ppoDef()}); err == nil {
		t.Error("registering ppo twice: no error")
	}
	if Default() != Default() {
		t.Error("Default is rebuilt per call")
	}
	// default_args as upstream (spec), constructor defaults where they differ.
	tests := []struct {
		loss, arg string
		def, ctor any
	}{
		{"ppo", "clip_range", 0.2, nil},
		{"ppo", "clip_ratio_c", 3.0, 3.0},
		{"gspo", "clip_range_low", 0.0003, nil},
		{"gspo", "loss_agg_mode", "seq-mean-token-mean", "seq-mean-token-mean"},
		{"rec", "epsilon_low_prime", 0.6, 0.4},
		{"rec", "epsilon_high_prime", 2.0, 0.4},
		{"mix", "clip_range", 0.2, nil},
		{"mix_chord", "enable_phi_function", true, true},
		// verl's ActorConfig and PolicyLossConfig defaults (V26-03, V26-07)
		{"dppo_tv", "clip_ratio_c", 3.0, 3.0},
		{"dppo_kl", "clip_range", 0.2, 0.2},
		{"clip_cov", "clip_cov_ratio", 0.0002, 0.0002},
		{"clip_cov", "clip_cov_lb", 1.0, 1.0},
		{"clip_cov", "clip_cov_ub", 5.0, 5.0},
		{"kl_cov", "kl_cov_ratio", 0.0002, 0.0002},
		{"kl_cov", "ppo_kl_coef", 0.1, 0.1},
		{"dro", "dro_beta", nil, nil},
	}
	for _, tc := range tests {
		s, err := Default().Get(tc.loss)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.New.DefaultArgs()[tc.arg]; got != tc.def {
			t.Errorf("%s default_args %s = %v, want %v", tc.loss, tc.arg, got, tc.def)
		}
		v, err := s.Params.Resolve(args.Values{}) // a user dict without the key
		if err != nil {
			t.Fatal(err)
		}
		if v[tc.arg] != tc.ctor {
			t.Errorf("%s constructor %s = %v, want %v", tc.loss, tc.arg, v[tc.arg], tc.ctor)
		}
	}
	// Every loss builds from its default_args (dro: verl's null dro_beta is
	// refused) and runs on a synthetic batch.
	b := tokens.Synthetic(8, 16, 3)
	for _, name := range Default().Names() {
		res, _ := eval(t, name, map[string]args.Values{"dro": {"dro_beta": 0.1}}[name], b)
		if math.IsNaN(res.Loss) || len(res.Metrics) == 0 {
			t.Errorf("%s: loss %v, metrics %v", name, res.Loss, res.Metrics)
		}
	}
}

func TestBadArgs(t *testing.T) {
	tests := []struct {
		loss string
		args args.Values
		want string
	}{
		{"nope", nil, "unknown policy loss"},
		{"ppo", args.Values{"clip_rnage": 0.2}, "unknown argument clip_rnage (valid: backend, clip_range"},
		{"ppo", args.Values{"clip_range": "wide"}, "not a valid float"},
		{"ppo", args.Values{}, "clip_range"},
		{"ppo", args.Values{"clip_range": 0.2, "clip_ratio_c": 1.0}, "argument clip_ratio_c: 1 is outside its valid range (1,inf)"},
		{"ppo", args.Values{"clip_range": 0.2, "loss_agg_mode": "mean"}, "valid: token-mean"},
		{"ppo", args.Values{"clip_range": 0.2, "backend": "jax"}, "valid: verl, tinker"},
		{"gspo", args.Values{"clip_range_high": 0.1}, "Either clip_range or clip_range_low must be specified."},
		{"sft_phi", args.Values{"cutoff_prob": 0.0}, "argument cutoff_prob: 0 is outside its valid range (0,1]"},
		{"rec", args.Values{"weight": "gspo_importance_sampling"}, "requires clip_mode gspo-one-side"},
		{"rec", args.Values{"clip_mode": "three-side"}, "valid: none, one-side"},
		{"rec", args.Values{"epsilon_low": 1.5}, "argument epsilon_low: 1.5 is outside its valid range (0,1]"},
		{"sapo", args.Values{"tau_pos": 2.0, "tau_neg": 1.0}, "tau_neg (1) must be >= tau_pos (2)"},
		{"opmd", args.Values{"tau": -1.0}, "argument tau: -1 is outside its valid range (-inf,-1)∪(-1,inf)"},
		{"sppo", args.Values{"epsilon": -1.0}, "argument epsilon: -1 is outside its valid range (-inf,-1)∪(-1,inf)"},
		{"mix", args.Values{"clip_range": 0.2, "ngpus_trainer": 2}, "train_batch_size_usual and train_batch_size_expert floor-divided by ngpus_trainer (2)"},
		{"mix", args.Values{"clip_range": 0.2, "ngpus_trainer": 0}, "they must not be 0, got 1 and 0"},
		{"mix_chord", args.Values{"clip_range": 0.2, "ppo_micro_batch_size_per_gpu": 0}, "they must not be 0, got 0 and 1"},
		{"mix", args.Values{"clip_range": 0.2, "ppo_mini_batch_size": 1.5}, "not a valid int"},
		{"ppo", args.Values{"clip_range": 0.2, "dp_size": 0}, "argument dp_size: 0 is outside its valid range [1,inf)"},
		{"sppo", args.Values{"epsilon": math.Inf(1)}, "argument epsilon: +Inf is outside"},
		{"dro", nil, "policy_loss.dro_beta must be a positive value when using DRO"},
		{"dro", args.Values{"dro_beta": 0.0}, "policy_loss.dro_beta must be a positive value when using DRO"},
		{"clip_cov", args.Values{"clip_cov_ratio": 0.0}, "argument clip_cov_ratio: 0 is outside its valid range (0,inf)"},
		{"kl_cov", args.Values{"kl_cov_ratio": -0.1}, "argument kl_cov_ratio: -0.1 is outside its valid range (0,inf)"},
		{"dppo_tv", args.Values{"clip_ratio_c": math.NaN()}, "argument clip_ratio_c"},
		{"mix_chord", args.Values{"clip_range": 0.2, "mu_warmup_steps": -1}, "argument mu_warmup_steps: -1 is outside"},
	}
	for _, tc := range tests {
		_, err := New(Default(), tc.loss, tc.args)
		if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: error %v, want bad input containing %q", tc.loss, tc.args, err, tc.want)
		}
	}
}

func TestBadBatch(t *testing.T) {
	ok := func() *tokens.Batch { return batch(t, lp3, old3, nil, adv3, mask3) }
	tests := []struct {
		name  string
		loss  string
		batch func() *tokens.Batch
		grad  int // gradient length offset
		want  string
	}{
		{"missing column", "ppo", func() *tokens.Batch { return batch(t, lp3, nil, nil, adv3, mask3) }, 0, "missing input old_logprob"},
		{"missing mask", "sft", func() *tokens.Batch { return batch(t, lp3, nil, nil, nil, nil) }, 0, "missing input action_mask"},
		{"grad length", "ppo", ok, -1, "gradient buffer has 11 tokens"},
		{"empty batch", "ppo", func() *tokens.Batch { return tokens.New(agg.NewRows(nil)) }, 0, "empty batch"},
		{"mix without expert_mask", "mix", ok, 0, "missing input expert_mask"},
		{"dpo per_pair odd rows", "dpo", func() *tokens.Batch { return batch(t, lp3, nil, old3, nil, mask3) }, 0, "odd row count 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := args.Values(nil)
			if tc.loss == "dpo" {
				a = args.Values{"per_pair": true}
			}
			l, err := New(Default(), tc.loss, a)
			if err != nil {
				t.Fatal(err)
			}
			b := tc.batch()
			_, err = l.Eval(b, make([]float64, b.Rows.Tokens()+tc.grad))
			if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want bad input containing %q", err, tc.want)
			}
		})
	}
	// A mask of the wrong length is refused when the batch is built.
	b := batch(t, lp3, old3, nil, adv3, nil)
	if err := b.Set(tokens.ActionMask, make([]float64, 5)); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("short mask: %v", err)
	}
	// mix_chord needs one step for the whole batch.
	b = batch(t, lp3, old3, nil, adv3, mask3)
	if err := b.SetExpertMask([]bool{false, true, false}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetStep([]int64{1, 2, 1}); err != nil {
		t.Fatal(err)
	}
	l, _ := New(Default(), "mix_chord", nil)
	if _, err := l.Eval(b, make([]float64, b.Rows.Tokens())); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("mixed steps: %v", err)
	}
}

// TestAllMasked: a batch without any trained token gives upstream's values
// (0 for token-mean means, NaN never from the mask alone) and a zero gradient.
func TestAllMasked(t *testing.T) {
	zero := [][]float64{{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0}}
	lp := [][]float64{{-1, -2, -3, -4}, {-1, -2, -3, -4}, {-1, -2}}
	b := batch(t, lp, lp, lp, zero, zero)
	for _, name := range []string{"ppo", "opmd", "sft", "gspo", "topr", "cispo", "sft_is", "sft_phi", "sppo", "rec", "sapo", "importance_sampling", "dpo"} {
		res, grad := eval(t, name, nil, b)
		if res.Loss != 0 && name != "dpo" {
			t.Errorf("%s: loss %v, want 0", name, res.Loss)
		}
		for k, v := range res.Metrics {
			if math.IsNaN(v) {
				t.Errorf("%s: metric %s is NaN", name, k)
			}
		}
		for i, g := range grad {
			if g != 0 {
				t.Fatalf("%s: grad[%d] = %v", name, i, g)
			}
		}
	}
}

// TestDeterministic: results are bit-identical for any GOMAXPROCS on a batch
// of many chunks.
func TestDeterministic(t *testing.T) {
	b := tokens.Synthetic(64, 2048, 7)
	for _, name := range []string{"ppo", "gspo", "mix", "dpo"} {
		l, _ := New(Default(), name, nil)
		var ref Result
		var refGrad []float64
		for _, procs := range []int{1, 2, 3, 8} {
			prev := runtime.GOMAXPROCS(procs)
			grad := make([]float64, b.Rows.Tokens())
			res, err := l.Eval(b, grad)
			runtime.GOMAXPROCS(prev)
			if err != nil {
				t.Fatal(err)
			}
			if refGrad == nil {
				ref, refGrad = res, grad
				continue
			}
			if math.Float64bits(res.Loss) != math.Float64bits(ref.Loss) {
				t.Errorf("%s: GOMAXPROCS %d loss %v, want %v", name, procs, res.Loss, ref.Loss)
			}
			for k, v := range ref.Metrics {
				if math.Float64bits(res.Metrics[k]) != math.Float64bits(v) {
					t.Errorf("%s: GOMAXPROCS %d metric %s %v, want %v", name, procs, k, res.Metrics[k], v)
				}
			}
			for i := range grad {
				if math.Float64bits(grad[i]) != math.Float64bits(refGrad[i]) {
					t.Fatalf("%s: GOMAXPROCS %d grad[%d] differs", name, procs, i)
				}
			}
		}
	}
}

// TestGradientFiniteDifference checks dLoss/dlogprob against central finite
// differences for the losses whose value is the differentiated surrogate
// (no stop-gradient changes the gradient).
func TestGradientFiniteDifference(t *testing.T) {
	ref3 := [][]float64{{-0.4, -1.0, -0.2, -1.9}, {-0.5, -0.3, -1.2, -0.4}, {-1.0, -0.2, -0.5, -1.0}}
	tests := []struct {
		loss string
		args args.Values
	}{
		{"ppo", nil},
		{"ppo", args.Values{"clip_range": 0.2, "loss_agg_mode": "seq-mean-token-mean"}},
		{"opmd", args.Values{"tau": 0.5, "loss_agg_mode": "seq-mean-token-sum"}},
		{"sft", args.Values{"loss_agg_mode": "seq-mean-token-sum-norm"}},
		{"importance_sampling", nil},
		{"dpo", args.Values{"beta": 0.7, "label_smoothing": 0.2}},
		{"sapo", args.Values{"paper_gradient": true}},
		{"sapo", args.Values{"paper_gradient": true, "loss_agg_mode": "seq-mean-token-mean"}},
	}
	for _, tc := range tests {
		b := batch(t, lp3, old3, ref3, adv3, mask3)
		_, grad := eval(t, tc.loss, tc.args, b)
		checkFiniteDifference(t, tc.loss, tc.args, b, grad)
	}
}

// TestCrossedClipBounds: upstream accepts clip ranges whose bounds cross
// (1 − low > 1 + high); torch.clamp(r, min, max) with min > max is max
// everywhere, so one token of ratio 1 is clamped to 1 + high = 1.1.
func TestCrossedClipBounds(t *testing.T) {
	lp, old, mask := [][]float64{{-0.5}}, [][]float64{{-0.5}}, [][]float64{{1}}
	for _, tc := range []struct {
		loss string
		args args.Values
		adv  float64
		want float64
	}{
		// max(−A·r, −A·clamp(r)) = max(1, 1.1); the dual clip 3 is above
		{"ppo", args.Values{"clip_range_low": -0.3, "clip_range_high": 0.1}, -1, 1.1},
		// max(−1, −clamp(1, 1.1, 0.9)) = max(−1, −0.9)
		{"ppo", args.Values{"clip_range": -0.1}, 1, -0.9},
		// −A · sg(clamp(r)) · lp = −1.1 · (−0.5)
		{"cispo", args.Values{"clip_range_low": -0.3, "clip_range_high": 0.1}, 1, 0.55},
	} {
		l, err := New(Default(), tc.loss, tc.args)
		if err != nil {
			t.Fatalf("%s %v: %v", tc.loss, tc.args, err)
		}
		b := batch(t, lp, old, nil, [][]float64{{tc.adv}}, mask)
		res, err := l.Eval(b, make([]float64, 1))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(res.Loss-tc.want) > 1e-7 { // token-mean: Σ/(1 + 1e-8)
			t.Errorf("%s %v: loss %v, want %v", tc.loss, tc.args, res.Loss, tc.want)
		}
	}
}

// checkFiniteDifference compares grad, the gradient of loss (with args) on
// b, with the central finite difference of its value at every token.
func checkFiniteDifference(t *testing.T, loss string, a args.Values, b *tokens.Batch, grad []float64) {
	t.Helper()
	lp := b.Col(tokens.LogProb)
	const h = 1e-6
	for i := range lp {
		x := lp[i]
		lp[i] = x + h
		up, _ := eval(t, loss, a, b)
		lp[i] = x - h
		down, _ := eval(t, loss, a, b)
		lp[i] = x
		fd := (up.Loss - down.Loss) / (2 * h)
		if math.Abs(fd-grad[i]) > 1e-7 {
			t.Errorf("%s %v: grad[%d] = %v, finite difference %v", loss, a, i, grad[i], fd)
		}
	}
}
