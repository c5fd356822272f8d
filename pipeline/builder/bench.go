package builder

import (
	"fmt"
	"io"

	"github.com/rftpipe/rftpipe/gpu"
	"github.com/rftpipe/rftpipe/pipeline/golden"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// BenchOptions are the options of `bench loss`: the policy loss Fn (its
// default arguments) over Rows × Width seeded random tokens, timed Runs
// times after a warm-up on Device (cpu, cuda or auto); Torch also times
// torch eager and torch.compile on a CUDA device.
type BenchOptions struct {
	Fn                string
	Rows, Width, Runs int
	Seed              uint64
	Device            string
	Torch             bool
	// Log takes the device choice and torch's failure to give ratios.
	Log io.Writer
}

// BenchLoss times forward + gradient of a policy loss: on the CPU the
// median wall time and the bandwidth against a copy on every core; on a
// CUDA device the median kernel time (transfers excluded) and the
// bandwidth against a measured device-to-device copy, with torch's times
// when asked and present.
func BenchLoss(o BenchOptions) (objective.BenchResult, error) {
	obj, err := objective.PolicyOnly(o.Fn)
	if err != nil {
		return objective.BenchResult{}, err
	}
	if o.Device != "cpu" {
		_, used, err := gpu.Select(o.Device, o.Log)
		if err != nil {
			return objective.BenchResult{}, err
		}
		if used == "cuda" {
			return benchCUDA(o, obj)
		}
	}
	med, err := objective.Bench(tokens.CPU, obj, o.Rows, o.Width, o.Runs, o.Seed, objective.Wall)
	if err != nil {
		return objective.BenchResult{}, err
	}
	return objective.NewBenchResult(obj, "cpu", o.Rows, o.Width, med, int64(o.Rows*o.Width*obj.CPUBytesPerToken()), objective.CPUCopyBandwidth(1<<28)), nil
}

// benchCUDA is BenchLoss on the CUDA device.
func benchCUDA(o BenchOptions, obj *objective.Objective) (objective.BenchResult, error) {
	d, err := gpu.Open()
	if err != nil {
		return objective.BenchResult{}, err
	}
	copyBW, err := d.CopyBandwidth(1 << 30)
	if err != nil {
		return objective.BenchResult{}, err
	}
	r, err := d.BenchLoss(obj, o.Rows, o.Width, o.Runs, o.Seed, copyBW)
	if err != nil || !o.Torch {
		return r, err
	}
	eager, compiled, err := gpu.TorchTimes(r.Fn, o.Rows, o.Width, o.Runs)
	if err != nil {
		fmt.Fprintf(o.Log, "torch: no ratios: %v\n", err)
	} else {
		r.WithTorch(eager, compiled)
	}
	return r, nil
}

// ConformanceOptions are the options of `conformance`: the golden vectors
// of Dir (Kinds: every KIND.json when empty) on Device; Float32 checks a
// device's float32 storage (golden.Run says how such a run is judged).
type ConformanceOptions struct {
	Dir     string
	Kinds   []string
	Device  string
	Float32 bool
	Log     io.Writer
}

// ConformanceReport is a conformance run's report, with the device it ran
// on and, on CUDA, the line saying on what and at which tolerance.
type ConformanceReport struct {
	conformance.Report
	Device, Checking string
}

// Conformance runs the golden vectors against the runners of package
// golden.
func Conformance(o ConformanceOptions) (*ConformanceReport, error) {
	ev, device, err := gpu.SelectWith(o.Device, gpu.Options{Float64: !o.Float32}, o.Log)
	if err != nil {
		return nil, err
	}
	if o.Float32 && device != "cuda" {
		return nil, schema.Usagef("--float32 checks a device's float32 storage: it needs --device cuda (the CPU computes in float64)")
	}
	r := &ConformanceReport{Device: device}
	if device == "cuda" {
		rule := "each case's own tolerance"
		if o.Float32 {
			rule = fmt.Sprintf("rtol %g / atol %g; ill-conditioned: the CPU on the same float32 inputs fails too",
				golden.Float32Tolerance.Rtol, golden.Float32Tolerance.Atol)
		}
		r.Checking = fmt.Sprintf("checking on cuda: %s, at %s", ev, rule)
	}
	r.Report, err = golden.Run(o.Dir, o.Kinds, ev, o.Float32)
	return r, err
}
