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

// Run runs the Kinds of dir with ev, as rftpipe conformance does
// (pipeline/golden.Run): f32 when ev stores in float32 (checked at
// golden.Float32Tolerance, ill-conditioned cases reported apart), else at
// each case's own tolerance.
func Run(dir string, ev tokens.Evaluator, f32 bool) ([]Report, error) {
	var out []Report
	for _, kind := range Kinds {
		rep, err := golden.Run(dir, []string{kind}, ev, f32)
		if err != nil {
			return nil, err
		}
		out = append(out, Report{Kind: kind, Report: rep})
	}
	return out, nil
}
