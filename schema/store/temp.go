package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/schema"
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

// WriteFile writes the file path atomically, as Writer writes a store:
// write fills a temp file beside path (CreateTemp), which is synced, made
// readable by all and renamed into place; on any error it is removed and
// path is untouched. Every output of rftpipe that is not a store (metrics,
// Prometheus files, reports, query results) is written through it.
func WriteFile(path string, write func(w io.Writer) error) error {
	tmp, err := CreateTemp(path)
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
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil && !errors.Is(err, schema.ErrBadInput) {
		return fmt.Errorf("%s: %w", path, err) // a fault (disk full): name the output
	}
	return err
}

// CheckWritable reports whether an output can be written at path (its
// directory exists and takes a temp file), so a job can refuse a bad output
// path before it starts its work.
func CheckWritable(path string) error {
	tmp, err := CreateTemp(path)
	if err != nil {
		return schema.Errorf(path, -1, "", "cannot write the output here: %v", err)
	}
	tmp.Close()
	return os.Remove(tmp.Name())
}
