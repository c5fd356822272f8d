package algorithm

import (
	"maps"
	"math"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/args"
)

// TestArgumentRanges checks every argument of every registered component
// (and add strategy): its range is well formed, only numbers have one, and
// its defaults lie inside it — so a default never trips the range check and
// the range help prints is the one Resolve applies.
func TestArgumentRanges(t *testing.T) {
	check := func(where string, ps args.Schema) {
		for _, p := range ps {
			if err := p.Range.Valid(); err != nil {
				t.Errorf("%s: %s: %v", where, p.Name, err)
			}
			numeric := p.Kind == args.Float || p.Kind == args.Int
			if !numeric && p.Range != schema.Finite {
				t.Errorf("%s: %s: a %s argument has range %s", where, p.Name, p.Kind, p.Range)
			}
			for _, v := range []any{p.Ctor, p.Default} {
				if v == nil || !numeric {
					continue
				}
				if _, err := (args.Schema{p}).Resolve(args.Values{p.Name: v}); err != nil {
					t.Errorf("%s: default %v: %v", where, v, err)
				}
			}
		}
	}
	for _, s := range Slots {
		f := family(s)
		for _, n := range f.Names() {
			ps, err := f.Params(n)
			if err != nil {
				t.Fatal(err)
			}
			check(s.String()+" "+n, ps)
		}
	}
	reg := addstrategy.Default()
	for _, n := range reg.Names() {
		spec, _ := reg.Get(n)
		check("add strategy "+n, spec.Params)
	}
}

