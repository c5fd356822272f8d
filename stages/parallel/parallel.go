// Package parallel runs a loop's chunks over the cores: the one worker
// pool of the per-token passes (the loss and correction kernels, the token
// columns' decoding), so that each sums its chunks' parts in chunk order
// and gives the same bits whatever GOMAXPROCS is.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// For calls fn(k) for every chunk k in [0, n), the chunks handed out in
// order to GOMAXPROCS goroutines (at most n); with one, every chunk runs in
// order on the calling goroutine. For returns when every call has.
func For(n int, fn func(k int)) {
	WithScratch(n, func() struct{} { return struct{}{} }, func(_ struct{}, k int) { fn(k) })
}

// WithScratch is For with state of each worker's own: a worker makes it
// with newS before its first chunk and passes it to every call it runs, so
// a call may use it as scratch space without locking.
func WithScratch[S any](n int, newS func() S, fn func(s S, k int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		if n > 0 {
			s := newS()
			for k := range n {
				fn(s, k)
			}
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			s := newS()
			for k := int(next.Add(1) - 1); k < n; k = int(next.Add(1) - 1) {
				fn(s, k)
			}
		})
	}
	wg.Wait()
}

// SpanSize is the number of values a per-token pass hands a worker at a
// time: 512 KiB of float64, enough to outweigh the hand-off, few enough
// that a batch of 8,192 rows of 256 tokens spreads over 32 workers.
const SpanSize = 1 << 16

// Spans calls fn(lo, hi) for the consecutive spans of size elements (the
// last one shorter) that cover [0, n), over the cores as For hands out
// chunks: for an elementwise pass over a flat slice, each span's elements
// written by one call alone. size must be positive.
func Spans(n, size int, fn func(lo, hi int)) {
	For((n+size-1)/size, func(k int) { fn(k*size, min((k+1)*size, n)) })
}
