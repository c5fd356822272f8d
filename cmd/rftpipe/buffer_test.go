package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema/trinity/pgtest"
)

// TestBufferSecretsNeverShown: a PostgreSQL password in a buffer URL
// appears in no output, error or written file of any command that takes
// one (successful runs on the test cluster, and failing ones: a missing
// table, a malformed URL, a closed port, a refused write).
func TestBufferSecretsNeverShown(t *testing.T) {
	base, skip := pgtest.Start()
	if skip != "" {
		t.Skip("PostgreSQL tests skipped: " + skip)
	}
	const pw = "s3cr3tPW"
	url := strings.Replace(base, "rftpipe@", "rftpipe:"+pw+"@", 1) + "&table=secret_cli"
	dir := t.TempDir()
	out := func(name string) string { return filepath.Join(dir, name) }
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"convert", demoStore, url + "&if_exists=replace"}, 0},
		{[]string{"convert", url, out("back.parquet")}, 0},
		{[]string{"inspect", url}, 0},
		{[]string{"inspect", "--format", "json", url}, 0},
		{[]string{"report", url, "--out", out("r.html")}, 0},
		{[]string{"sql", "SELECT count(*) AS n FROM experiences", "--store", url}, 0},
		{[]string{"run", "--algorithm", "grpo", "--in", url, "--out", out("run.parquet"), "--metrics", out("m.json"), "--prom", out("m.prom")}, 0},
		{[]string{"convert", demoStore, url}, 2},
		{[]string{"convert", url, url + "&if_exists=append"}, 2},
		{[]string{"inspect", strings.Replace(url, "secret_cli", "nosuch", 1)}, 2},
		{[]string{"inspect", strings.Replace(url, "127.0.0.1:", "127.0.0.1:x", 1)}, 2},
		{[]string{"inspect", "postgresql://rftpipe:" + pw + "@127.0.0.1:1/postgres?table=t&sslmode=disable"}, 1},
		{[]string{"report", "postgresql://rftpipe:" + pw + "@127.0.0.1:1/postgres?table=t", "--out", out("r2.html")}, 1},
	} {
		stdout, stderr, code := runCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, c.code, stderr)
		}
		if strings.Contains(stdout+stderr, pw) {
			t.Errorf("%v shows the password:\n%s%s", c.args, stdout, stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(pw)) {
			t.Errorf("%s holds the password", filepath.Base(f))
		}
	}
	if b, _ := os.ReadFile(out("r.html")); !bytes.Contains(b, []byte("rftpipe:xxxxx@")) {
		t.Errorf("the report does not name the buffer (redacted)")
	}
}

// TestBufferSilentServer: a server that accepts the connection and never
// answers: the command fails within connect_timeout (exit 1, one line),
// and SIGTERM stops it while it connects without one (exit 143).
func TestBufferSilentServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	url := "postgresql://u@" + l.Addr().String() + "/db?table=t"
	start := time.Now()
	_, stderr, code := runCLI(t, "inspect", url+"&connect_timeout=1")
	if code != 1 || !strings.Contains(stderr, "cannot connect") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("connect_timeout=1 took %s", d)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := cliCmd(nil, "convert", url+"&connect_timeout=0", filepath.Join(t.TempDir(), "o.parquet"))
		var errb bytes.Buffer
		cmd.Stderr = &errb
		mu.Lock()
		before := len(conns)
		mu.Unlock()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The signal goes once the child is connecting (its handler is
		// installed before it dials), however slow its start.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			n := len(conns)
			mu.Unlock()
			if n > before {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("%v: the child never connected", sig)
			}
		}
		start := time.Now()
		cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("%v: still connecting 10s after the signal", sig)
		}
		if got := cmd.ProcessState.ExitCode(); got != 128+int(sig) {
			t.Errorf("%v: exit %d after %s, want %d: %s", sig, got, time.Since(start), 128+int(sig), errb.String())
		}
	}
}

// TestBufferConcurrentConverts: three concurrent converts into one new
// SQLite table: one writes it, the others exit 2 saying it holds rows.
func TestBufferConcurrentConverts(t *testing.T) {
	db := filepath.Join(t.TempDir(), "c.db")
	url := "sqlite:///" + db + "?table=t"
	type result struct {
		code   int
		stderr string
	}
	res := make([]result, 3)
	var wg sync.WaitGroup
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var errb bytes.Buffer
			cmd := cliCmd(nil, "convert", demoStore, url)
			cmd.Stderr = &errb
			cmd.Run()
			res[i] = result{cmd.ProcessState.ExitCode(), errb.String()}
		}()
	}
	wg.Wait()
	wins := 0
	for _, r := range res {
		switch {
		case r.code == 0:
			wins++
		case r.code != 2 || !strings.Contains(r.stderr, "already holds") || strings.Count(r.stderr, "\n") != 1:
			t.Errorf("a loser: exit %d: %s", r.code, r.stderr)
		}
	}
	if wins != 1 {
		t.Errorf("%d converts succeeded, want 1: %+v", wins, res)
	}
	stdout, stderr, code := runCLI(t, "inspect", "--format", "json", url)
	if code != 0 || !strings.Contains(stdout, `"rows": 384,`) {
		t.Errorf("the table after the race (want demo's 384 rows once): exit %d: %s%s", code, stdout, stderr)
	}
}

