package trinity_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A throwaway PostgreSQL cluster for the tests: initdb and pg_ctl from
// Debian's postgresql package (/usr/lib/postgresql/*/bin) in a temp dir,
// listening on a free port of 127.0.0.1, stopped when the tests end. Tests
// that need it skip, saying why, when the binaries are missing.

// benchCleanup removes the benchmarks' generated buffers at the end.
var benchCleanup []func()

var pg struct {
	once sync.Once
	url  string // postgresql://…/postgres?sslmode=disable, without table
	skip string
	stop func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pg.stop != nil {
		pg.stop()
	}
	for _, f := range benchCleanup {
		f()
	}
	os.Exit(code)
}

// postgres returns the base URL of the test cluster, starting it once.
func postgres(t *testing.T) string {
	t.Helper()
	pg.once.Do(startPostgres)
	if pg.skip != "" {
		t.Skip("PostgreSQL tests skipped: " + pg.skip)
	}
	return pg.url
}

func startPostgres() {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		pg.skip = "no initdb under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
		return
	}
	sort.Strings(bins)
	bin := filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "rftpipe-pg-")
	if err != nil {
		pg.skip = err.Error()
		return
	}
	// initdb refuses to run as root: run the server as the postgres user.
	var as []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		runuser, rerr := exec.LookPath("runuser")
		if err != nil || rerr != nil {
			pg.skip = "running as root without a postgres user or runuser"
			os.RemoveAll(dir)
			return
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			pg.skip = err.Error()
			os.RemoveAll(dir)
			return
		}
		as = []string{runuser, "-u", "postgres", "--"}
	}
	run := func(name string, args ...string) error {
		argv := append(append(as[:len(as):len(as)], filepath.Join(bin, name)), args...)
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", name, err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run("initdb", "-D", data, "-U", "rftpipe", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		pg.skip = err.Error()
		os.RemoveAll(dir)
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pg.skip = err.Error()
		os.RemoveAll(dir)
		return
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := fmt.Sprintf("-p %d -h 127.0.0.1 -k %s -F", port, dir)
	if err := run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		pg.skip = err.Error()
		os.RemoveAll(dir)
		return
	}
	pg.url = fmt.Sprintf("postgresql://rftpipe@127.0.0.1:%d/postgres?sslmode=disable", port)
	pg.stop = func() {
		run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	}
}

// pgURL names a table of the test cluster.
func pgURL(t *testing.T, table string) string {
	base := postgres(t)
	return base + "&table=" + strings.ToLower(table)
}

func TestPostgresRoundTrip(t *testing.T) {
	for _, b := range buffers {
		t.Run(b.name, func(t *testing.T) {
			in := filepath.Join(fixtures, b.name+".jsonl")
			url := pgURL(t, "rt_"+b.name) + "&schema_type=" + string(b.kind)
			copyStore(t, in, url)
			sameRows(t, readStore(t, url, storeBatch(7)), readStore(t, in))
			// and back through SQLite: the same rows
			lite := sqliteURL(filepath.Join(t.TempDir(), "b.db"), "T")
			copyStore(t, url, lite)
			sameRows(t, readStore(t, lite), readStore(t, in))
		})
	}
}

func TestPostgresAtomicAndRefusals(t *testing.T) {
	url := pgURL(t, "atomic")
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	writeFile(t, bad, []byte(`{"eid":{"batch":0,"task":0,"run":0,"step":0,"suffix":"a"},"reward":1.0,"prompt_length":2,"tokens":[1,2,3],"logprobs":[-1]}
{"eid":{"batch":0,"task":1,"run":0,"step":0,"suffix":"b"},"reward":1.0,"prompt_length":3,"tokens":[1,2,3],"logprobs":[-1]}
`))
	r := openStore(t, bad)
	_, err := copyErr(r, url)
	r.Close()
	if err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Fatalf("got %v, want a row 1 error", err)
	}
	if err := readErr(url); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("table after a failed write: %v", err)
	}
	copyStore(t, filepath.Join(fixtures, "overrides.jsonl"), url)
	r = openStore(t, url)
	defer r.Close()
	if _, err := copyErr(r, pgURL(t, "atomic")+"&if_exists=append", url); err == nil || !strings.Contains(err.Error(), "table being read") {
		t.Fatalf("got %v, want a refusal to write into the table being read", err)
	}
}
