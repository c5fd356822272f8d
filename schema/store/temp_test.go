//go:build unix

package store_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema/store"
)

// deadPID returns the id of a process that has exited.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("cannot run true:", err)
	}
	return cmd.Process.Pid
}

func touchOld(t *testing.T, path string, dir bool) {
	t.Helper()
	var err error
	if dir {
		err = os.Mkdir(path, 0o755)
	} else {
		err = os.WriteFile(path, []byte("x"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// TestCreateSweepsStaleTemps: Create removes the temp files a killed
// rftpipe left, and nothing else.
func TestCreateSweepsStaleTemps(t *testing.T) {
	dir := t.TempDir()
	dead, me := strconv.Itoa(deadPID(t)), strconv.Itoa(os.Getpid())
	names := map[string]bool{ // name → swept
		".rftpipe-" + dead + "-out.parquet.123.tmp": true,
		".rftpipe-" + me + "-out.parquet.456.tmp":   false, // this process's own
		".rftpipe-1-out.parquet.789.tmp":            false, // a live process's
		".out.parquet.123.tmp":                      false, // not rftpipe's naming
		"keep.parquet":                              false,
	}
	for n := range names {
		touchOld(t, filepath.Join(dir, n), false)
	}
	fresh := filepath.Join(dir, ".rftpipe-"+dead+"-new.parquet.1.tmp") // newer than this process
	if err := os.WriteFile(fresh, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	names[filepath.Base(fresh)] = false
	copyTo(t, demo, filepath.Join(dir, "out.parquet"))
	for n, swept := range names {
		_, err := os.Stat(filepath.Join(dir, n))
		if gone := os.IsNotExist(err); gone != swept {
			t.Errorf("%s: removed %v, want %v", n, gone, swept)
		}
	}
	if files, err := store.Expand(dir); err != nil || len(files) != 2 {
		t.Errorf("Expand(dir) = %v, %v; want keep.parquet and out.parquet only", files, err)
	}
}

// TestTempDirSweepsStaleSpillDirs: TempDir makes a fresh directory and
// removes the spill directories of dead processes only.
func TestTempDirSweepsStaleSpillDirs(t *testing.T) {
	root := t.TempDir()
	t.Setenv("TMPDIR", root)
	dead := strconv.Itoa(deadPID(t))
	stale := filepath.Join(root, "rftpipe-run-"+dead+"-1")
	live := filepath.Join(root, "rftpipe-run-1-2")
	other := filepath.Join(root, "rftpipe-run-x")
	for _, d := range []string{stale, live, other} {
		touchOld(t, d, true)
	}
	os.WriteFile(filepath.Join(stale, "spill"), []byte("x"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	d, err := store.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(d) != root {
		t.Fatalf("TempDir = %s, not in %s", d, root)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("stale spill dir kept")
	}
	for _, k := range []string{live, other, d} {
		if _, err := os.Stat(k); err != nil {
			t.Errorf("%s removed", k)
		}
	}
}
