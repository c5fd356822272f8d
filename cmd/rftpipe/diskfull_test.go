package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDiskFull writes outputs larger than a 64 KiB tmpfs: exit 1 (a fault,
// not bad input), one line naming the output, nothing left behind, the
// input untouched. It needs to mount a tmpfs (root) and skips otherwise.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	in := "../../fixtures/stores/demo.parquet"
	tests := []struct {
		name string
		args func(out string) []string
	}{
		{"convert", func(out string) []string { return []string{"convert", in, out + ".jsonl", "--progress", "never"} }},
		{"run", func(out string) []string {
			return []string{"run", "--advantage-fn", "grpo", "--in", in, "--out", out + ".jsonl", "--progress", "never"}
		}},
		{"sql", func(out string) []string {
			return []string{"sql", "--store", in, "SELECT * FROM experiences", "--out", out + ".csv"}
		}},
		{"gen", func(out string) []string {
			return []string{"gen", "--tasks", "200", "--runs", "8", "--seed", "1", "--out", out + ".jsonl"}
		}},
	}
	// The output fails when it is finished (a file's last buffered write,
	// a buffer's commit); the rejected rows, bound for a disk with room,
	// must not be renamed into place without it.
	for _, out := range []string{filepath.Join(dir, "out.jsonl"), "sqlite:///" + filepath.Join(dir, "out.db") + "?table=t"} {
		t.Run("run with rejected rows elsewhere, out "+filepath.Base(out), func(t *testing.T) {
			rej := filepath.Join(t.TempDir(), "rej.parquet")
			_, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--arg", "std_threshold=0", "--in", in,
				"--out", out, "--rejected", rej, "--progress", "never")
			if code != exitFailure {
				t.Fatalf("exit %d, want 1: %s", code, stderr)
			}
			checkOneLine(t, stderr, filepath.Join(dir, "out"))
			if ents, _ := os.ReadDir(filepath.Dir(rej)); len(ents) != 0 {
				t.Errorf("left %v beside the rejected rows' target", ents)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %v behind", ents)
			}
		})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := fileSum(t, in)
			_, stderr, code := runCLI(t, tc.args(filepath.Join(dir, "out"))...)
			if code != exitFailure {
				t.Fatalf("exit %d, want 1: %s", code, stderr)
			}
			checkOneLine(t, stderr, filepath.Join(dir, "out"))
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("left %v behind", ents)
			}
			if fileSum(t, in) != before {
				t.Error("input changed")
			}
		})
	}
}
