package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
)

// Temp files and directories of rftpipe carry its name and the writing
// process's id: ".rftpipe-PID-TARGET.RANDOM.tmp" beside a target, and
// "rftpipe-run-PID-RANDOM" in the temp dir. The leading dot and the .tmp
// ending keep store globs, directory listings (Expand skips hidden files)
// and DuckDB's *.parquet globs off them; the process id lets a later run
// tell the leftovers of a killed process (SIGKILL runs no cleanup) from the
// files of a live one, and sweep them.

const (
	tempFilePrefix = ".rftpipe-"
	tempFileSuffix = ".tmp"
	tempDirPrefix  = "rftpipe-run-"
)

// started is when this process started (near enough): a temp file newer
// than it may be a live process's, whatever its id says.
var started = time.Now()

// CreateTemp creates the temp file for an output written to target, beside
// it, after sweeping stale temp files of dead rftpipe processes from the
// directory.
func CreateTemp(target string) (*os.File, error) {
	dir := filepath.Dir(target)
	SweepTemps(dir)
	return os.CreateTemp(dir, tempFilePrefix+strconv.Itoa(os.Getpid())+"-"+filepath.Base(target)+".*"+tempFileSuffix)
}

// SweepTemps removes, from dir, the temp files that rftpipe processes no
// longer running left behind: only files named as CreateTemp names them,
// owned by this user, older than this process, whose writer's process id is
// not alive. Errors are ignored: a sweep is a courtesy.
func SweepTemps(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, tempFilePrefix) || !strings.HasSuffix(name, tempFileSuffix) || e.IsDir() {
			continue
		}
		if stale(filepath.Join(dir, name), strings.TrimPrefix(name, tempFilePrefix)) {
			os.Remove(filepath.Join(dir, name))
		}
	}
}

// TempDir creates a uniquely named spill directory for this process in the
// system temp dir, after removing the spill directories of rftpipe processes
// no longer running. The caller removes it when done.
func TempDir() (string, error) {
	root := os.TempDir()
	if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			name := e.Name()
			if e.IsDir() && strings.HasPrefix(name, tempDirPrefix) && stale(filepath.Join(root, name), strings.TrimPrefix(name, tempDirPrefix)) {
				os.RemoveAll(filepath.Join(root, name))
			}
		}
	}
	return os.MkdirTemp(root, tempDirPrefix+strconv.Itoa(os.Getpid())+"-")
}

// stale reports whether path, whose name continues with "PID-…", is a
// leftover: owned by this user, older than this process, and its process
// gone.
func stale(path, rest string) bool {
	i := strings.IndexByte(rest, '-')
	if i <= 0 {
		return false
	}
	pid, err := strconv.Atoi(rest[:i])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	st, err := os.Lstat(path)
	if err != nil || !st.ModTime().Before(started) || !ownedByMe(st) {
		return false
	}
	return !alive(pid)
}

// An output path that already exists and is not a regular file is never
// replaced by the rename that writes an output atomically. The rule, the
// one place it is enforced (target, which every output goes through:
// Create, WriteFile, CheckWritable, Target):
//
//   - a symbolic link is followed: the file it points to is the output,
//     replaced atomically, and the link stays (a link to nothing is
//     refused);
//   - a FIFO or character device (a pipe, a terminal, /dev/stdout,
//     /dev/null) is a stream: a text output (WriteFile: metrics, reports,
//     query results) is written straight through to it, not atomically (a
//     FIFO with no reader is refused rather than waited on); a store, which
//     is whole or absent, is refused;
//   - a directory, socket or any other kind of file is refused.

