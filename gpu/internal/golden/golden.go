// Package golden runs the device-evaluated golden kinds of
// fixtures/conformance — policy_loss, kl and entropy — through rftpipe's
// table of golden runners (pipeline/golden) with a tokens.Evaluator
// (package gpu's CUDA evaluator, or gpu/kernels's kernel header compiled as
// C). kl's
// host-side methods (calculate_kl, apply_kl_penalty_to_reward) have no
// kernel and run on the host whatever the evaluator.
package golden

import (
	"github.com/rftpipe/rftpipe/pipeline/golden"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Report counts the cases of one golden kind.
type Report struct {
	Kind string
	conformance.Report
}

// Kinds are the golden kinds whose kernels a device evaluates.
var Kinds = golden.DeviceKinds

// Run runs the Kinds of dir with ev, through the table of golden runners
// rftpipe conformance runs (pipeline/golden). A non-nil tol replaces every
// case's own tolerance (float32 storage on a device is checked at
// 1e-5/1e-6, the float64 paths at their 1e-12).
func Run(dir string, ev tokens.Evaluator, tol *conformance.Tolerance) ([]Report, error) {
	reg, err := golden.Registry(ev)
	if err != nil {
		return nil, err
	}
	reg.Tol = tol
	var out []Report
	for _, kind := range Kinds {
		rep, err := conformance.RunDir(dir, []string{kind}, reg)
		if err != nil {
			return nil, err
		}
		out = append(out, Report{Kind: kind, Report: rep})
	}
	return out, nil
}
