package algorithm

import (
	"fmt"
	"maps"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/loss"
)

// DefaultType is algorithm_type when the config leaves it null.
const DefaultType = "ppo"

// DefaultLossAggMode is loss_agg_mode when the config leaves it null.
const DefaultLossAggMode = "token-mean"

// NoAdvantage is the advantage_fn of algorithms that compute none (sft, dpo,
// raft; quirk Q-27): no advantage stage runs.
const NoAdvantage = "none"

// generic are the defaults every algorithm's default_config() overrides.
var generic = [numSlots]string{
	SampleStrategy: "warmup",
	AdvantageFn:    "ppo",
	KLPenaltyFn:    "none",
	PolicyLossFn:   "ppo",
	KLLossFn:       "k2",
	EntropyLossFn:  "default",
}

// GenericDefault returns the component name a slot gets when neither the
// user nor the algorithm's default_config() sets it.
func GenericDefault(s Slot) string { return generic[s] }

// Modes are Trinity's run modes (the top-level mode key).
var Modes = []string{"train", "both", "explore", "bench", "serve"}

// Env is what check_config reads besides the algorithm section.
type Env struct {
	// Mode is Trinity's top-level mode; "" is "train", what rftpipe does
	// (it trains from a stored experience buffer).
	Mode string
	// Input is the experience store, upstream's
	// buffer.trainer_input.experience_buffer.path.
	Input string
}

// Options are opt-in fixes of upstream quirks in the resolution.
type Options struct {
	// AlgorithmRepeatTimes applies the repeat_times of default_config() when
	// the config sets none. Upstream never does (quirk Q-04): its default is 1.
	AlgorithmRepeatTimes bool
}

// Resolved is a fully resolved algorithm config: every name set, every
// argument dict set, loss_agg_mode applied.
type Resolved struct {
	Type   *Type
	Config Config
	// Warnings are upstream's warnings and rftpipe's (quirks), for the log.
	Warnings []string
}

// Resolve resolves a user's algorithm section as Trinity-RFT's config
// validator does:
//
//  1. algorithm_type (default ppo) → the type's check_config: with env, the
//     rules on the job (sft and dpo train from a stored buffer only), then
//     the rules that rewrite the config (dpo: repeat_times 2, a KL loss);
//  2. every null name ← the type's default_config(), else the generic
//     default; repeat_times ← 1 (Q-04; Options.AlgorithmRepeatTimes: the
//     type's value); loss_agg_mode ← token-mean;
//  3. every null *_args ← the component's default_args(), the whole dict (a
//     user dict is not merged with it: keys it omits take the constructor
//     defaults when the component is built);
//  4. a loss_agg_mode key in policy_loss_fn_args ← loss_agg_mode,
//     unless the dict also says respect_own_loss_agg_mode: true (the loss's
//     opt-in fix, as loss.Def.FromConfig).
//
// Then every component is built once with its arguments, so a bad name or
// argument is reported here. A nil env skips the job rules (to show a type's
// defaults). Errors wrap schema.ErrBadInput.
func Resolve(user Config, env *Env, opt Options) (*Resolved, error) {
	name := user.AlgorithmType
	if name == "" {
		name = DefaultType
	}
	spec, err := Default().Get(name)
	if err != nil {
		return nil, keyErr("algorithm_type", err)
	}
	t := spec.New
	res := &Resolved{Type: t, Config: user.clone()}
	c := &res.Config
	c.AlgorithmType = name
	warn := func(s string) { res.Warnings = append(res.Warnings, s) }
	if env != nil && t.checkEnv != nil {
		if err := t.checkEnv(t, env); err != nil {
			return nil, keyErr("algorithm_type", err)
		}
	}
	if t.mutate != nil {
		t.mutate(c, warn)
	}
	if err := fill(t, c, opt); err != nil {
		return nil, err
	}
	if err := res.check(warn); err != nil {
		return nil, err
	}
	return res, nil
}

// fill applies steps 2–4 of Resolve.
func fill(t *Type, c *Config, opt Options) error {
	switch {
	case c.RepeatTimes < 0:
		return keyErr("repeat_times", badf("%d: must be at least 1", c.RepeatTimes))
	case c.RepeatTimes == 0 && opt.AlgorithmRepeatTimes && t.defaults.RepeatTimes > 0:
		c.RepeatTimes = t.defaults.RepeatTimes
	case c.RepeatTimes == 0:
		c.RepeatTimes = 1
	}
	for _, s := range Slots {
		if c.Fn(s) != "" {
			continue
		}
		if t.defaults.Fn(s) != "" && c.Args(s) == nil {
			// default_config() may set the args too (jsd, on_policy_distill).
			c.Components[s].Args = maps.Clone(t.defaults.Args(s))
		}
		c.Components[s].Name = t.DefaultFn(s)
	}
	if c.LossAggMode == "" {
		c.LossAggMode = DefaultLossAggMode
	}
	if _, err := agg.ParseMode(c.LossAggMode); err != nil {
		return keyErr("loss_agg_mode", schema.BadInputf("%v", err))
	}
	for _, s := range Slots {
		if c.Args(s) != nil {
			continue
		}
		d, err := defaultArgs(s, c.Fn(s))
		if err != nil {
			return keyErr(s.Key(), err)
		}
		c.Components[s].Args = d
	}
	pl := c.Args(PolicyLossFn)
	if _, has := pl["loss_agg_mode"]; has {
		if own, _ := pl[loss.RespectOwnAggMode].(bool); !own { // the loss's opt-in Q-05 fix
			pl["loss_agg_mode"] = c.LossAggMode
		}
	}
	return nil
}

