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

// Workers is the number of workers For runs n chunks on: GOMAXPROCS, at
// most n.
func Workers(n int) int { return max(min(runtime.GOMAXPROCS(0), n), 1) }

// For calls fn(w, k) for every chunk k in [0, n), the chunks handed out in
// order to Workers(n) goroutines; w (0 ≤ w < Workers(n)) is the worker
// running the call, for per-worker scratch space. One worker runs every
// chunk in order on the calling goroutine. For returns when every call has.
func For(n int, fn func(w, k int)) {
	workers := Workers(n)
	if workers == 1 {
		for k := range n {
			fn(0, k)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < n; k = int(next.Add(1) - 1) {
				fn(w, k)
			}
		})
	}
	wg.Wait()
}
