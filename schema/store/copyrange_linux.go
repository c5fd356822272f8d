package store

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// copyFileRange copies what it can of bytes [off, off+n) of src to offset
// at of dst with copy_file_range(2) and returns how many it copied, which
// stops short where the kernel or file system refuses (the caller copies
// the rest).
// When off and at are congruent modulo alignBlock, the bytes before off's
// next block boundary go first, alone: the kernel clones a range (on file
// systems that share blocks) only from a block-aligned start, and copies
// the whole of a range that starts elsewhere.
func copyFileRange(dst, src *os.File, off, n, at int64) (int64, error) {
	done := int64(0)
	head := n
	if (off-at)&(alignBlock-1) == 0 && off&(alignBlock-1) != 0 {
		head = min(n, alignBlock-off&(alignBlock-1))
	}
	for done < n {
		roff, woff := off+done, at+done
		want := min(n-done, 1<<30)
		if done < head {
			want = head - done
		}
		k, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, int(want), 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
			errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBADF):
			return done, nil // the caller copies the rest (after a head, say)
		case err != nil:
			return done, fmt.Errorf("copy from %s: %w", src.Name(), err)
		case k == 0:
			return done, fmt.Errorf("%s: ends inside a column chunk at byte %d (file cut or overwritten)", src.Name(), off+done)
		}
		done += int64(k)
	}
	return done, nil
}
