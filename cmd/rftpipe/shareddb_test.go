package main

import (
	"bytes"
	"encoding/json"
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

// gigpoArgs run a job that keeps 72 of gigpo.parquet's 192 rows and
// rejects the other 120 (stale model versions), its outputs to add.
var gigpoArgs = []string{"run", "--config", "../../fixtures/configs/trinity/gigpo.yaml", "--in", "../../fixtures/stores/gigpo.parquet", "--step", "9"}

const gigpoRows, gigpoKept = 192, 72

// tableRows returns the rows of a buffer table (inspect), -1 when it cannot
// be read.
func tableRows(t *testing.T, url string) int64 {
	t.Helper()
	stdout, _, code := runCLI(t, "inspect", "--format", "json", url)
	var ins struct{ Rows int64 }
	if code != 0 || json.Unmarshal([]byte(stdout), &ins) != nil {
		return -1
	}
	return ins.Rows
}

// runWithin runs cmd, killing it after limit: a hang fails the test.
func runWithin(t *testing.T, cmd *exec.Cmd, limit time.Duration) (code int, stderr string) {
	t.Helper()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v: still running after %s: %s", cmd.Args[1:], limit, errb.String())
	}
	return cmd.ProcessState.ExitCode(), errb.String()
}

// TestOutputsShareOneDatabase: --out and --rejected in one SQLite file,
// new or holding other tables, finish at once in one transaction: every
// input row is kept or rejected, and a rerun into further tables of the
// same file works too.
func TestOutputsShareOneDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "nightly.db")
	for _, night := range []string{"1", "2"} {
		kept := "sqlite:///" + db + "?table=kept" + night
		rej := "sqlite:///" + db + "?table=rejected" + night
		code, stderr := runWithin(t, cliCmd(nil, append(gigpoArgs, "--out", kept, "--rejected", rej)...), 30*time.Second)
		if code != 0 {
			t.Fatalf("night %s: exit %d: %s", night, code, stderr)
		}
		k, r := tableRows(t, kept), tableRows(t, rej)
		if k != gigpoKept || k+r != gigpoRows {
			t.Errorf("night %s: %d kept + %d rejected, want %d + %d", night, k, r, gigpoKept, gigpoRows-gigpoKept)
		}
	}
}

// TestOutputsNamingOneTable: two outputs naming one table, however
// spelled, are refused before any work: exit 2 at once, no database made.
func TestOutputsNamingOneTable(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(dir, filepath.Join(dir, "via")); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "o.db")
	for _, c := range []struct{ out, rej string }{
		{"sqlite:///" + db + "?table=kept", "sqlite:///" + db + "?table=kept"},
		{"sqlite:///" + db + "?table=kept", "sqlite:///" + db + "?table=KEPT"},
		{"sqlite:///" + db + "?table=kept", "sqlite:///" + dir + "/./o.db?table=kept"},
		{"sqlite:///" + db + "?table=kept", "sqlite:///" + filepath.Join(dir, "via", "o.db") + "?table=kept"},
		{"sqlite:///" + db + "?table=kept", "sqlite:///" + db + "?table=kept_blob"},
	} {
		start := time.Now()
		code, stderr := runWithin(t, cliCmd(nil, append(gigpoArgs, "--out", c.out, "--rejected", c.rej)...), 10*time.Second)
		if code != exitBadInput || !strings.Contains(stderr, "--rejected writes into the table --out writes") {
			t.Errorf("%s and %s: exit %d: %s", c.out, c.rej, code, stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s and %s: refused after %s", c.out, c.rej, d)
		}
		if _, err := os.Stat(db); err == nil {
			t.Fatalf("%s and %s: left %s behind", c.out, c.rej, db)
		}
	}
	base, skip := pgtest.Start()
	if skip != "" {
		t.Skip("PostgreSQL cases skipped: " + skip)
	}
	local := strings.Replace(base, "127.0.0.1", "localhost", 1)
	for _, c := range []struct{ out, rej, want string }{
		{base + "&table=pg_kept", local + "&table=pg_kept", "--rejected writes into the table --out writes"},
		{base + "&table=pg_kept", base + "&table=pg_kept_blob", "--rejected writes into the table --out writes"},
		{base + "&table=" + strings.Repeat("t", 59), base + "&table=pg_rej", "PostgreSQL keeps names of at most 63 bytes"},
		{base + "&table=" + strings.Repeat("t", 47), base + "&table=pg_rej", "index ix_" + strings.Repeat("t", 47) + "_model_version would be 64 bytes"},
	} {
		code, stderr := runWithin(t, cliCmd(nil, append(gigpoArgs, "--out", c.out, "--rejected", c.rej)...), 20*time.Second)
		if code != exitBadInput || !strings.Contains(stderr, c.want) {
			t.Errorf("%s and %s: exit %d, want 2 and %q: %s", c.out, c.rej, code, c.want, stderr)
		}
	}
}

