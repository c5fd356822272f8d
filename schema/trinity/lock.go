package trinity

import (
	"context"
	"os"
	"time"

	"github.com/rftpipe/rftpipe/schema/fspath"
)

// heldLock is an exclusive lock a Group holds on a file or directory
// (flock(2) where there is one), shared by its sessions that need it (two
// new databases in one directory): a second session of the group takes it
// at once, never waiting for its own job.
type heldLock struct {
	key  string
	f    *os.File
	refs int
}

// lockPoll is how often a lock held by another process is tried again.
const lockPoll = 50 * time.Millisecond

// lockPath takes the lock of path (an SQLite file or its directory),
// waiting while another process holds it, until loc's lock wait is over or
// ctx is done; the error then names the holder where the system tells it.
// A path that does not exist is an fs.ErrNotExist error. The lock is of
// the file path names once locked (one removed or replaced meanwhile is
// tried again).
// The caller holds g.mu.
func (g *Group) lockPath(ctx context.Context, loc Location, path string) (*heldLock, error) {
	key := fspath.Resolve(path)
	if l := g.locks[key]; l != nil {
		l.refs++
		return l, nil
	}
	deadline := time.Now().Add(loc.LockWait)
	for {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		for {
			ok, err := tryLock(f)
			if err != nil {
				f.Close()
				return nil, locErr(loc, "cannot lock %s: %v", path, err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				who := lockHolder(path)
				f.Close()
				return nil, locErr(loc, "another writer%s has held %s for %s (lock_wait=SECONDS waits longer)", who, path, loc.LockWait)
			}
			select {
			case <-ctx.Done():
				f.Close()
				return nil, locErr(loc, "waiting for the lock of %s: %v", path, context.Cause(ctx))
			case <-time.After(lockPoll):
			}
		}
		lst, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(lst, now) {
			l := &heldLock{key: key, f: f, refs: 1}
			g.locks[key] = l
			return l, nil
		}
		f.Close() // removed or replaced while we waited
	}
}

// release drops one hold of the lock; the last lets the next writer go.
// The caller holds g.mu.
func (g *Group) release(l *heldLock) {
	if l.refs--; l.refs == 0 {
		delete(g.locks, l.key)
		l.f.Close()
	}
}