// TestBufferSchemes: an unknown scheme is named, exit 2; the scheme's case
// does not matter.
func TestBufferSchemes(t *testing.T) {
	for _, u := range []string{"mysql://u@h/db?table=t", "MYSQL://u@h/db?table=t"} {
		_, stderr, code := runCLI(t, "inspect", u)
		if code != 2 || !strings.Contains(stderr, "unknown scheme") || strings.Contains(stderr, "no file matches") {
			t.Errorf("%s: exit %d: %s", u, code, stderr)
		}
	}
	abs, _ := filepath.Abs("../../fixtures/trinity/experience.db")
	if _, stderr, code := runCLI(t, "inspect", "SQLITE:///"+abs+"?table=experience_buffer"); code != 0 {
		t.Errorf("SQLITE://: exit %d: %s", code, stderr)
	}
}

// TestConvertDPOAndSFTBuffers: DPO and SFT tables, whose rows carry no
// reward (null in every row), convert whole, both layouts; and back: a
// Parquet or Arrow file keeps the table's schema type and layout, so it
// becomes the same kind of table, with the payloads a direct copy writes;
// JSONL keeps neither, and converts with the URL's schema_type.
func TestConvertDPOAndSFTBuffers(t *testing.T) {
	dir := t.TempDir()
	layouts := map[string]string{"": "0.5 layout", "v0.6/": "0.6 layout"}
	for _, v := range []string{"", "v0.6/"} {
		for _, k := range []string{"dpo", "sft"} {
			db, _ := filepath.Abs("../../fixtures/trinity/" + v + k + ".db")
			base := filepath.Join(dir, strings.TrimSuffix(v, "/")+k)
			in := "sqlite:///" + db + "?table=" + k + "_buffer"
			if _, stderr, code := runCLI(t, "convert", in, base+".parquet"); code != 0 {
				t.Fatalf("%s%s: exit %d: %s", v, k, code, stderr)
			}
			if n := len(storeRows(t, base+".parquet")); n != 16 {
				t.Errorf("%s%s: %d rows, the table holds 16", v, k, n)
			}
			direct := "sqlite:///" + base + "-direct.db?table=t"
			if _, stderr, code := runCLI(t, "convert", in, direct); code != 0 {
				t.Fatalf("%s%s to a buffer: exit %d: %s", v, k, code, stderr)
			}
			if _, stderr, code := runCLI(t, "convert", base+".parquet", base+".arrow"); code != 0 {
				t.Fatalf("%s%s to Arrow: exit %d: %s", v, k, code, stderr)
			}
			if _, stderr, code := runCLI(t, "convert", base+".parquet", base+".jsonl"); code != 0 {
				t.Fatalf("%s%s to JSONL: exit %d: %s", v, k, code, stderr)
			}
			for _, back := range []struct{ from, url string }{
				{base + ".parquet", "sqlite:///" + base + "-p.db?table=t"},
				{base + ".arrow", "sqlite:///" + base + "-a.db?table=t"},
				{base + ".jsonl", "sqlite:///" + base + "-j.db?table=t&schema_type=" + k + "&layout=" + strings.Fields(layouts[v])[0]},
			} {
				if _, stderr, code := runCLI(t, "convert", back.from, back.url); code != 0 {
					t.Fatalf("%s back to a buffer: exit %d: %s", back.from, code, stderr)
				}
				stdout, stderr, code := runCLI(t, "inspect", back.url)
				if code != 0 || !strings.Contains(stdout, layouts[v]) || !strings.Contains(stdout, "schema_type "+k) {
					t.Errorf("%s back to a buffer: inspect (exit %d) does not show a %s %s table:\n%s%s", back.from, code, layouts[v], k, stdout, stderr)
				}
				if a, b := storeRows(t, direct), storeRows(t, back.url); !reflect.DeepEqual(a, b) {
					t.Errorf("%s back to a buffer: rows differ from a direct copy's", back.from)
				}
			}
		}
	}
}