// DefaultFn returns the component a config that leaves slot s null gets:
// the one default_config() names, else the generic default. An algorithm
// that names no advantage fn has none (NoAdvantage): upstream fills in ppo,
// which cannot run outside the trainer (quirk Q-27).
func (t *Type) DefaultFn(s Slot) string {
	switch fn := t.defaults.Fn(s); {
	case fn != "":
		return fn
	case s == AdvantageFn:
		return NoAdvantage
	default:
		return generic[s]
	}
}

// check builds every component and applies the consistency rules.
func (r *Resolved) check(warn func(string)) error {
	c, f := &r.Config, r.Type.flags
	for _, s := range Slots {
		if _, err := defaultArgs(s, c.Fn(s)); err != nil {
			return keyErr(s.Key(), err)
		}
		if err := r.build(s); err != nil {
			return keyErr(s.ArgsKey(), err)
		}
	}
	adv := c.Fn(AdvantageFn)
	if adv != NoAdvantage {
		spec, err := advantage.Default().Get(adv)
		if err != nil {
			return keyErr("advantage_fn", err)
		}
		switch side := spec.New.Side(); {
		case !f.ComputeAdvantageInTrainer && side == advantage.TrainerSide:
			return keyErr("advantage_fn", badf("advantage_fn %s can only be computed in the trainer, and algorithm %s computes advantages in the pipeline", adv, r.Type.name))
		case f.ComputeAdvantageInTrainer && side == advantage.PipelineSide:
			return keyErr("advantage_fn", badf("advantage_fn %s runs in the pipeline, and algorithm %s computes advantages in the trainer: choose a trainer-side fn", adv, r.Type.name))
		}
	} else if f.ComputeAdvantageInTrainer {
		return keyErr("advantage_fn", badf("algorithm %s computes advantages in the trainer: advantage_fn cannot be none", r.Type.name))
	}
	if kl := c.Fn(KLLossFn); kl != "none" && !f.UseReference {
		return keyErr("kl_loss_fn", badf("kl_loss_fn %s needs ref_log_prob, which algorithm %s does not compute (use_reference = false): set kl_loss_fn: none", kl, r.Type.name))
	}
	if err := r.checkM2PO(); err != nil {
		return err
	}
	if kp := c.Fn(KLPenaltyFn); kp != "none" && !f.ComputeAdvantageInTrainer {
		warn(fmt.Sprintf("kl_penalty_fn %s has no effect: algorithm %s computes advantages in the pipeline (quirk Q-10)", kp, r.Type.name))
	}
	return nil
}

// checkM2PO is m2po's check_config and the config validator's guards
// (spec policy_losses.md §m2po): algorithm m2po needs policy_loss_fn m2po,
// and the m2po loss needs the behaviour policy's log-probs as old_logprob
// (bypass_old_logprobs true). Upstream's trainer guards (veRL >= 0.8, not
// Tinker) have no counterpart here.
func (r *Resolved) checkM2PO() error {
	c := &r.Config
	if r.Type.name == "m2po" && c.Fn(PolicyLossFn) != "m2po" {
		return keyErr("policy_loss_fn", badf("algorithm_type m2po requires policy_loss_fn='m2po', not %s", c.Fn(PolicyLossFn)))
	}
	if c.Fn(PolicyLossFn) == "m2po" && c.NoBypassOldLogprobs {
		return keyErr("bypass_old_logprobs", badf("m2po needs the rollout behavior policy's log-probs as old_log_probs: set bypass_old_logprobs: true"))
	}
	return nil
}

// trainOnly is check_config of sft and dpo: they train from a stored buffer.
func trainOnly(t *Type, env *Env) error {
	mode := env.Mode
	if mode == "" {
		mode = "train"
	}
	upper := strings.ToUpper(t.name)
	switch mode {
	case "train":
		if env.Input == "" {
			return badf("`buffer.trainer_input.experience_buffer.path` is required when `algorithm.algorithm_type == %s` (set input)", t.name)
		}
	case "both", "explore":
		return badf("%s does not support `%s` mode", upper, mode)
	}
	return nil
}

// dpoMutate is the rest of DPO's check_config: each record yields a chosen
// and a rejected row ("fake" repeat_times 2), and DPO needs its KL loss.
func dpoMutate(c *Config, warn func(string)) {
	c.RepeatTimes = 2
	switch c.Fn(KLLossFn) {
	case "none":
		warn("DPO must use KL loss. Set `algorithm.kl_loss_fn` to `k2`")
		c.Set(KLLossFn, "k2", nil)
	case "":
		c.Set(KLLossFn, "k2", c.Args(KLLossFn))
	}
}

// KeyError is a resolution error caused by the value of one key of the
// algorithm section; it wraps the cause (which wraps schema.ErrBadInput).
type KeyError struct {
	Key string // "policy_loss_fn_args", "algorithm_type", …
	Err error
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *KeyError) Unwrap() error { return e.Err }

func keyErr(key string, err error) error { return &KeyError{Key: key, Err: err} }

// badf returns an error wrapping schema.ErrBadInput.
func badf(format string, a ...any) error { return schema.BadInputf(format, a...) }
