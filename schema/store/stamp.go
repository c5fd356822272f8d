package store

import (
	"os"
	"time"

	"github.com/rftpipe/rftpipe/schema"
)

// fileStamp is what a reader notes of a file when it opens it, to tell at the
// end whether the file changed while it was read: an input appended to,
// truncated or replaced mid-read must fail, never read as a shorter (or
// longer) store.
type fileStamp struct {
	size  int64
	mtime time.Time
	info  os.FileInfo
	// object: an s3:// object, whose reads are all of the version opened
	// (objstore.Object), so nothing is left to check.
	object bool
}

func stampOf(f *os.File) (fileStamp, error) {
	st, err := f.Stat()
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{size: st.Size(), mtime: st.ModTime(), info: st}, nil
}

// check compares the file now at path with the stamp.
func (s fileStamp) check(path string) error {
	if s.object {
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return schema.Errorf(path, -1, "", "file removed or replaced while it was read")
	case !os.SameFile(st, s.info):
		return schema.Errorf(path, -1, "", "file replaced while it was read")
	case st.Size() != s.size || !st.ModTime().Equal(s.mtime):
		return schema.Errorf(path, -1, "", "file changed while it was read (size %d, now %d)", s.size, st.Size())
	}
	return nil
}
