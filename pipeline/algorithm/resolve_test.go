package algorithm

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/loss"
)

// user builds a user config: algorithm_type plus the given edits.
func user(algo string, edits ...func(*Config)) Config {
	c := Config{AlgorithmType: algo}
	for _, e := range edits {
		e(&c)
	}
	return c
}

func set(s Slot, name string, a Args) func(*Config) {
	return func(c *Config) { c.Set(s, name, a) }
}

func TestResolve(t *testing.T) {
	train := &Env{Mode: "train", Input: "store.parquet"}
	advDefaults := func(name string) Args {
		s, err := advantage.Default().Get(name)
		if err != nil {
			t.Fatal(err)
		}
		return s.Defaults()
	}
	lossDefaults := func(name string) Args {
		s, err := loss.Default().Get(name)
		if err != nil {
			t.Fatal(err)
		}
		return s.New.DefaultArgs()
	}
	tests := []struct {
		name    string
		user    Config
		env     *Env
		opt     Options
		check   func(t *testing.T, c Config)
		warn    string // substring of a warning
		wantErr string // substring of the error
	}{
		{name: "ppo is the default type", user: Config{}, check: func(t *testing.T, c Config) {
			if c.AlgorithmType != "ppo" || c.Fn(AdvantageFn) != "ppo" {
				t.Errorf("got %s / %s", c.AlgorithmType, c.Fn(AdvantageFn))
			}
		}},
		{name: "grpo defaults", user: user("grpo"), check: func(t *testing.T, c Config) {
			want := [numSlots]string{"default", "grpo", "none", "ppo", "k2", "default"}
			for _, s := range Slots {
				if c.Fn(s) != want[s] {
					t.Errorf("%s = %s, want %s", s, c.Fn(s), want[s])
				}
			}
			if c.RepeatTimes != 1 { // default_config's 2 is never applied
				t.Errorf("repeat_times %d, want 1", c.RepeatTimes)
			}
			if !reflect.DeepEqual(c.Args(AdvantageFn), advDefaults("grpo")) {
				t.Errorf("advantage_fn_args %v", c.Args(AdvantageFn))
			}
			if !reflect.DeepEqual(c.Args(PolicyLossFn), Args(lossDefaults("ppo"))) {
				t.Errorf("policy_loss_fn_args %v", c.Args(PolicyLossFn))
			}
			if c.LossAggMode != "token-mean" {
				t.Errorf("loss_agg_mode %s", c.LossAggMode)
			}
		}},
		{name: "Q-04 fix applies the algorithm's repeat_times", user: user("grpo"), opt: Options{AlgorithmRepeatTimes: true},
			check: func(t *testing.T, c Config) {
				if c.RepeatTimes != 2 {
					t.Errorf("repeat_times %d, want 2", c.RepeatTimes)
				}
			}},
		{name: "user repeat_times wins", user: user("mix", func(c *Config) { c.RepeatTimes = 4 }), opt: Options{AlgorithmRepeatTimes: true},
			check: func(t *testing.T, c Config) {
				if c.RepeatTimes != 4 {
					t.Errorf("repeat_times %d, want 4", c.RepeatTimes)
				}
			}},
		{name: "user args replace default_args, not merged", user: user("grpo", set(AdvantageFn, "", Args{"std_threshold": 0.0})),
			check: func(t *testing.T, c Config) {
				if c.Fn(AdvantageFn) != "grpo" || !reflect.DeepEqual(c.Args(AdvantageFn), Args{"std_threshold": 0.0}) {
					t.Errorf("advantage %s %v", c.Fn(AdvantageFn), c.Args(AdvantageFn))
				}
			}},
		{name: "Q-05 gspo's own loss_agg_mode is overwritten", user: user("gspo"), check: func(t *testing.T, c Config) {
			if got := c.Args(PolicyLossFn)["loss_agg_mode"]; got != "token-mean" {
				t.Errorf("policy loss_agg_mode %v, want token-mean", got)
			}
		}},
		{name: "loss_agg_mode reaches the policy loss", user: user("gspo", func(c *Config) { c.LossAggMode = "seq-mean-token-mean" }),
			check: func(t *testing.T, c Config) {
				if got := c.Args(PolicyLossFn)["loss_agg_mode"]; got != "seq-mean-token-mean" {
					t.Errorf("policy loss_agg_mode %v", got)
				}
			}},
		{name: "Q-05 fix keeps gspo's own mode", user: user("gspo", set(PolicyLossFn, "", Args{"clip_range": 0.2, "loss_agg_mode": "seq-mean-token-mean", "respect_own_loss_agg_mode": true})),
			check: func(t *testing.T, c Config) {
				if got := c.Args(PolicyLossFn)["loss_agg_mode"]; got != "seq-mean-token-mean" {
					t.Errorf("policy loss_agg_mode %v", got)
				}
			}},
		{name: "default_config args (on_policy_distill)", user: user("on_policy_distill"), check: func(t *testing.T, c Config) {
			if !reflect.DeepEqual(c.Args(AdvantageFn), Args{"kl_coef": 1.0}) {
				t.Errorf("advantage_fn_args %v", c.Args(AdvantageFn))
			}
		}},
		{name: "Q-23 grpo_verl runs grpo_verl", user: user("grpo_verl"), check: func(t *testing.T, c Config) {
			if c.Fn(AdvantageFn) != "grpo_verl" {
				t.Errorf("advantage_fn %s", c.Fn(AdvantageFn))
			}
		}},
		{name: "Q-27 sft has no advantage", user: user("sft"), env: train, check: func(t *testing.T, c Config) {
			if c.Fn(AdvantageFn) != NoAdvantage || c.Args(AdvantageFn) != nil {
				t.Errorf("advantage %s %v", c.Fn(AdvantageFn), c.Args(AdvantageFn))
			}
		}},
		{name: "mix strategy args", user: user("mix"), check: func(t *testing.T, c Config) {
			want := Args{"expert_data_ratio": 0.5, "sft_dataset_name": "sft_dataset"}
			if c.Fn(SampleStrategy) != "mix" || !reflect.DeepEqual(c.Args(SampleStrategy), want) {
				t.Errorf("sample %s %v", c.Fn(SampleStrategy), c.Args(SampleStrategy))
			}
		}},
		{name: "dpo forces repeat_times 2", user: user("dpo"), env: train, check: func(t *testing.T, c Config) {
			if c.RepeatTimes != 2 || c.Fn(KLLossFn) != "k2" {
				t.Errorf("repeat_times %d kl_loss_fn %s", c.RepeatTimes, c.Fn(KLLossFn))
			}
		}},
		{name: "dpo must use a KL loss", user: user("dpo", set(KLLossFn, "none", nil)), env: train,
			warn: "DPO must use KL loss", check: func(t *testing.T, c Config) {
				if c.Fn(KLLossFn) != "k2" {
					t.Errorf("kl_loss_fn %s", c.Fn(KLLossFn))
				}
			}},
		{name: "Q-10 KL penalty ignored in the pipeline", user: user("grpo", set(KLPenaltyFn, "k1", nil)), warn: "Q-10"},
		{name: "sft in both mode", user: user("sft"), env: &Env{Mode: "both", Input: "x"}, wantErr: "SFT does not support `both` mode"},
		{name: "dpo without input", user: user("dpo"), env: &Env{}, wantErr: "`buffer.trainer_input.experience_buffer.path` is required when `algorithm.algorithm_type == dpo`"},
		{name: "unknown type", user: user("grpoo"), wantErr: `unknown algorithm type "grpoo"`},
		{name: "unknown policy loss", user: user("grpo", set(PolicyLossFn, "ppo2", nil)), wantErr: `unknown policy loss "ppo2"`},
		{name: "bad policy loss arg", user: user("grpo", set(PolicyLossFn, "", Args{"clip_rang": 0.2})), wantErr: "clip_rang"},
		{name: "bad advantage arg", user: user("grpo", set(AdvantageFn, "", Args{"epsilon": "x"})), wantErr: "epsilon"},
		{name: "bad sample arg", user: user("mix", set(SampleStrategy, "", Args{"expert_data_ratio": 2.0})), wantErr: "expert_data_ratio"},
		{name: "bad loss_agg_mode", user: user("grpo", func(c *Config) { c.LossAggMode = "mean" }), wantErr: "Invalid loss_agg_mode: mean"},
		{name: "negative repeat_times", user: user("grpo", func(c *Config) { c.RepeatTimes = -1 }), wantErr: "repeat_times"},
		{name: "trainer-side fn in the pipeline", user: user("grpo", set(AdvantageFn, "ppo", nil)), wantErr: "can only be computed in the trainer"},
		{name: "pipeline-side fn in the trainer", user: user("ppo", set(AdvantageFn, "grpo", nil)), wantErr: "runs in the pipeline"},
		{name: "KL loss without reference", user: user("asymre", set(KLLossFn, "k2", nil)), wantErr: "needs ref_log_prob"},
		{name: "none advantage takes no args", user: user("raft", set(AdvantageFn, "", Args{"x": 1.0})), wantErr: "takes no arguments"},
		{name: "gigpo defaults: partial ppo args, loss_agg_mode overwritten", user: user("gigpo", func(c *Config) { c.LossAggMode = "seq-mean-token-mean" }),
			check: func(t *testing.T, c Config) {
				want := Args{"clip_range_low": 0.2, "clip_range_high": 0.2, "loss_agg_mode": "seq-mean-token-mean"}
				if !reflect.DeepEqual(c.Args(PolicyLossFn), want) || c.Args(AdvantageFn)["fnorm"] != "none" || c.Fn(KLLossFn) != "k2" {
					t.Errorf("policy args %v, advantage args %v, kl %s", c.Args(PolicyLossFn), c.Args(AdvantageFn), c.Fn(KLLossFn))
				}
			}},
		{name: "dapo: no reference, no KL loss", user: user("dapo"), check: func(t *testing.T, c Config) {
			if c.Fn(AdvantageFn) != "grpo" || c.Fn(KLLossFn) != "none" || c.Fn(EntropyLossFn) != "default" {
				t.Errorf("got %v", c)
			}
		}},
		{name: "dapo refuses a KL loss", user: user("dapo", set(KLLossFn, "k2", nil)), wantErr: "needs ref_log_prob"},
		{name: "m2po defaults", user: user("m2po"), check: func(t *testing.T, c Config) {
			a := c.Args(PolicyLossFn)
			if c.Fn(PolicyLossFn) != "m2po" || a["m2_threshold"] != 0.04 || a["log_ratio_clip"] != 20.0 || c.Fn(EntropyLossFn) != "none" {
				t.Errorf("got %s %v", c.Fn(PolicyLossFn), a)
			}
		}},
		{name: "m2po requires policy_loss_fn m2po", user: user("m2po", set(PolicyLossFn, "ppo", nil)), wantErr: "requires policy_loss_fn='m2po'"},
		{name: "m2po loss requires bypass_old_logprobs", user: user("grpo", set(PolicyLossFn, "m2po", nil), func(c *Config) { c.NoBypassOldLogprobs = true }),
			wantErr: "rollout behavior policy"},
		{name: "m2po algorithm requires bypass_old_logprobs", user: user("m2po", func(c *Config) { c.NoBypassOldLogprobs = true }), wantErr: "rollout behavior policy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Resolve(tc.user, tc.env, tc.opt)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, schema.ErrBadInput) {
					t.Fatalf("error %v, want bad input containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.warn != "" && !strings.Contains(strings.Join(res.Warnings, "\n"), tc.warn) {
				t.Errorf("warnings %q, want %q", res.Warnings, tc.warn)
			}
			for _, s := range Slots {
				if res.Config.Fn(s) == "" {
					t.Errorf("%s left null", s)
				}
			}
			if tc.check != nil {
				tc.check(t, res.Config)
			}
		})
	}
}

