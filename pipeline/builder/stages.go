package builder

import (
	"fmt"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/rollout"
)

// What says what a job of a resolved algorithm computes.
func What(res *algorithm.Resolved) string {
	f, adv := res.Type.Flags(), res.Config.Fn(algorithm.AdvantageFn)
	switch {
	case f.Schema != algorithm.Experience:
		return fmt.Sprintf("check the %s store and pass its rows through", f.Schema)
	case adv == algorithm.NoAdvantage:
		return "check the experience store and pass its rows through (no advantage fn)"
	case f.ComputeAdvantageInTrainer:
		return "trainer-side advantage fn " + adv
	default:
		return "pipeline-side advantage fn " + adv
	}
}

// Stages returns the stages of what an algorithm computes outside the
// trainer's model:
//
//   - experience algorithms with a pipeline-side advantage fn (grpo, opmd,
//     …): the fn as the experience pipeline's last operator; kl_penalty_fn
//     has no effect there (quirk Q-10);
//   - compute_advantage_in_trainer algorithms (ppo, rloo, …): the KL penalty
//     (if configured) and the trainer-side fn over the whole store as one
//     trainer batch (PPO's GAE needs a values column);
//   - sft and dpo schemas, and experience algorithms without an advantage
//     (raft): the store's shape is checked and every row passes through.
//
// kvs override the advantage fn's arguments (name=value).
func Stages(res *algorithm.Resolved, kvs []string) ([]pipeline.Stage, error) {
	f, adv := res.Type.Flags(), res.Config.Fn(algorithm.AdvantageFn)
	if f.Schema != algorithm.Experience || adv == algorithm.NoAdvantage {
		if len(kvs) > 0 {
			return nil, schema.BadInputf("algorithm %s has no advantage fn to take --arg", res.Config.AlgorithmType)
		}
		return []pipeline.Stage{pipeline.Check(string(f.Schema)+" algorithm", shapeColumns[f.Schema],
			[]string{schema.Chosen, schema.Rejected})}, nil
	}
	user, err := overlayArgs(adv, res.Config.Args(algorithm.AdvantageFn), kvs)
	if err != nil {
		return nil, err
	}
	var penalty *kl.Fn
	if f.ComputeAdvantageInTrainer && res.Config.Fn(algorithm.KLPenaltyFn) != "none" {
		if penalty, err = res.KL(algorithm.KLPenaltyFn); err != nil {
			return nil, err
		}
	}
	return AdvantageStages(advantage.Default(), adv, user, penalty)
}

// overlayArgs lays command-line args over the config's args of fn.
func overlayArgs(fn string, cfg map[string]any, kvs []string) (map[string]any, error) {
	if len(kvs) == 0 {
		return cfg, nil
	}
	spec, err := advantage.Default().Get(fn)
	if err != nil {
		return nil, err
	}
	vals, err := spec.Params.ParseKV(kvs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fn, err)
	}
	if cfg == nil {
		cfg = spec.Defaults()
	}
	return args.Overlay(cfg, vals), nil
}

// AdvantageStages returns the stages of the fn name of reg with its args
// (nil: default_args()): a pipeline-side fn runs as the experience
// pipeline runs it, a trainer-side fn over the store as one trainer batch,
// after the KL penalty when penalty is set.
func AdvantageStages(reg *advantage.Registry, name string, user map[string]any, penalty *kl.Fn) ([]pipeline.Stage, error) {
	spec, err := reg.Get(name)
	if err != nil {
		return nil, err
	}
	if spec.New.Side() == advantage.TrainerSide {
		fn, err := advantage.Trainer(reg, name, user)
		if err != nil {
			return nil, err
		}
		return pipeline.TrainerSide(name, fn, penalty), nil
	}
	fn, err := advantage.Pipeline(reg, name, user)
	if err != nil {
		return nil, err
	}
	return pipeline.PipelineSide(name, fn), nil
}

// StrategyStages returns the stages of add strategy name with command-line
// args kvs.
func StrategyStages(name string, kvs []string) ([]pipeline.Stage, error) {
	reg := addstrategy.Default()
	var user map[string]any
	if len(kvs) > 0 {
		spec, err := reg.Get(name)
		if err != nil {
			return nil, err
		}
		if user, err = spec.Params.ParseKV(kvs); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	fn, err := addstrategy.New(reg, name, user)
	if err != nil {
		return nil, err
	}
	return pipeline.PipelineSide("add_strategy/"+name, fn), nil
}

// FnStages returns the stages of advantage fn name with command-line args
// kvs (none: default_args()).
func FnStages(name string, kvs []string) ([]pipeline.Stage, error) {
	var user map[string]any
	if len(kvs) > 0 {
		var err error
		if user, err = overlayArgs(name, nil, kvs); err != nil {
			return nil, err
		}
	}
	return AdvantageStages(advantage.Default(), name, user, nil)
}

// shapeColumns are the column layouts each schema accepts when nothing is
// computed: a DPO store holds Trinity's records (both answers per row) or
// the trainer's rows (chosen and rejected rows of each pair adjacent, with
// the reference model's log-probs the DPO loss reads).
var shapeColumns = map[algorithm.Schema][][]string{
	algorithm.SFT:        {{schema.Tokens, schema.PromptLength}},
	algorithm.DPO:        {{schema.Tokens, schema.Chosen, schema.Rejected}, {schema.Tokens, schema.ActionMask, schema.RefLogprob}},
	algorithm.Experience: {{schema.Tokens, schema.PromptLength, schema.ActionMask}},
}

// correction returns the rollout corrector of a rollout_correction section,
// nil in bypass mode (the bypass_mode loss corrects) or when it neither
// weighs nor rejects.
func correction(section map[string]any) (*rollout.Corrector, error) {
	cfg, err := rollout.Parse(section)
	if err != nil {
		return nil, err
	}
	c, err := rollout.New(cfg)
	if err != nil || cfg.BypassMode || (!c.Weighted() && cfg.RS == "") {
		return nil, err
	}
	return c, nil
}
