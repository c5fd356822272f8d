package store

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// copyFileRange copies what it can of bytes [off, off+n) of src to offset
// at of dst with copy_file_range(2) and returns how many it copied: none
// where the kernel or file system cannot (the caller copies the rest).
func copyFileRange(dst, src *os.File, off, n, at int64) (int64, error) {
	done := int64(0)
	for done < n {
		roff, woff := off+done, at+done
		k, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, int(min(n-done, 1<<30)), 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil && done == 0 && (errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
			errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBADF)):
			return 0, nil
		case err != nil:
			return done, fmt.Errorf("copy from %s: %w", src.Name(), err)
		case k == 0:
			return done, fmt.Errorf("%s: ends inside a column chunk at byte %d (file cut or overwritten)", src.Name(), off+done)
		}
		done += int64(k)
	}
	return done, nil
}