// TestReferenceBounds: a component refuses an argument only where upstream
// raises, or where every output would be non-finite whatever the input;
// values upstream accepts and computes with are accepted. Each row names
// the upstream behaviour it follows.
func TestReferenceBounds(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	ppo := func(a Args) Args {
		m := Args{"clip_range": 0.2}
		maps.Copy(m, a)
		return m
	}
	for _, tc := range []struct {
		slot Slot
		fn   string
		args Args
		ok   bool
		ref  string
	}{
		// Advantage fns.
		{AdvantageFn, "grpo", Args{"epsilon": 0.0}, true, "(r − mean)/(std + ε): no check"},
		{AdvantageFn, "grpo", Args{"epsilon": -1e-6}, true, "(r − mean)/(std + ε): no check"},
		{AdvantageFn, "grpo", Args{"epsilon": inf}, false, "a non-finite coefficient"},
		{AdvantageFn, "grpo", Args{"std_threshold": -0.5}, true, "std <= threshold: no check"},
		{AdvantageFn, "grpo", Args{"rank_penalty": 2.0}, true, "r·(1 − rank/n·penalty): no check"},
		{AdvantageFn, "step_wise_grpo", Args{"epsilon": 0.0}, true, "as grpo"},
		{AdvantageFn, "opmd", Args{"tau": 0.0}, true, "tau only in logavgexp, unchecked"},
		{AdvantageFn, "opmd", Args{"opmd_baseline": "logavgexp", "tau": -2.0}, true, "tau·logsumexp(R/tau): finite"},
		{AdvantageFn, "clipv", Args{"mu": -1.0, "max_frac": 2.0}, true, "thresholds, unchecked"},
		{AdvantageFn, "clipb", Args{"mu": -1.0}, true, "threshold, unchecked"},
		{AdvantageFn, "reinforceplusplus", Args{"gamma": 1.5}, true, "discount, unchecked"},
		{AdvantageFn, "ppo", Args{"gamma": -0.5, "lam": 2.0}, true, "GAE factors, unchecked"},
		{AdvantageFn, "on_policy_distill", Args{"kl_coef": -1.0}, true, "−kl_coef·(s − t): unchecked"},
		{AdvantageFn, "jsd", Args{"kl_coef": -1.0, "temperature": -2.0}, true, "log-probs / T: finite for T != 0"},
		{AdvantageFn, "jsd", Args{"temperature": 0.0}, false, "lp/0: every advantage NaN"},
		{AdvantageFn, "jsd", Args{"lambda_coef": 1.5}, false, "log1p(−β) of β > 1: every advantage NaN"},
		{AdvantageFn, "jsd", Args{"chunk_size": int64(0)}, true, "chunk_size or n_valid: 0 is no chunking"},
		{AdvantageFn, "jsd", Args{"chunk_size": int64(-1)}, false, "range(0, n, −1) is empty: every advantage 0"},
		{AdvantageFn, "reward_std_filter", Args{"threshold": -1.0}, true, "np.std <= threshold: no check"},
		{AdvantageFn, "gdpo", Args{"num_generations": int64(0)}, false, "TRL view(-1, 0, K) raises"},
		{AdvantageFn, "gdpo", Args{"reward_weights": []any{3e38, 3e38}}, false, "float32 weights whose sum overflows"},
		{AdvantageFn, "gdpo", Args{"reward_weights": []any{-2.0, 0.0}}, true, "zero and negative weights (advantages.md §gdpo)"},
		{AdvantageFn, "gigpo", Args{"omega": -1.0, "gamma": 2.0, "epsilon": 0.0}, true, "no check"},
		// Policy losses.
		{PolicyLossFn, "ppo", Args{"clip_range": -0.1}, true, "torch.clamp(r, 1.1, 0.9): max everywhere"},
		{PolicyLossFn, "ppo", ppo(Args{"clip_ratio_c": 1.0}), false, "assert clip_ratio_c > 1.0"},
		{PolicyLossFn, "cispo", Args{"clip_range_low": -0.5, "mask_clip_range_high": -1.0}, true, "no check"},
		{PolicyLossFn, "dpo", Args{"beta": -0.1, "label_smoothing": 2.0}, true, "logsigmoid arithmetic, unchecked"},
		{PolicyLossFn, "opmd", Args{"tau": -2.0}, true, "loss/(1 + tau): finite"},
		{PolicyLossFn, "opmd", Args{"tau": -1.0}, false, "loss/0: every output non-finite"},
		{PolicyLossFn, "sppo", Args{"epsilon": -0.5}, true, "1/(1 + ε): finite"},
		{PolicyLossFn, "sppo", Args{"epsilon": -1.0}, false, "1/(1 + ε): Python ZeroDivisionError"},
		{PolicyLossFn, "sapo", Args{"tau_pos": -1.0, "tau_neg": 0.0}, true, "only assert tau_neg >= tau_pos"},
		{PolicyLossFn, "sapo", Args{"tau_pos": 1.0, "tau_neg": 0.5}, false, "assert tau_neg >= tau_pos"},
		{PolicyLossFn, "sft_phi", Args{"cutoff_prob": 0.0}, false, "math.log(0) raises"},
		{PolicyLossFn, "sft_phi", Args{"cutoff_prob": 1.5}, false, "assert 0 <= cutoff_prob <= 1"},
		{PolicyLossFn, "rec", Args{"epsilon_low": 0.0}, false, "assert 0 < epsilon_low <= 1"},
		{PolicyLossFn, "mix", ppo(Args{"mu": 2.0, "ngpus_trainer": int64(-1), "train_batch_size_usual": int64(3)}), true, "Python floor division, no check"},
		{PolicyLossFn, "mix", ppo(Args{"ngpus_trainer": int64(0)}), false, "x // 0: ZeroDivisionError"},
		{PolicyLossFn, "mix", ppo(Args{"ngpus_trainer": int64(2)}), false, "1 // 2 = 0 divides the weight: ZeroDivisionError"},
		{PolicyLossFn, "mix_chord", ppo(Args{"mu_peak": -1.0, "mu_valley": 2.0}), true, "schedule values, unchecked"},
		{PolicyLossFn, "m2po", Args{"batch_num_tokens": 0.0}, true, "max(float(batch_num_tokens), 1e-8)"},
		{PolicyLossFn, "m2po", Args{"batch_num_tokens": -1.0}, false, "ValueError: batch_num_tokens < 0"},
		{PolicyLossFn, "m2po", Args{"batch_num_tokens": 1.0, "dp_size": int64(0)}, false, "ValueError: dp_size <= 0"},
		{PolicyLossFn, "m2po", Args{"m2_threshold": nan}, false, "ValueError: m2_threshold not finite"},
		// KL and entropy.
		{KLLossFn, "k3", Args{"kl_coef": -0.1}, true, "loss · kl_coef: no check"},
		{KLPenaltyFn, "k1", Args{"target_kl": 0.0, "horizon": 0.0}, true, "unused without adaptive"},
		{KLPenaltyFn, "k1", Args{"adaptive": true, "target_kl": -0.1, "horizon": 10.0}, true, "kl/target: finite"},
		{KLPenaltyFn, "k1", Args{"adaptive": true, "target_kl": 0.0, "horizon": 10.0}, false, "kl/0.0: ZeroDivisionError"},
		{EntropyLossFn, "default", Args{"entropy_coef": -0.01}, true, "loss · entropy_coef: no check"},
		{EntropyLossFn, "default", Args{"entropy_coef": inf}, false, "a non-finite coefficient"},
		// Sample strategies.
		{SampleStrategy, "staleness_control", Args{"max_staleness": -3.0}, true, "max(step − max_staleness, 0): no check"},
		{SampleStrategy, "staleness_control", Args{"max_staleness": nan}, false, "a NaN bound"},
		{SampleStrategy, "mix", Args{"expert_data_ratio": 1.5}, false, "a negative reader batch size"},
	} {
		var c Config
		c.Set(tc.slot, tc.fn, tc.args)
		c.LossAggMode = "token-mean"
		err := (&Resolved{Config: c}).build(tc.slot)
		if (err == nil) != tc.ok {
			t.Errorf("%s %s %v (%s): err = %v, want accepted %v", tc.slot, tc.fn, tc.args, tc.ref, err, tc.ok)
		}
	}
}
