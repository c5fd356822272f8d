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
