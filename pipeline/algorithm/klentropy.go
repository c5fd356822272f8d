package algorithm

import (
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
)

// klEntropyDefaultArgs returns the default_args() of a KL fn (slots
// kl_penalty_fn, kl_loss_fn) or an entropy loss fn, from their registries.
func klEntropyDefaultArgs(s Slot, name string) (Args, error) {
	if s == EntropyLossFn {
		if _, err := entropy.Registry().Get(name); err != nil {
			return nil, err
		}
		return entropy.Schema().Defaults(), nil
	}
	sch, err := kl.Schema(name)
	if err != nil {
		return nil, err
	}
	return sch.Defaults(), nil
}

// buildKLEntropy configures the KL or entropy fn of slot s.
func (r *Resolved) buildKLEntropy(s Slot) error {
	var err error
	if s == EntropyLossFn {
		_, err = r.EntropyLoss()
	} else {
		_, err = r.KL(s)
	}
	return err
}

// KL returns a fresh KL fn of slot s (KLPenaltyFn or KLLossFn): each slot
// is an independent object with its own coefficient, as upstream.
func (r *Resolved) KL(s Slot) (*kl.Fn, error) {
	return kl.New(r.Config.Fn(s), r.Config.Args(s))
}

// EntropyLoss returns the configured entropy loss fn.
func (r *Resolved) EntropyLoss() (*entropy.Fn, error) {
	return entropy.New(r.Config.Fn(EntropyLossFn), r.Config.Args(EntropyLossFn))
}
