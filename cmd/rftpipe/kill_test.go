package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema/store"
)

// TestSIGKILLLeavesNoStore kills `run`, `convert` and `report` with SIGKILL
// at several moments of their work. Their output goes into a directory that
// is a store itself (it holds keep.parquet), with the temp dir ($TMPDIR) of
// the test's own. After every kill: the directory, read as a store or by a
// glob, holds keep.parquet and at most a complete output (the bytes of an
// uninterrupted run; a whole page for the report, which states its time),
// the temp dir holds no store, and the input has its
// bytes. The next run of the command removes every temp file and spill
// directory the killed processes left.
func TestSIGKILLLeavesNoStore(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: kills processes at timed points, several seconds")
	}
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"TMPDIR=" + tmp}
	in := filepath.Join(dir, "in.parquet")
	if b, err := cliCmd(nil, "gen", "--tasks", "3000", "--runs", "8", "--resp-len", "64:256", "--seed", "5", "--out", in).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	inSum := fileSum(t, in)
	for _, c := range []struct {
		name, out string
		args      []string
	}{
		{"run", "run.parquet", []string{"run", "--advantage-fn", "grpo", "--arg", "std_threshold=0", "--arg", "duplicate_experiences=true", "--seed", "3", "--in", in, "--out"}},
		{"convert", "convert.parquet", []string{"convert", in}},
		{"report", "report.html", []string{"report", in, "--out"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			outs := filepath.Join(dir, c.name)
			if err := os.Mkdir(outs, 0o755); err != nil {
				t.Fatal(err)
			}
			keep := filepath.Join(outs, "keep.parquet")
			copyFile(t, "../../fixtures/foreign/base.parquet", keep)
			keepSum := fileSum(t, keep)
			out := filepath.Join(outs, c.out)
			args := append(slices.Clone(c.args), out)

			start := time.Now()
			if b, err := cliCmd(env, args...).CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			full := time.Since(start)
			want := fileSum(t, out)
			complete := func() bool {
				if c.name != "report" {
					return fileSum(t, out) == want
				}
				b, err := os.ReadFile(out)
				return err == nil && strings.HasSuffix(strings.TrimSpace(string(b)), "</html>")
			}
			if err := os.Remove(out); err != nil {
				t.Fatal(err)
			}

			var killed []int
			seen := 0 // temp files and spill directories found after a kill
			for _, at := range []float64{0.15, 0.4, 0.65, 0.9} {
				cmd := cliCmd(env, args...)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				killed = append(killed, cmd.Process.Pid)
				time.Sleep(time.Duration(at * float64(full)))
				cmd.Process.Signal(syscall.SIGKILL)
				cmd.Wait()
				seen += len(leftovers(t, killed[len(killed)-1:], outs, tmp))

				for _, path := range []string{outs, filepath.Join(outs, "*.parquet")} {
					files, err := store.Expand(path)
					if err != nil {
						t.Fatal(err)
					}
					for _, f := range files {
						if f != keep && f != out {
							t.Fatalf("kill at %.0f%%: %s reads %s as a store file", at*100, path, f)
						}
					}
				}
				if fileSum(t, keep) != keepSum {
					t.Fatalf("kill at %.0f%%: keep.parquet changed", at*100)
				}
				if _, err := os.Stat(out); err == nil && !complete() {
					t.Fatalf("kill at %.0f%%: a partial output exists", at*100)
				}
				os.Remove(out)
				if files, err := store.Expand(tmp); err == nil {
					t.Fatalf("kill at %.0f%%: the temp dir reads as a store: %v", at*100, files)
				}
				if fileSum(t, in) != inSum {
					t.Fatalf("kill at %.0f%%: the input changed", at*100)
				}
			}
			// (Each process sweeps what the ones killed before it left.)
			if seen == 0 {
				t.Fatal("the kills left no temp file: they came too late to test the sweep")
			}
			t.Logf("%d temp files and spill directories left by %d kills", seen, len(killed))

			if b, err := cliCmd(env, args...).CombinedOutput(); err != nil {
				t.Fatalf("rerun: %v\n%s", err, b)
			}
			if !complete() {
				t.Fatal("rerun: output differs")
			}
			if left := leftovers(t, killed, outs, tmp); len(left) > 0 {
				t.Fatalf("the rerun did not sweep %v", left)
			}
		})
	}
}

// leftovers lists the temp files beside the outputs and the spill
// directories in the temp dir that the processes pids made, by the names
// rftpipe gives them.
func leftovers(t *testing.T, pids []int, outs, tmp string) []string {
	t.Helper()
	var left []string
	for _, d := range []struct{ dir, prefix string }{{outs, ".rftpipe-"}, {tmp, "rftpipe-run-"}} {
		ents, err := os.ReadDir(d.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			for _, pid := range pids {
				if strings.HasPrefix(e.Name(), d.prefix+strconv.Itoa(pid)+"-") {
					left = append(left, e.Name())
				}
			}
		}
	}
	return left
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
