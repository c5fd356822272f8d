package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestFor: every chunk runs once, on a worker index in range, whatever
// GOMAXPROCS; no chunk count is too small (0, 1) or large.
func TestFor(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		prev := runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 3, 100} {
			runs := make([]atomic.Int32, n)
			var bad atomic.Int32
			For(n, func(w, k int) {
				if w < 0 || w >= Workers(n) {
					bad.Add(1)
				}
				runs[k].Add(1)
			})
			if bad.Load() != 0 {
				t.Errorf("GOMAXPROCS %d, %d chunks: a worker index out of [0, %d)", procs, n, Workers(n))
			}
			for k := range runs {
				if c := runs[k].Load(); c != 1 {
					t.Errorf("GOMAXPROCS %d, %d chunks: chunk %d ran %d times", procs, n, k, c)
				}
			}
			if w := Workers(n); w < 1 || w > max(procs, 1) || n > 0 && w > n {
				t.Errorf("GOMAXPROCS %d, %d chunks: %d workers", procs, n, w)
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}
