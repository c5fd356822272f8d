// Package golden is the one table of rftpipe's golden-vector runners: each
// kind of fixtures/conformance with the stage package that answers it
// (rollout_correction's policy-loss call forms, which need packages rollout
// and loss together, are answered here).
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
	"github.com/rftpipe/rftpipe/stages/registry"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// DeviceKinds are the kinds whose kernels a device evaluates.
var DeviceKinds = []string{"policy_loss", "kl", "entropy"}

// Float32Tolerance is the rule a device's float32 storage is checked at,
// whatever the case's own tolerance: float32 rounding of the inputs alone
// moves results by ~1e-8 relative, beyond the float64 paths' 1e-12.
var Float32Tolerance = conformance.Tolerance{Rtol: 1e-5, Atol: 1e-6}

// Run runs the golden vectors of dir (kinds: every file when empty) with ev
// evaluating the kernels. With f32 (ev stores inputs and gradient in
// float32, as a device does by default) every case is checked at
// Float32Tolerance, and a case that fails is ill-conditioned, reported in
// Report.Ill and not failed, when the CPU computing exactly on the same
// float32-rounded inputs (tokens.Float32Storage) fails it too: the vectors
// mark no case so, and this is the rule that tells a case float32 inputs
// cannot answer from a device that answers it wrong.
func Run(dir string, kinds []string, ev tokens.Evaluator, f32 bool) (conformance.Report, error) {
	reg, err := Registry(ev)
	if err != nil {
		return conformance.Report{}, err
	}
	if f32 {
		tol := Float32Tolerance
		reg.Tol = &tol
		if reg.Reference, err = Registry(tokens.Float32Storage(tokens.CPU)); err != nil {
			return conformance.Report{}, err
		}
	}
	return conformance.RunDir(dir, kinds, reg)
}

// kind is one golden kind: what its vectors check and its runner, ev
// evaluating the loss, KL and entropy kernels (CPU or a device).
type kind struct {
	doc    string
	runner func(ev tokens.Evaluator) conformance.Runner
}

// kinds is the table of golden kinds rftpipe implements, one line per kind.
var kinds = registry.Of("conformance kind", map[string]kind{
	"policy_loss": {"the policy loss fns: loss, every metric, gradient w.r.t. logprob",
		func(ev tokens.Evaluator) conformance.Runner { return loss.ConformanceRunnerOn(loss.Default(), ev) }},
	"kl": {"the KL fns: per-token kl, kl loss per aggregation mode (+ gradient), KL penalty on rewards",
		kl.ConformanceRunnerOn},
	"entropy": {"the entropy loss fns (+ gradient w.r.t. entropy)",
		entropy.ConformanceRunnerOn},
	"advantage": {"the advantage fns, group-based and trainer-side",
		func(tokens.Evaluator) conformance.Runner { return advantage.ConformanceRunner(advantage.Default()) }},
	"add_strategy": {"the add strategies of Trinity-RFT's old add_strategy package",
		func(tokens.Evaluator) conformance.Runner { return addstrategy.ConformanceRunner(addstrategy.Default()) }},
	"rollout_correction": {"verl's rollout correction, off-policy metrics, agg_loss and policy losses with IS weights",
		func(tokens.Evaluator) conformance.Runner { return rolloutRunner(loss.Default()) }},
	"operator": {"the experience operators",
		func(tokens.Evaluator) conformance.Runner { return operator.ConformanceRunner(operator.Default()) }},
})

// Kinds returns the golden kinds as a registry.Family (each entry's Doc is
// what its vectors check).
func Kinds() registry.Family {
	return kinds.Family(func(k kind) registry.Entry { return registry.Entry{Doc: k.doc} })
}

// Registry returns a conformance registry of every golden kind (Kinds); ev
// evaluates the loss, KL and entropy kernels (CPU or a device). Kinds of a
// golden directory missing here are counted as skipped.
func Registry(ev tokens.Evaluator) (*conformance.Registry, error) {
	reg := conformance.NewRegistry()
	for _, name := range kinds.Names() {
		k, err := kinds.Get(name)
		if err != nil {
			return nil, err
		}
		if err := reg.Add(name, k.runner(ev)); err != nil {
			return nil, err
		}
	}
	return reg, nil
}
