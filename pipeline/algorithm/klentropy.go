package algorithm

// The KL and entropy registries are being written (stages/loss); until
// they land, these two functions know their names and default_args() (spec
// kl_entropy.md) and are the only place to switch to the registries.

import (
	"slices"
	"strings"
)

// klEntropyDefaultArgs returns the default_args() of a KL or entropy fn.
func klEntropyDefaultArgs(s Slot, name string) (Args, error) {
	if s == EntropyLossFn {
		names := []string{"default", "mix", "none"}
		if !slices.Contains(names, name) {
			return nil, badf("unknown entropy loss fn %q (valid: %s)", name, strings.Join(names, ", "))
		}
		return Args{"entropy_coef": 0.0}, nil
	}
	names := []string{"abs", "corrected_k3", "k1", "k2", "k3", "low_var_kl", "none"}
	if !slices.Contains(names, name) {
		return nil, badf("unknown KL fn %q (valid: %s)", name, strings.Join(names, ", "))
	}
	return Args{"adaptive": false, "kl_coef": 0.001}, nil
}

// buildKLEntropy checks the name of a KL or entropy fn.
func (r *Resolved) buildKLEntropy(s Slot) error {
	_, err := klEntropyDefaultArgs(s, r.Config.Fn(s))
	return err
}
