package objective

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/rftpipe/rftpipe/stages/parallel"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// Clock times one evaluation: it runs eval and returns its time in ms (wall
// time on the CPU, kernel time by device events on a GPU).
type Clock func(eval func() error) (float64, error)

// Wall is the Clock of wall time.
func Wall(eval func() error) (float64, error) {
	start := time.Now()
	err := eval()
	return float64(time.Since(start).Nanoseconds()) / 1e6, err
}

// Bench evaluates o on tokens.Synthetic(rows, width, seed) with ev: one
// warm-up evaluation, then runs timed ones; it returns the median time in
// ms. A NaN loss is an error (the inputs are well within every loss's
// domain).
func Bench(ev tokens.Evaluator, o *Objective, rows, width, runs int, seed uint64, clock Clock) (float64, error) {
	if runs < 1 {
		return 0, fmt.Errorf("bench: runs must be >= 1")
	}
	b := tokens.Synthetic(rows, width, seed)
	grad := make([]float64, b.Rows.Tokens())
	times := make([]float64, 0, runs)
	for i := 0; i <= runs; i++ { // run 0 is the warm-up
		ms, err := clock(func() error {
			res, err := o.Eval(ev, b, grad)
			if err == nil && math.IsNaN(res.Loss) {
				err = fmt.Errorf("bench: %s gave a NaN loss", o.Policy.Name())
			}
			return err
		})
		if err != nil {
			return 0, err
		}
		if i > 0 {
			times = append(times, ms)
		}
	}
	slices.Sort(times)
	med := times[len(times)/2]
	if len(times)%2 == 0 {
		med = (times[len(times)/2-1] + med) / 2
	}
	return med, nil
}

// PolicyOnly returns the objective of policy loss name alone (default
// args, no KL or entropy term), as the benchmarks time it.
func PolicyOnly(name string) (*Objective, error) {
	return New(Config{PolicyLoss: name, KLLoss: "none", Entropy: "none"})
}

// BenchResult is one timing of a policy loss's forward + gradient, as
// `rftpipe bench loss` prints it (its JSON form is what scripts read).
type BenchResult struct {
	Fn     string `json:"fn"`
	Shape  string `json:"shape"`
	Device string `json:"device"`
	// MedianMs is the median time of an evaluation: wall time on the CPU,
	// the kernels' time by CUDA events on a GPU (transfers excluded).
	MedianMs float64 `json:"median_ms"`
	MtokPerS float64 `json:"mtok_per_s"`
	// GBPerS is the fewest bytes the evaluation must move (inputs read
	// once, gradient written once: float64 on the CPU, float32 on a GPU)
	// over MedianMs.
	GBPerS float64 `json:"gb_per_s"`
	// CopyGBPerS is the measured copy bandwidth (bytes read plus written: a
	// copy on every core, or device to device), and CopyFraction GBPerS over
	// it.
	CopyGBPerS   float64 `json:"copy_gb_per_s"`
	CopyFraction float64 `json:"copy_fraction"`
	// TorchEagerMs and TorchCompileMs are torch's times for the same step
	// on the same device, and XEager, XCompile their ratios to MedianMs
	// (> 1: rftpipe is faster); absent without torch.
	TorchEagerMs   float64 `json:"torch_eager_ms,omitempty"`
	TorchCompileMs float64 `json:"torch_compile_ms,omitempty"`
	XEager         float64 `json:"x_eager,omitempty"`
	XCompile       float64 `json:"x_compile,omitempty"`
}

// NewBenchResult is the result of o's evaluation over rows × width tokens
// on device, with median time ms, the bytes it moved and the copy
// bandwidth (GB/s) it is held against (0 leaves the fraction out).
func NewBenchResult(o *Objective, device string, rows, width int, ms float64, bytes int64, copyGBPerS float64) BenchResult {
	r := BenchResult{Fn: o.Policy.Name(), Shape: fmt.Sprintf("%dx%d", rows, width), Device: device, MedianMs: ms,
		MtokPerS: float64(rows*width) / ms / 1e3, GBPerS: float64(bytes) / ms / 1e6, CopyGBPerS: copyGBPerS}
	if copyGBPerS > 0 {
		r.CopyFraction = r.GBPerS / copyGBPerS
	}
	return r
}

// WithTorch adds torch's eager and compiled times and the ratios.
func (r *BenchResult) WithTorch(eagerMs, compileMs float64) {
	r.TorchEagerMs, r.TorchCompileMs = eagerMs, compileMs
	r.XEager, r.XCompile = eagerMs/r.MedianMs, compileMs/r.MedianMs
}

// CPUBytesPerToken is the fewest bytes the CPU driver moves per token for
// o's policy loss: logprob and each per-token input it reads, and the
// gradient written, as float64.
func (o *Objective) CPUBytesPerToken() int {
	n := 2 // logprob, the gradient
	for _, in := range o.Policy.Def.Inputs {
		if tokens.IsTokenInput(in) {
			n++
		}
	}
	return 8 * n
}

// CPUCopyBandwidth is the machine's memory copy bandwidth in GB/s (bytes
// read plus bytes written), the ceiling of a kernel that streams its
// columns: the fastest of five copies of an n-byte buffer, after a warm-up,
// its parts copied by the workers of package parallel (one per core).
func CPUCopyBandwidth(n int) float64 {
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	parts := runtime.GOMAXPROCS(0)
	best := math.Inf(1)
	for i := 0; i <= 5; i++ {
		start := time.Now()
		parallel.For(parts, func(k int) {
			lo, hi := k*n/parts, (k+1)*n/parts
			copy(dst[lo:hi], src[lo:hi])
		})
		if d := time.Since(start).Seconds(); i > 0 && d < best {
			best = d
		}
	}
	return 2 * float64(n) / best / 1e9
}
