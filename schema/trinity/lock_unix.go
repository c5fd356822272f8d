//go:build unix

package trinity

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// lockFile opens the SQLite file at path for a writer, creating it when
// absent, and holds an exclusive flock(2) on it until it is closed:
// writers of one file run one after the other, from their first look at
// the tables to their commit. created is true when this writer created the
// file and it is still empty once locked: the writer may remove it on
// failure without removing what another writer committed (one that opened
// the file meanwhile finds it gone once it holds the lock, and starts
// over).
func lockFile(path string) (f *os.File, created bool, err error) {
	for {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		created = err == nil
		if errors.Is(err, fs.ErrExist) {
			f, err = os.OpenFile(path, os.O_RDWR, 0)
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since: create it
			}
		}
		if err != nil {
			return nil, false, err
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			if err != syscall.EINTR {
				break
			}
		}
		if err != nil {
			f.Close()
			return nil, false, err
		}
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			// A writer that opened the file we created may have taken the
			// lock first and committed into it: then it is not ours to
			// remove.
			return f, created && held.Size() == 0, nil
		}
		f.Close() // the file was removed (or replaced) while we waited
	}
}