// target returns the file an output at path replaces, or through: path is
// a stream that an output that can (stream) writes straight through.
func target(path string, stream bool) (to string, through bool, err error) {
	if objstore.IsURL(path) {
		return path, false, nil // an object: written whole by its upload
	}
	lst, err := os.Lstat(path)
	if err != nil {
		return path, false, nil // no such file: made by the rename
	}
	st, err := os.Stat(path) // the kernel follows links, /proc/self/fd/N's to a pipe too
	if err != nil {
		return "", false, schema.Errorf(path, -1, "", "output is a symbolic link to nothing that can be written (%v)", err)
	}
	switch isStream := st.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) != 0; {
	case isStream && stream:
		return path, true, nil
	case isStream:
		return "", false, schema.Errorf(path, -1, "", "output is a %s, not a file: a store is written whole or not at all, so it needs a file", fileKind(st))
	case !st.Mode().IsRegular():
		return "", false, schema.Errorf(path, -1, "", "output is a %s, not a file; name a file", fileKind(st))
	case lst.Mode()&os.ModeSymlink == 0:
		return path, false, nil
	}
	if to, err = filepath.EvalSymlinks(path); err != nil {
		return "", false, schema.Errorf(path, -1, "", "output: cannot follow the symbolic link: %v", err)
	}
	return to, false, nil
}

func fileKind(st os.FileInfo) string {
	switch m := st.Mode(); {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "block device"
	}
	return "special file"
}

// Target returns the file an output store at path replaces (a symbolic
// link's target), refusing a path that is no file (target): for writers
// that rename a temp file of their own into place.
func Target(path string) (string, error) {
	to, _, err := target(path, false)
	return to, err
}

// WriteFile writes the file path atomically, as Writer writes a store:
// write fills a temp file beside path (CreateTemp), which is synced, made
// readable by all and renamed into place; on any error it is removed and
// path is untouched. Every output of rftpipe that is not a store (metrics,
// Prometheus files, reports, query results) is written through it. A path
// that is a stream (a FIFO, a terminal, /dev/stdout) is written straight
// through; see target. An s3:// path is written as a Writer writes one:
// streamed to an upload completed when write returns without error,
// aborted otherwise or when ctx is done (a signal).
func WriteFile(ctx context.Context, path string, write func(w io.Writer) error) error {
	to, through, err := target(path, true)
	if err != nil {
		return err
	}
	if through {
		return writeThrough(path, write)
	}
	if objstore.IsURL(path) {
		return writeObject(ctx, path, write)
	}
	tmp, err := CreateTemp(to)
	if err != nil {
		return fmt.Errorf("%s: cannot create output: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	err = tmp.Chmod(0o644)      // CreateTemp makes 0600 files; outputs are meant to be shared
	if err == nil {
		bw := bufio.NewWriter(tmp)
		if err = write(bw); err == nil {
			err = bw.Flush()
		}
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), to)
	}
	if err != nil && !errors.Is(err, schema.ErrBadInput) {
		return fmt.Errorf("%s: %w", path, err) // a fault (disk full): name the output
	}
	return err
}

// writeObject is WriteFile for an s3:// path.
func writeObject(ctx context.Context, path string, write func(w io.Writer) error) error {
	obj, err := newObjectOut(ctx, path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(obj)
	if err = write(bw); err == nil {
		err = bw.Flush()
	}
	if err != nil {
		obj.Abort()
		return err
	}
	return obj.Complete()
}

// writeThrough writes to the stream path, opened without waiting for a
// reader: a FIFO nobody reads is an error, not a hang.
func writeThrough(path string, write func(w io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ENXIO) {
			return schema.Errorf(path, -1, "", "output is a FIFO that no process reads")
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	bw := bufio.NewWriter(f)
	if err = write(bw); err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, schema.ErrBadInput) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return err
}

// CheckWritable reports whether an output can be written at path (it is a
// file or a stream, target; its directory exists and takes a temp file),
// so a job can refuse a bad output path before it starts its work.
func CheckWritable(path string) error {
	if objstore.IsURL(path) {
		return checkObjectWritable(path)
	}
	to, through, err := target(path, true)
	if err != nil || through {
		return err
	}
	tmp, err := CreateTemp(to)
	if err != nil {
		return schema.Errorf(path, -1, "", "cannot write the output here: %v", err)
	}
	tmp.Close()
	return os.Remove(tmp.Name())
}
