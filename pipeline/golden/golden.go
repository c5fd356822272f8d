// Package golden is the one table of rftpipe's golden-vector runners: each
// kind of fixtures/conformance with the stage package that answers it.
// `rftpipe conformance` (package build) and the device checks
// (gpu/internal/golden) run the same table.
package golden

import (
	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/operator"
	"github.com/rftpipe/rftpipe/stages/rollout"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// DeviceKinds are the kinds whose kernels a device evaluates.
var DeviceKinds = []string{"policy_loss", "kl", "entropy"}

// Registry returns every golden kind rftpipe implements, one line per kind;
// ev evaluates the loss, KL and entropy kernels (CPU or a device). Kinds of
// a golden directory missing here are counted as skipped.
func Registry(ev tokens.Evaluator) (*conformance.Registry, error) {
	reg := conformance.NewRegistry()
	for kind, run := range map[string]conformance.Runner{
		"policy_loss":        loss.ConformanceRunnerOn(loss.Default(), ev),
		"kl":                 kl.ConformanceRunnerOn(ev),
		"entropy":            entropy.ConformanceRunnerOn(ev),
		"advantage":          advantage.ConformanceRunner(advantage.Default()),
		"add_strategy":       addstrategy.ConformanceRunner(addstrategy.Default()),
		"rollout_correction": rollout.ConformanceRunner(loss.Default()),
		"operator":           operator.ConformanceRunner(operator.Default()),
	} {
		if err := reg.Add(kind, run); err != nil {
			return nil, err
		}
	}
	return reg, nil
}
