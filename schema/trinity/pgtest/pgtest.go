// Package pgtest starts a throwaway PostgreSQL cluster for tests: initdb
// and pg_ctl from Debian's postgresql package (/usr/lib/postgresql/*/bin)
// in a temp dir, listening on a free port of 127.0.0.1, stopped by Stop.
// Tests that need it skip, saying why, when the binaries are missing.
package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
)

var pg struct {
	once sync.Once
	url  string // postgresql://…/postgres?sslmode=disable, without table
	skip string
	stop func()
}

// Start returns the base URL of the cluster (postgresql://…/postgres?
// sslmode=disable, no table), starting it once, or why there is none.
func Start() (url, skip string) {
	pg.once.Do(startPostgres)
	return pg.url, pg.skip
}

// Stop stops the cluster and removes its files (call it from TestMain).
func Stop() {
	if pg.stop != nil {
		pg.stop()
	}
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
