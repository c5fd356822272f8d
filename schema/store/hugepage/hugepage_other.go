//go:build !linux

package hugepage

// mmap maps nothing here: Alloc gives heap memory.
func mmap(int) []byte { return nil }

func munmap([]byte) bool { return false }
