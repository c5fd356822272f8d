package gpu

import (
	"fmt"
	"io"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Devices are the values of a --device choice.
var Devices = []string{"auto", "cpu", "cuda"}

// Select returns the evaluator for a --device value and the device actually
// used ("cpu" or "cuda"):
//
//   - cpu: tokens.CPU;
//   - cuda: the CUDA evaluator (float32 storage, default chunking); without a
//     usable device an error wrapping schema.ErrBadInput, "no CUDA device
//     found: <reason>";
//   - auto: CUDA when a driver, NVRTC and a device answer, else the CPU; one
//     line on log says which and why.
//
// The CUDA evaluator lives for the process (its buffers are reused by every
// evaluation).
func Select(device string, log io.Writer) (tokens.Evaluator, string, error) {
	return SelectWith(device, Options{}, log)
}

// SelectWith is Select with the CUDA evaluator's options (e.g. float64
// storage for conformance checks).
func SelectWith(device string, opt Options, log io.Writer) (tokens.Evaluator, string, error) {
	switch device {
	case "cpu":
		return tokens.CPU, "cpu", nil
	case "cuda", "auto":
		d, err := Open()
		if err == nil {
			if device == "auto" {
				fmt.Fprintf(log, "device: cuda (%s)\n", d)
			}
			return d.NewEvaluator(opt), "cuda", nil
		}
		if device == "cuda" {
			return nil, "", schema.BadInputf("no CUDA device found: %v", err)
		}
		fmt.Fprintf(log, "device: cpu (no CUDA device: %v)\n", firstLine(err.Error()))
		return tokens.CPU, "cpu", nil
	}
	return nil, "", schema.BadInputf("unknown device %q (valid: %s)", device, strings.Join(Devices, ", "))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
