package hugepage

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestAlloc: Alloc gives zeroed, writable buffers of the length asked, their
// capacity rounded up to whole huge pages; on Linux each is a mapping
// aligned to a huge page, which Free unmaps (the bytes mapped back to what
// they were), and a buffer past Budget comes from the heap, which Free
// leaves alone.
func TestAlloc(t *testing.T) {
	base := mapped.Load()
	var bufs [][]byte
	for _, n := range []int{1, Size - 1, Size, Size + 1, 3*Size + 5} {
		b := Alloc(n)
		if len(b) != n || cap(b) != (n+Size-1)/Size*Size {
			t.Fatalf("Alloc(%d): length %d capacity %d", n, len(b), cap(b))
		}
		for i, v := range b[:cap(b)] {
			if v != 0 {
				t.Fatalf("Alloc(%d): byte %d is %d", n, i, v)
			}
		}
		for i := range b {
			b[i] = byte(i)
		}
		if runtime.GOOS == "linux" && uintptr(unsafe.Pointer(&b[0]))%Size != 0 {
			t.Fatalf("Alloc(%d) at %p: not aligned to a huge page", n, &b[0])
		}
		bufs = append(bufs, b)
	}
	if runtime.GOOS == "linux" && mapped.Load()-base != 9*Size {
		t.Fatalf("%d bytes mapped, want %d", mapped.Load()-base, 9*Size)
	}
	over := Alloc(Budget) // past the budget with the buffers above: the heap's
	if runtime.GOOS == "linux" && mapped.Load()-base != 9*Size {
		t.Fatalf("past the budget: %d bytes mapped, want %d", mapped.Load()-base, 9*Size)
	}
	if len(over) != Budget {
		t.Fatalf("past the budget: %d bytes, want %d", len(over), Budget)
	}
	Free(over)
	for _, b := range bufs {
		Free(b)
	}
	if got := mapped.Load(); got != base {
		t.Fatalf("%d bytes mapped after Free, want %d", got, base)
	}
}
