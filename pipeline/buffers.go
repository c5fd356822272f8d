package pipeline

import (
	"math/bits"

	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema/store/hugepage"
)

// tokenBuffers is the allocator of the buffers of the per-token list
// columns the stages build (advantages, returns, the lists set from
// per-token values): a buffer comes back when the last array holding it
// is released (the writer's, once the column is encoded), and the next
// batch's column is built in it, so its pages are not faulted in and
// cleared afresh for every batch. Buffers come in power-of-two sizes, one
// free list a size, so that any buffer of a list fits the next batch, from
// a huge page up mapped as huge pages (package hugepage); their bytes are
// not cleared: the builders write every byte they ask for.
type tokenBuffers struct{}

// tokenBuffersKept is how many returned buffers of one size a process
// keeps: more than a streamed job holds at once (the batches between the
// stages and the writer's window). The lists are not emptied by the
// garbage collector, as a sync.Pool is at every cycle: a job whose batches
// come back after a collection would fault in fresh buffers again.
const tokenBuffersKept = 8

// tokenBufferFree holds the returned buffers by the log2 of their size.
var tokenBufferFree = func() (free [bits.UintSize]chan []byte) {
	for k := range free {
		free[k] = make(chan []byte, tokenBuffersKept)
	}
	return free
}()

// tokenBuffer returns a buffer of n bytes from tokenBuffers: the builder
// writes all of them, and releases its reference once the arrays built
// on it hold theirs.
func tokenBuffer(n int) *memory.Buffer {
	return memory.NewBufferWithAllocator(tokenBuffers{}.Allocate(n), tokenBuffers{})
}

// Allocate implements memory.Allocator.
func (tokenBuffers) Allocate(n int) []byte {
	if n == 0 {
		return nil
	}
	k := bits.Len(uint(n - 1))
	select {
	case b := <-tokenBufferFree[k]:
		return b[:n]
	default:
		if 1<<k >= hugepage.Size {
			return hugepage.Alloc(1 << k)[:n]
		}
		return make([]byte, n, 1<<k)
	}
}

// Reallocate implements memory.Allocator.
func (a tokenBuffers) Reallocate(n int, b []byte) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	grown := a.Allocate(n)
	copy(grown, b)
	a.Free(b)
	return grown
}

// Free implements memory.Allocator.
func (tokenBuffers) Free(b []byte) {
	if c := cap(b); c > 0 && c&(c-1) == 0 { // a buffer of Allocate's
		select {
		case tokenBufferFree[bits.Len(uint(c-1))] <- b[:c]:
		default: // enough kept
			hugepage.Free(b)
		}
	}
}