// TestResolveEveryType resolves every type's defaults and builds its
// components: the presets are consistent with the component registries.
func TestResolveEveryType(t *testing.T) {
	env := &Env{Input: "store.parquet"}
	for _, name := range Default().Names() {
		res, err := Resolve(Config{AlgorithmType: name}, env, Options{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := res.PolicyLoss(); err != nil {
			t.Errorf("%s: policy loss: %v", name, err)
		}
		p, err := res.PipelineAdvantage()
		if err != nil {
			t.Errorf("%s: pipeline advantage: %v", name, err)
		}
		tr, err := res.TrainerAdvantage()
		if err != nil {
			t.Errorf("%s: trainer advantage: %v", name, err)
		}
		f := res.Type.Flags()
		if (tr != nil) != f.ComputeAdvantageInTrainer || (p != nil && tr != nil) {
			t.Errorf("%s: pipeline fn %v, trainer fn %v, in trainer %v", name, p != nil, tr != nil, f.ComputeAdvantageInTrainer)
		}
	}
}

// TestResolveDoesNotAlias checks that resolving never writes into the
// user's dicts or the presets.
func TestResolveDoesNotAlias(t *testing.T) {
	pl := Args{"clip_range": 0.3, "loss_agg_mode": "token-mean"}
	u := user("grpo", set(PolicyLossFn, "", pl), func(c *Config) { c.LossAggMode = "seq-mean-token-sum" })
	if _, err := Resolve(u, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if pl["loss_agg_mode"] != "token-mean" {
		t.Errorf("user dict changed: %v", pl)
	}
	res, err := Resolve(user("jsd"), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res.Config.Args(AdvantageFn)["kl_coef"] = 5.0
	spec, _ := Default().Get("jsd")
	typ := spec.New
	if typ.DefaultConfig().Args(AdvantageFn)["kl_coef"] != 1.0 {
		t.Error("preset changed through a resolved config")
	}
}

// TestResolveErrorKeys checks that errors name the key at fault, so a job
// file can point at its line.
func TestResolveErrorKeys(t *testing.T) {
	tests := []struct {
		user Config
		key  string
	}{
		{user("nope"), "algorithm_type"},
		{user("grpo", func(c *Config) { c.RepeatTimes = -2 }), "repeat_times"},
		{user("grpo", func(c *Config) { c.LossAggMode = "sum" }), "loss_agg_mode"},
		{user("grpo", set(PolicyLossFn, "ppo2", nil)), "policy_loss_fn"},
		{user("grpo", set(PolicyLossFn, "ppo2", Args{"clip_range": 0.1})), "policy_loss_fn"},
		{user("grpo", set(PolicyLossFn, "", Args{"clip": 0.1})), "policy_loss_fn_args"},
		{user("grpo", set(KLLossFn, "k9", nil)), "kl_loss_fn"},
		{user("grpo", set(EntropyLossFn, "", Args{"entropy_coef": "high"})), "entropy_loss_fn_args"},
		{user("grpo", set(SampleStrategy, "mixx", nil)), "sample_strategy"},
		{user("grpo", set(AdvantageFn, "rloo", nil)), "advantage_fn"},
		{user("sppo", set(KLLossFn, "k1", nil)), "kl_loss_fn"},
	}
	for _, tc := range tests {
		_, err := Resolve(tc.user, nil, Options{})
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != tc.key || !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("%+v: error %v, want a bad-input KeyError for %s", tc.user, err, tc.key)
		}
	}
}

func TestNames(t *testing.T) {
	for _, s := range Slots {
		names := ComponentNames(s)
		if len(names) == 0 {
			t.Fatalf("%s: no names", s)
		}
		for _, n := range names {
			if _, err := ArgNames(s, n); err != nil {
				t.Errorf("%s %s: %v", s, n, err)
			}
		}
	}
	got, err := ArgNames(PolicyLossFn, "gspo")
	if err != nil || !strings.Contains(strings.Join(got, ","), "respect_own_loss_agg_mode") {
		t.Errorf("gspo args %v, %v", got, err)
	}
	if _, err := ArgNames(KLLossFn, "k7"); err == nil {
		t.Error("unknown KL fn: no error")
	}
}

// TestMinModelVersion: staleness_control's min_model_version =
// max(step − max_staleness, 0), rounded up, exact at any step (upstream's
// Python integers; no overflow); +∞ (the default) and the other strategies
// read every version; past MaxInt64 no version is read.
func TestMinModelVersion(t *testing.T) {
	const maxInt = math.MaxInt64
	for _, tc := range []struct {
		sample string
		args   Args
		step   int64
		want   int64
		beyond bool
	}{
		{"staleness_control", nil, 100, 0, false},
		{"staleness_control", Args{"max_staleness": 8.0}, 5, 0, false},
		{"staleness_control", Args{"max_staleness": 8.0}, 8, 0, false},
		{"staleness_control", Args{"max_staleness": 8.0}, 9, 1, false},
		{"staleness_control", Args{"max_staleness": int64(20)}, 30, 10, false},
		{"staleness_control", Args{"max_staleness": 0.0}, 3, 3, false},
		{"staleness_control", Args{"max_staleness": 2.5}, 10, 8, false},
		{"staleness_control", Args{"max_staleness": 0.0}, maxInt, maxInt, false},
		{"staleness_control", Args{"max_staleness": 0.5}, maxInt, maxInt, false},
		{"staleness_control", Args{"max_staleness": 3.0}, maxInt, maxInt - 3, false},
		{"staleness_control", Args{"max_staleness": 0.0}, 1<<53 + 1, 1<<53 + 1, false},
		{"staleness_control", Args{"max_staleness": 1e300}, maxInt, 0, false},
		// upstream takes any max_staleness: a negative one reads versions
		// newer than the step
		{"staleness_control", Args{"max_staleness": -2.0}, 5, 7, false},
		{"staleness_control", Args{"max_staleness": -1.0}, maxInt, maxInt, true},
		{"staleness_control", Args{"max_staleness": math.Inf(-1)}, 1, maxInt, true},
		{"default", nil, 30, 0, false},
	} {
		res, err := Resolve(user("grpo", set(SampleStrategy, tc.sample, tc.args)), nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, beyond, err := res.MinModelVersion(tc.step); err != nil || got != tc.want || beyond != tc.beyond {
			t.Errorf("%s %v step %d: %d, %v (%v), want %d, %v", tc.sample, tc.args, tc.step, got, beyond, err, tc.want, tc.beyond)
		}
	}
}
