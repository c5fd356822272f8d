package store

import (
	"bytes"
	"testing"
)

// A column chunk's buffer grows in place while its capacity allows, and a
// growth keeps the bytes written (a chunk's bytes are not cleared).
func TestChunkBuffersGrow(t *testing.T) {
	var a chunkBuffers
	for _, tc := range []struct {
		name     string
		capacity int // of the buffer
		from, to int // grown from this length to that
		inPlace  bool
	}{
		{"within the capacity", 1 << 20, 256, 1 << 19, true},
		{"to the capacity", 1 << 16, 1 << 10, 1 << 16, true},
		{"past the capacity", 1 << 10, 1 << 10, 1 << 12, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, tc.from, tc.capacity)
			for i := range b {
				b[i] = byte(i%251 + 1)
			}
			want := bytes.Clone(b)
			g := a.Reallocate(tc.to, b)
			if len(g) != tc.to {
				t.Fatalf("Reallocate(%d) gave %d bytes", tc.to, len(g))
			}
			if moved := &g[0] != &b[0]; moved == tc.inPlace {
				t.Errorf("the buffer moved: %v, want %v", moved, !tc.inPlace)
			}
			if !bytes.Equal(g[:tc.from], want) {
				t.Errorf("the growth lost the bytes written")
			}
		})
	}
}
