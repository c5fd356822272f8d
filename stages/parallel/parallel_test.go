package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestFor: every chunk runs once whatever GOMAXPROCS, no chunk count too
// small (0, 1) or large; each worker's scratch is its own (no two calls
// share one at once) and there are at most GOMAXPROCS of them.
func TestFor(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		prev := runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 3, 100} {
			runs := make([]atomic.Int32, n)
			For(n, func(k int) { runs[k].Add(1) })
			var made, shared atomic.Int32
			WithScratch(n, func() *atomic.Int32 { made.Add(1); return new(atomic.Int32) }, func(s *atomic.Int32, k int) {
				if s.Add(1) != 1 {
					shared.Add(1)
				}
				runs[k].Add(1)
				s.Add(-1)
			})
			for k := range runs {
				if c := runs[k].Load(); c != 2 {
					t.Errorf("GOMAXPROCS %d, %d chunks: chunk %d ran %d times, want once each by For and WithScratch", procs, n, k, c)
				}
			}
			if shared.Load() != 0 {
				t.Errorf("GOMAXPROCS %d, %d chunks: two calls at once shared a scratch", procs, n)
			}
			if m := int(made.Load()); m > procs || m > n {
				t.Errorf("GOMAXPROCS %d, %d chunks: %d scratches", procs, n, m)
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

// TestSpans: the spans cover [0, n) once each, in pieces of size (the last
// shorter), for lengths around the size.
func TestSpans(t *testing.T) {
	for _, procs := range []int{1, 8} {
		prev := runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 7, 8, 9, 64, 1000} {
			seen := make([]atomic.Int32, n)
			Spans(n, 8, func(lo, hi int) {
				if lo%8 != 0 || hi-lo > 8 || hi <= lo || hi > n || hi-lo < 8 && hi != n {
					t.Errorf("GOMAXPROCS %d, n %d: span [%d, %d)", procs, n, lo, hi)
				}
				for i := lo; i < hi; i++ {
					seen[i].Add(1)
				}
			})
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Errorf("GOMAXPROCS %d, n %d: element %d in %d spans", procs, n, i, c)
				}
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}