// TestLockWaitHonoursSignals: a writer waiting for another process's lock
// on its database stops at SIGINT/SIGTERM (130/143), and at lock_wait
// naming the holder; the database keeps its rows.
func TestLockWaitHonoursSignals(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "o.db")
	url := "sqlite:///" + db + "?table=t"
	if _, stderr, code := runCLI(t, "convert", demoStore, url); code != 0 {
		t.Fatal(stderr)
	}
	f, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil { // as another rftpipe writer holds it
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := cliCmd(nil, append(gigpoArgs, "--out", "sqlite:///"+db+"?table=kept", "--rejected", "sqlite:///"+db+"?table=rej")...)
		go func() {
			time.Sleep(1500 * time.Millisecond)
			cmd.Process.Signal(sig)
		}()
		if code, stderr := runWithin(t, cmd, 10*time.Second); code != 128+int(sig) || !strings.Contains(stderr, "interrupted") {
			t.Errorf("%v: exit %d, want %d: %s", sig, code, 128+int(sig), stderr)
		}
	}
	code, stderr := runWithin(t, cliCmd(nil, "convert", demoStore, "sqlite:///"+db+"?table=u&lock_wait=1"), 10*time.Second)
	if want := fmt.Sprintf("process %d", os.Getpid()); code == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "lock_wait") {
		t.Errorf("lock_wait=1: exit %d, want the holder %s named: %s", code, want, stderr)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if n := tableRows(t, url); n != 384 {
		t.Errorf("the table holds %d rows after the interrupted writes, want 384", n)
	}
	if n := tableRows(t, "sqlite:///"+db+"?table=kept"); n != -1 {
		t.Errorf("an interrupted write left table kept (%d rows)", n)
	}
}

// TestSIGKILLLeavesDatabaseAsBefore kills a run writing its kept and
// rejected rows into one SQLite file at seeded moments: a new file is
// afterwards absent or whole (both tables, every row), never empty, with
// no journal; an existing one keeps its table and gains both or neither.
func TestSIGKILLLeavesDatabaseAsBefore(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: kills processes at timed points")
	}
	rng := rand.New(rand.NewPCG(4, 5))
	for _, existing := range []bool{false, true} {
		dir := t.TempDir()
		db := filepath.Join(dir, "o.db")
		if existing {
			if _, stderr, code := runCLI(t, "convert", demoStore, "sqlite:///"+db+"?table=t"); code != 0 {
				t.Fatal(stderr)
			}
		}
		kept, rej := "sqlite:///"+db+"?table=kept", "sqlite:///"+db+"?table=rej"
		args := append(gigpoArgs, "--out", kept, "--rejected", rej)
		start := time.Now()
		if code, stderr := runWithin(t, cliCmd(nil, args...), 30*time.Second); code != 0 {
			t.Fatal(stderr)
		}
		full := time.Since(start)
		for i := 0; i < 5; i++ {
			// The last kill's journal goes with its database: left beside
			// the next one, SQLite would roll it back into that.
			for _, f := range []string{db, db + "-journal"} {
				os.Remove(f)
			}
			if existing {
				runCLI(t, "convert", demoStore, "sqlite:///"+db+"?table=t")
			}
			cmd := cliCmd(nil, args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rng.Float64() * float64(full)))
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			st, err := os.Stat(db)
			switch {
			case err != nil && !existing:
				continue // nothing left: as before
			case err != nil:
				t.Fatalf("kill %d: the database is gone: %v", i, err)
			case st.Size() == 0:
				t.Fatalf("kill %d: an empty database left", i)
			}
			if _, err := os.Stat(db + "-journal"); err == nil && !existing {
				t.Errorf("kill %d: a journal left beside a new database", i)
			}
			k, r := tableRows(t, kept), tableRows(t, rej)
			if (k != -1 || r != -1) && (k != gigpoKept || k+r != gigpoRows) {
				t.Errorf("kill %d: %d kept, %d rejected: want both whole or neither", i, k, r)
			}
			if _, err := os.Stat(db + "-journal"); err == nil && existing {
				// A read refuses a killed write's live journal, saying how
				// to roll it back; a write into the database does so first.
				_, stderr, code := runCLI(t, "inspect", "sqlite:///"+db+"?table=t")
				if code != 0 && !strings.Contains(stderr, "journal of a write that was killed") {
					t.Errorf("kill %d: reading beside the journal: exit %d: %s", i, code, stderr)
				}
				if _, stderr, code := runCLI(t, "convert", demoStore, "sqlite:///"+db+"?table=after"); code != 0 {
					t.Fatalf("kill %d: a write after the kill: %s", i, stderr)
				}
			}
			if existing && tableRows(t, "sqlite:///"+db+"?table=t") != 384 {
				t.Errorf("kill %d: the existing table changed", i)
			}
		}
	}
}
