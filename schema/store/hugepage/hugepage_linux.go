package hugepage

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mappings holds the first byte of every mapping mmap made and munmap has
// not unmapped.
var mappings sync.Map // *byte → struct{}

// mmap returns an anonymous mapping of size bytes (a multiple of Size)
// aligned to Size and advised as huge pages, or nil.
func mmap(size int) []byte {
	// Mapped a huge page longer, and cut to the aligned size bytes inside.
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size+Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	head := int(-uintptr(p) & (Size - 1))
	if head > 0 {
		unix.MunmapPtr(p, uintptr(head))
	}
	if tail := Size - head; tail > 0 {
		unix.MunmapPtr(unsafe.Add(p, head+size), uintptr(tail))
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, head)), size)
	unix.Madvise(b, unix.MADV_HUGEPAGE) // advice: the kernel may not take it
	mappings.Store(&b[0], struct{}{})
	return b
}

// munmap unmaps b when it is a mapping of mmap's, and says whether it was.
func munmap(b []byte) bool {
	if _, ok := mappings.LoadAndDelete(&b[0]); !ok {
		return false
	}
	unix.MunmapPtr(unsafe.Pointer(&b[0]), uintptr(len(b)))
	return true
}
