//go:build !unix

package trinity

import (
	"errors"
	"io/fs"
	"os"
)

// lockFile opens the SQLite file at path for a writer, creating it when
// absent (created). Without flock(2), writers of one file are serialised
// by SQLite's own lock only (BEGIN IMMEDIATE).
func lockFile(path string) (f *os.File, created bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
		return f, false, err
	}
	return f, err == nil, err
}
