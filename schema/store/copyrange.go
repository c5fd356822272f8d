package store

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// fileBuffer is a store's output file behind its write buffer. Byte ranges
// of an input (the column chunks a deferred read copies as they are) go
// from file to file in the kernel where the system can (copy_file_range on
// Linux), not through the process's memory.
type fileBuffer struct {
	*bufio.Writer
	f *os.File
}

// copyRange appends bytes [off, off+n) of src.
func (b *fileBuffer) copyRange(src *os.File, off, n int64) error {
	if err := b.Flush(); err != nil {
		return err
	}
	done, err := copyFileRange(b.f, src, off, n)
	if err != nil {
		return err
	}
	return copyThrough(b.Writer, src, off+done, n-done)
}

// copyThrough appends bytes [off, off+n) of src to w by reading them.
func copyThrough(w io.Writer, src *os.File, off, n int64) error {
	got, err := io.Copy(w, io.NewSectionReader(src, off, n))
	if err == nil && got < n {
		err = fmt.Errorf("%s: ends inside a column chunk at byte %d (file cut or overwritten)", src.Name(), off+got)
	}
	return err
}
