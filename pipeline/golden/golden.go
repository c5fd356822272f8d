// Package golden is the one table of rftpipe's golden-vector runners: each
// kind of fixtures/conformance with the stage package that answers it
// (rollout_correction's policy-loss call forms, which need packages rollout
// and loss together, are answered here).
// `rftpipe conformance` (package builder) and the device checks
// (RunDevice, from package gpu's and gpu/kernels' tests) run the same table.
package golden

import (
	"sync"

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

// KindReport counts the cases of one golden kind.
type KindReport struct {
	Kind string
	conformance.Report
}

// RunDevice runs the DeviceKinds of dir with ev one kind at a time, as
// Run does (the device checks of package gpu and gpu/kernels report per
// kind).
func RunDevice(dir string, ev tokens.Evaluator, f32 bool) ([]KindReport, error) {
	var out []KindReport
	for _, kind := range DeviceKinds {
		rep, err := Run(dir, []string{kind}, ev, f32)
		if err != nil {
			return nil, err
		}
		out = append(out, KindReport{Kind: kind, Report: rep})
	}
	return out, nil
}

// Runner builds the runner of a golden kind, ev evaluating the loss, KL
// and entropy kernels (CPU or a device).
type Runner func(ev tokens.Evaluator) conformance.Runner

// Kinds returns the table of golden kinds rftpipe implements, built once:
// one spec per kind, its Doc what its vectors check.
var Kinds = sync.OnceValue(func() *registry.Registry[Runner] {
	return registry.Must("conformance kind", []registry.Spec[Runner]{
		{Name: "policy_loss", Doc: "the policy loss fns: loss, every metric, gradient w.r.t. logprob",
			New: func(ev tokens.Evaluator) conformance.Runner { return loss.ConformanceRunnerOn(loss.Default(), ev) }},
		{Name: "kl", Doc: "the KL fns: per-token kl, kl loss per aggregation mode (+ gradient), KL penalty on rewards",
			New: kl.ConformanceRunnerOn},
		{Name: "entropy", Doc: "the entropy loss fns (+ gradient w.r.t. entropy)",
			New: entropy.ConformanceRunnerOn},
		{Name: "advantage", Doc: "the advantage fns, group-based and trainer-side",
			New: func(tokens.Evaluator) conformance.Runner { return advantage.ConformanceRunner(advantage.Default()) }},
		{Name: "add_strategy", Doc: "the add strategies of Trinity-RFT's old add_strategy package",
			New: func(tokens.Evaluator) conformance.Runner { return addstrategy.ConformanceRunner(addstrategy.Default()) }},
		{Name: "rollout_correction", Doc: "verl's rollout correction, off-policy metrics, agg_loss and policy losses with IS weights",
			New: func(tokens.Evaluator) conformance.Runner { return rolloutRunner(loss.Default()) }},
		{Name: "operator", Doc: "the experience operators",
			New: func(tokens.Evaluator) conformance.Runner { return operator.ConformanceRunner(operator.Default()) }},
	}...)
})

// Registry returns a conformance registry of every golden kind (Kinds); ev
// evaluates the loss, KL and entropy kernels (CPU or a device). Kinds of a
// golden directory missing here are counted as skipped.
func Registry(ev tokens.Evaluator) (*conformance.Registry, error) {
	var runners []conformance.Kind
	for _, name := range Kinds().Names() {
		k, err := Kinds().Get(name)
		if err != nil {
			return nil, err
		}
		runners = append(runners, conformance.Kind{Name: k.Name, Doc: k.Doc, New: k.New(ev)})
	}
	return conformance.NewRegistry(runners...)
}
