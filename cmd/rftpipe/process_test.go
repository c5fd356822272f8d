package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema/trinity/pgtest"
)

// The test binary doubles as the rftpipe binary: with RFTPIPE_AS_CLI=1 it
// runs main, so process-level tests (signals, GOMAXPROCS) need no build step.
func TestMain(m *testing.M) {
	if os.Getenv("RFTPIPE_AS_CLI") == "1" {
		main()
		return
	}
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// cliCmd returns a command running rftpipe with args in a child process.
func cliCmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "RFTPIPE_AS_CLI=1"), env...)
	return cmd
}

var genArgs = []string{"gen", "--tasks", "6000", "--runs", "8", "--resp-len", "64:256", "--seed", "5"}

// TestDeterministicAcrossGOMAXPROCS: same flags and seed give the same bytes
// with one or two threads.
func TestDeterministicAcrossGOMAXPROCS(t *testing.T) {
	dir := t.TempDir()
	var sums [][32]byte
	for _, procs := range []string{"1", "2"} {
		out := filepath.Join(dir, "g"+procs+".parquet")
		if b, err := cliCmd([]string{"GOMAXPROCS=" + procs}, append(genArgs, "--out", out)...).CombinedOutput(); err != nil {
			t.Fatalf("GOMAXPROCS=%s: %v\n%s", procs, err, b)
		}
		sums = append(sums, fileSum(t, out))
	}
	if sums[0] != sums[1] {
		t.Fatal("output differs between GOMAXPROCS=1 and 2")
	}
}

// TestKillLeavesWholeOutputOrNone kills a writing rftpipe with SIGKILL at
// seeded random moments, for `gen` and for `run` (GRPO with duplication,
// which also writes a spill store): afterwards the target is either absent
// or complete (byte-identical to an uninterrupted run), and a rerun
// succeeds.
func TestKillLeavesWholeOutputOrNone(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	store := filepath.Join(dir, "store.parquet")
	if b, err := cliCmd(nil, append(genArgs, "--out", store)...).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	runArgs := []string{"run", "--advantage-fn", "grpo", "--arg", "std_threshold=0", "--arg", "duplicate_experiences=true", "--seed", "3", "--in", store}
	for _, args := range [][]string{genArgs, runArgs} {
		t.Run(args[0], func(t *testing.T) {
			dir := t.TempDir()
			ref := filepath.Join(dir, "ref.parquet")
			start := time.Now()
			if b, err := cliCmd(nil, append(args, "--out", ref)...).CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			full := time.Since(start)
			want := fileSum(t, ref)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 6; i++ {
				out := filepath.Join(dir, fmt.Sprintf("k%d.parquet", i))
				cmd := cliCmd(nil, append(args, "--out", out)...)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Duration(rng.Float64() * 1.2 * float64(full)))
				cmd.Process.Signal(syscall.SIGKILL)
				cmd.Wait()
				if _, err := os.Stat(out); err == nil && fileSum(t, out) != want {
					t.Fatalf("kill %d: a partial output exists", i)
				}
				if b, err := cliCmd(nil, append(args, "--out", out)...).CombinedOutput(); err != nil {
					t.Fatalf("rerun after kill %d: %v\n%s", i, err, b)
				}
				if fileSum(t, out) != want {
					t.Fatalf("rerun after kill %d: output differs", i)
				}
			}
		})
	}
}

// TestInterruptCleansUp: SIGINT and SIGTERM stop a run with 130 / 143, one
// line on stderr, and no temp file or output left.
func TestInterruptCleansUp(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		dir := t.TempDir()
		out := filepath.Join(dir, "o.parquet")
		cmd := cliCmd(nil, "gen", "--tasks", "200000", "--runs", "8", "--out", out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
		cmd.Process.Signal(sig)
		cmd.Wait()
		if code, want := cmd.ProcessState.ExitCode(), 128+int(sig); code != want {
			t.Errorf("%v: exit %d, want %d (%s)", sig, code, want, stderr.String())
		}
		if msg := strings.TrimSpace(stderr.String()); strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "interrupted") {
			t.Errorf("%v: stderr %q", sig, msg)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%v: left %v behind", sig, ents)
		}
	}
}
