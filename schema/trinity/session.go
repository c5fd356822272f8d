package trinity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rftpipe/rftpipe/schema/fspath"
)

// The Writers of one Group that write into one database share a session:
// one connection, one transaction and, on SQLite, one lock. Two outputs of
// a job in one database (its kept rows and its rejected rows, say) thus
// commit together, and the second never waits for a lock the first holds.
// The transaction commits when the last of its writers commits; an Abort
// of any of them rolls back all of them. Writers of different groups (of
// one process or not) wait for each other's locks.
//
// An SQLite file that does not exist is not created before the commit: the
// session writes a temp database beside it (named by the caller's
// CreateOptions.TempFile, so that a later run sweeps a killed one's) and
// links it into place once committed, so that a process killed at any point
// leaves no database behind. While the file does not exist, the session
// holds its directory's lock instead of the file's, so that concurrent
// writers of a new database still run one after the other: the next one
// finds the database the first committed.

// DefaultLockWait is how long a writer waits for another writer's lock on
// the database or the table when the URL has no lock_wait.
const DefaultLockWait = 60 * time.Second

// session is the write transaction of one database.
type session struct {
	g       *Group
	key     string // the database: an SQLite file's resolved path, a PostgreSQL DSN
	db      *sql.DB
	tx      *sql.Tx
	locks   []*heldLock // SQLite: the file's lock, or its directory's
	tmp     string      // SQLite: the temp database written in place of a new file
	target  string      // where tmp goes at the commit
	writers int         // writers joined
	ready   int         // writers that committed
	err     error       // set when the session ended without a commit
}

// Group is the writers of one job: those that write into one database
// share its transaction and its locks (CreateOptions.Group).
type Group struct {
	mu       sync.Mutex
	sessions map[string]*session
	locks    map[string]*heldLock
}

// NewGroup returns an empty group.
func NewGroup() *Group {
	return &Group{sessions: map[string]*session{}, locks: map[string]*heldLock{}}
}

// join returns the session of loc's database in g, opening it for the
// first writer.
func (g *Group) join(ctx context.Context, loc Location, opts CreateOptions) (*session, error) {
	key := loc.DSN
	if loc.Driver == "sqlite" {
		key = fspath.Resolve(loc.DSN)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.sessions[key]; s != nil {
		s.writers++
		return s, nil
	}
	s := &session{g: g, key: key, writers: 1}
	if err := s.open(ctx, loc, opts); err != nil {
		s.close()
		return nil, err
	}
	g.sessions[key] = s
	return s, nil
}

// open connects and begins the transaction, holding the locks.
func (s *session) open(ctx context.Context, loc Location, opts CreateOptions) error {
	path := loc.DSN
	if loc.Driver == "sqlite" {
		for {
			if l, err := s.g.lockPath(ctx, loc, path); err == nil {
				s.locks = append(s.locks, l)
				break
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			l, err := s.g.lockPath(ctx, loc, filepath.Dir(path))
			if err != nil {
				return err
			}
			s.locks = append(s.locks, l)
			if _, err := os.Stat(path); err == nil {
				s.close() // created meanwhile: write into it
				s.locks = nil
				continue
			}
			f, err := opts.tempFile(path)
			if err != nil {
				return locErr(loc, "cannot create %s: %v", path, err)
			}
			f.Close()
			s.tmp, s.target, path = f.Name(), path, f.Name()
			break
		}
	}
	at := loc
	at.DSN = path
	var err error
	if s.db, err = open(ctx, at, true); err != nil {
		return err
	}
	if s.tmp != "" {
		// A temp database needs no journal on disk: a killed write is
		// discarded whole (and would leave a journal the sweep misses).
		if _, err := s.db.ExecContext(ctx, "PRAGMA journal_mode = MEMORY"); err != nil {
			return locErr(loc, "cannot set up %s: %v", path, err)
		}
	}
	if s.tx, err = begin(ctx, loc, s.db); err != nil {
		return err
	}
	if loc.Driver == "sqlite" {
		// The commit waits for readers as long as a writer would.
		if _, err := s.tx.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", loc.LockWait.Milliseconds())); err != nil {
			return locErr(loc, "cannot set up %s: %v", path, err)
		}
	}
	return nil
}

// begin begins the transaction: on SQLite BEGIN IMMEDIATE, which takes the
// database's write lock, retried while another process (Trinity itself,
// which takes no file lock) holds it, until the lock wait is over or ctx is
// done.
func begin(ctx context.Context, loc Location, db *sql.DB) (*sql.Tx, error) {
	deadline := time.Now().Add(loc.LockWait)
	for {
		tx, err := db.BeginTx(ctx, nil)
		switch {
		case err == nil:
			return tx, nil
		case ctx.Err() != nil:
			return nil, locErr(loc, "waiting for the database's write lock: %v", context.Cause(ctx))
		case !busy(err):
			return nil, locErr(loc, "cannot begin a transaction: %v", err)
		case time.Now().After(deadline):
			return nil, locErr(loc, "another writer%s has held the database's write lock for %s (lock_wait=SECONDS waits longer)", lockHolder(loc.DSN), loc.LockWait)
		}
	}
}

// commit commits the transaction once every writer of the session has
// committed; before that it returns nil.
func (s *session) commit() error {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.ready++; s.ready < s.writers {
		return nil
	}
	err := s.tx.Commit()
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	s.db = nil
	if err == nil && s.tmp != "" {
		err = s.place()
	}
	s.end(errors.New("the database's transaction is over"))
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// place links the committed temp database into place: never over a file
// that appeared meanwhile (not an rftpipe writer's, which would have waited
// for the directory).
func (s *session) place() error {
	if err := os.Chmod(s.tmp, 0o644); err != nil { // a temp file is 0600; a buffer is meant to be shared
		return err
	}
	if err := os.Link(s.tmp, s.target); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s was created by another program while this write ran; nothing was written into it", s.target)
		}
		return err
	}
	syncDir(filepath.Dir(s.target))
	return nil
}

// abort rolls the session back, for every writer: their Commit then fails.
func (s *session) abort(why error) {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if s.err == nil {
		s.end(why)
	}
}

// end closes the session (after its commit, or rolling it back) and lets
// the next writer of the database go.
func (s *session) end(why error) {
	s.err = why
	if s.tx != nil {
		s.tx.Rollback() // after a commit: sql.ErrTxDone
	}
	s.close()
	if s.g.sessions[s.key] == s {
		delete(s.g.sessions, s.key)
	}
}

// close closes the connection, removes the temp database and releases the
// locks.
func (s *session) close() {
	if s.db != nil {
		s.db.Close()
		s.db = nil
	}
	if s.tmp != "" {
		os.Remove(s.tmp)
		s.tmp = ""
	}
	for _, l := range s.locks {
		s.g.release(l)
	}
	s.locks = nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
