package objective

import "testing"

// TestBufBounded: windows of growing sizes, two buffers each in use at
// once, leave no more than two buffers on the free list.
func TestBufBounded(t *testing.T) {
	var e Eval
	for n := 1; n <= 50; n++ {
		a, b := e.buf(n*10), e.buf(n*10)
		if len(a) != n*10 || len(b) != n*10 {
			t.Fatalf("buffers of %d and %d values, want %d", len(a), len(b), n*10)
		}
		e.free = append(e.free, a, b)
		if len(e.free) > 2 {
			t.Fatalf("after window %d the free list holds %d buffers", n, len(e.free))
		}
	}
}
