package algorithm

import (
	"fmt"

	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/registry"
)

// family returns the registry of the components of slot s.
func family(s Slot) registry.Family {
	switch s {
	case SampleStrategy:
		return SampleStrategies()
	case AdvantageFn:
		return advantage.Default()
	case PolicyLossFn:
		return loss.Default()
	case EntropyLossFn:
		return entropy.Registry()
	}
	return kl.Registry() // KLPenaltyFn, KLLossFn
}

// ComponentNames returns the names valid in slot s, sorted (for help texts
// and suggestions).
func ComponentNames(s Slot) []string {
	names := family(s).Names()
	if s == AdvantageFn {
		names = append(names, NoAdvantage)
	}
	return names
}

// params returns the argument schema of component name in slot s; an
// unknown name is an error listing the valid ones. NoAdvantage takes no
// arguments.
func params(s Slot, name string) (args.Schema, error) {
	if s == AdvantageFn && name == NoAdvantage {
		return nil, nil
	}
	return family(s).Params(name)
}

// ArgNames returns the argument names component name of slot s takes; an
// unknown name is an error listing the valid ones.
func ArgNames(s Slot, name string) ([]string, error) {
	p, err := params(s, name)
	if err != nil || p == nil {
		return nil, err
	}
	return p.Names(), nil
}

// defaultArgs returns the default_args() of component name in slot s, from
// the component's own registry; an unknown name is an error listing the
// valid ones. NoAdvantage has no arguments (nil).
func defaultArgs(s Slot, name string) (Args, error) {
	p, err := params(s, name)
	if err != nil || p == nil {
		return nil, err
	}
	return p.Defaults(), nil
}

// build constructs the component of slot s with its resolved arguments, to
// report bad names and arguments at resolution.
func (r *Resolved) build(s Slot) error {
	c := &r.Config
	switch s {
	case SampleStrategy:
		d, err := SampleStrategies().Get(c.Fn(s))
		if err != nil {
			return err
		}
		if _, err := d.Params.Resolve(c.Args(s)); err != nil {
			return fmt.Errorf("sample strategy %s: %w", d.Name, err)
		}
		return nil
	case AdvantageFn:
		if c.Fn(s) == NoAdvantage {
			if len(c.Args(s)) > 0 {
				return badf("advantage_fn none takes no arguments")
			}
			return nil
		}
		spec, err := advantage.Default().Get(c.Fn(s))
		if err != nil {
			return err
		}
		if spec.New.Side() == advantage.TrainerSide {
			_, err = advantage.Trainer(advantage.Default(), c.Fn(s), c.Args(s))
		} else {
			_, err = advantage.Pipeline(advantage.Default(), c.Fn(s), c.Args(s))
		}
		return err
	case PolicyLossFn:
		_, err := r.PolicyLoss()
		return err
	case EntropyLossFn:
		_, err := r.EntropyLoss()
		return err
	default:
		_, err := r.KL(s)
		return err
	}
}

// PolicyLoss returns the configured policy loss (loss.Def.FromConfig with
// the resolved args and loss_agg_mode).
func (r *Resolved) PolicyLoss() (*loss.Loss, error) {
	spec, err := loss.Default().Get(r.Config.Fn(PolicyLossFn))
	if err != nil {
		return nil, err
	}
	return spec.New.FromConfig(r.Config.Args(PolicyLossFn), r.Config.LossAggMode)
}

// PipelineAdvantage returns the configured pipeline-side advantage fn, or
// nil when the algorithm computes advantages in the trainer or has none.
func (r *Resolved) PipelineAdvantage() (advantage.PipelineFn, error) {
	if r.Type.flags.ComputeAdvantageInTrainer || r.Config.Fn(AdvantageFn) == NoAdvantage {
		return nil, nil
	}
	return advantage.Pipeline(advantage.Default(), r.Config.Fn(AdvantageFn), r.Config.Args(AdvantageFn))
}

// TrainerAdvantage returns the configured trainer-side advantage fn, or nil
// when the algorithm computes advantages in the pipeline.
func (r *Resolved) TrainerAdvantage() (advantage.TrainerFn, error) {
	if !r.Type.flags.ComputeAdvantageInTrainer {
		return nil, nil
	}
	return advantage.Trainer(advantage.Default(), r.Config.Fn(AdvantageFn), r.Config.Args(AdvantageFn))
}

// KL returns a fresh KL fn of slot s (KLPenaltyFn or KLLossFn): each slot
// is an independent object with its own coefficient, as upstream.
func (r *Resolved) KL(s Slot) (*kl.Fn, error) {
	return kl.New(r.Config.Fn(s), r.Config.Args(s))
}

// Objective returns the trainer's actor objective as the trainer combines
// its parts (spec kl_entropy.md): the resolved policy_loss_fn, kl_loss_fn
// and entropy_loss_fn, with algorithm.loss_agg_mode for all three.
func (r *Resolved) Objective() (*objective.Objective, error) {
	mode, err := agg.ParseMode(r.Config.LossAggMode)
	if err != nil {
		return nil, err
	}
	pl, err := r.PolicyLoss()
	if err != nil {
		return nil, err
	}
	klFn, err := r.KL(KLLossFn)
	if err != nil {
		return nil, err
	}
	entFn, err := r.EntropyLoss()
	if err != nil {
		return nil, err
	}
	return &objective.Objective{Policy: pl, KL: klFn, Entropy: entFn, Mode: mode}, nil
}

// EntropyLoss returns the configured entropy loss fn.
func (r *Resolved) EntropyLoss() (*entropy.Fn, error) {
	return entropy.New(r.Config.Fn(EntropyLossFn), r.Config.Args(EntropyLossFn))
}
