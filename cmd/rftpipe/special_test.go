package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputsThatAreNotFiles: an output path that is a FIFO, a character
// device, a socket, a directory or a symbolic link is never replaced by a
// rename, whichever command writes it: a text output is written through
// to a stream, a store refuses one, a directory or socket is refused
// before the work, a link's target is replaced and the link kept.
func TestOutputsThatAreNotFiles(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	fifo, fifoStore := at("fifo"), at("fifo.parquet")
	for _, f := range []string{fifo, fifoStore} {
		if err := syscall.Mkfifo(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock := at("sock")
	if fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0); err != nil {
		t.Fatal(err)
	} else if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	} else {
		defer syscall.Close(fd)
	}
	if err := os.Mkdir(at("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(at("real.json"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.json", at("link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere/x.json", at("dangling.json")); err != nil {
		t.Fatal(err)
	}
	dev, devStore := "", ""
	if os.Geteuid() == 0 { // private nodes of the null device, never the machine's /dev/null
		dev, devStore = at("null"), at("null.parquet")
		for _, d := range []string{dev, devStore} {
			if err := syscall.Mknod(d, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
				t.Fatal(err)
			}
		}
	}
	sql := func(out string) []string { return []string{"sql", "SELECT 1 AS x", "--store", demoStore, "--out", out} }
	run := func(flag, out string) []string {
		return []string{"run", "--advantage-fn", "grpo", "--in", demoStore, "--out", at("o.parquet"), flag, out}
	}
	type outCase struct {
		name string
		args []string // nil: merge-metrics of a sharded run's parts
		path string
		code int
		want string // in stderr, for a refusal
	}
	cases := []outCase{
		{"sql --out FIFO", sql(fifo), fifo, 0, ""},
		{"sql --out socket", sql(sock), sock, 2, "output is a socket"},
		{"sql --out directory", sql(at("dir")), at("dir"), 2, "output is a directory"},
		{"sql --out link", sql(at("link.json")), at("link.json"), 0, ""},
		{"sql --out dangling link", sql(at("dangling.json")), at("dangling.json"), 2, "symbolic link to nothing"},
		{"sql --out parquet FIFO", append(sql(fifo), "--format", "parquet"), fifo, 2, "output is a FIFO"},
		{"run --metrics FIFO", run("--metrics", fifo), fifo, 0, ""},
		{"run --metrics directory", run("--metrics", at("dir")), at("dir"), 2, "output is a directory"},
		{"run --prom socket", run("--prom", sock), sock, 2, "output is a socket"},
		{"run --out FIFO", []string{"run", "--advantage-fn", "grpo", "--in", demoStore, "--out", fifoStore}, fifoStore, 2, "output is a FIFO"},
		{"report --out FIFO", []string{"report", demoStore, "--out", fifo}, fifo, 0, ""},
		{"merge-metrics --prom FIFO", nil, fifo, 0, ""},
		{"merge-metrics --prom the plan", nil, at("sharded/_plan.json"), 2, "would overwrite the input"},
	}
	if dev != "" {
		cases = append(cases,
			outCase{"sql --out char device", sql(dev), dev, 0, ""},
			outCase{"run --out char device", []string{"run", "--advantage-fn", "grpo", "--in", demoStore, "--out", devStore}, devStore, 2, "output is a character device"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.args == nil {
				c.args = append(mergeArgs(t, dir), "--prom", c.path)
			}
			before, _ := os.Lstat(c.path)
			got := make(chan int, 1)
			var hold *os.File // a writer of the test's own: the reader sees EOF only once it is closed
			if before.Mode()&os.ModeNamedPipe != 0 && c.code == 0 {
				r, err := os.OpenFile(c.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
				if err != nil {
					t.Fatal(err)
				}
				if hold, err = os.OpenFile(c.path, os.O_WRONLY, 0); err != nil {
					t.Fatal(err)
				}
				go func() { // the FIFO's reader
					b, _ := io.ReadAll(r)
					r.Close()
					got <- len(b)
				}()
			}
			start := time.Now()
			_, stderr, code := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d and %q: %s", code, c.code, c.want, stderr)
			}
			if c.code == 2 && time.Since(start) > 5*time.Second {
				t.Errorf("refused only after %s", time.Since(start))
			}
			after, err := os.Lstat(c.path)
			if err != nil || after.Mode().Type() != before.Mode().Type() {
				t.Errorf("the output is no longer a %v", before.Mode().Type())
			}
			if hold != nil {
				hold.Close()
				if n := <-got; n <= 0 {
					t.Errorf("the FIFO's reader got %d bytes", n)
				}
			}
		})
	}
	if b, _ := os.ReadFile(at("real.json")); !strings.Contains(string(b), `"x":1`) {
		t.Errorf("the link's target holds %q, want the query's result", b)
	}
}

// mergeArgs writes a sharded run's parts into dir and returns the
// merge-metrics command line for them.
func mergeArgs(t *testing.T, dir string) []string {
	t.Helper()
	out := filepath.Join(dir, "sharded")
	for _, i := range []string{"0", "1"} {
		if _, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", demoStore, "--out", out, "--shards", "2", "--shard", i); code != 0 {
			t.Fatal(stderr)
		}
	}
	return []string{"merge-metrics", out}
}
