// Package hugepage maps the big buffers a streamed job reuses batch after
// batch (the token columns' values, the Parquet encoder's pages) outside
// the Go heap, advised to the kernel as transparent huge pages: a 2 MiB
// page is faulted in and cleared at once where 512 pages of 4 KiB fault one
// by one, and the buffers do not count toward the live heap, which the
// collector lets the heap grow to twice of.
package hugepage

import "sync/atomic"

// Size is the size of a huge page: mappings are whole multiples of it,
// aligned to it.
const Size = 2 << 20

// Budget is the most a process maps at once; past it, Alloc gives heap
// memory.
const Budget = 256 << 20

// mapped is the bytes mapped and not yet unmapped.
var mapped atomic.Int64

// Alloc returns n zeroed bytes, capacity n rounded up to a multiple of Size:
// a mapping of their own while the process has less than Budget mapped
// and the system grants one, else from the heap. Free gives a mapping back.
func Alloc(n int) []byte {
	size := (n + Size - 1) &^ (Size - 1)
	if mapped.Add(int64(size)) <= Budget {
		if b := mmap(size); b != nil {
			return b[:n]
		}
	}
	mapped.Add(-int64(size))
	return make([]byte, n, size)
}

// Free unmaps b, a buffer of Alloc's (whole, or its first bytes), when it is a
// mapping (a heap buffer is left to the collector). Nothing may use b after.
func Free(b []byte) {
	if size := cap(b); size > 0 && munmap(b[:size]) {
		mapped.Add(-int64(size))
	}
}
