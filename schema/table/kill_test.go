package table_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/table"
	"github.com/rftpipe/rftpipe/schema/table/feed"
	"github.com/rftpipe/rftpipe/schema/table/iceberg"
)

// TestKillHelper is the process TestSIGKILLAtCommitPoints kills: it ingests
// $KILL_SRC into $KILL_TABLE and SIGKILLs itself at commit point $KILL_AT.
func TestKillHelper(t *testing.T) {
	at := os.Getenv("KILL_AT")
	if at == "" {
		t.Skip("the helper process of TestSIGKILLAtCommitPoints")
	}
	table.SetCommitPoint(func(p string) {
		if p == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	_, err := feed.Ingest(context.Background(), os.Getenv("KILL_SRC"), os.Getenv("KILL_TABLE"), feed.Options{Experiment: "e"})
	t.Fatalf("not killed at %s: %v", at, err)
}

// TestSIGKILLAtCommitPoints kills an ingest (a real process) at each point
// of its commit: before it, with its commit file written but not linked,
// right after it (before its Iceberg metadata), and with the Iceberg
// version's Avro files written but not its JSON. Readers then see the
// snapshot before the commit or the one after, whole, and Iceberg readers
// the one before; a rerun brings exactly the rows missing, and the Iceberg
// metadata of every snapshot.
func TestSIGKILLAtCommitPoints(t *testing.T) {
	for _, c := range []struct {
		at        string
		committed bool
	}{{"start", false}, {"before-link", false}, {"after-commit", true}, {"before-metadata", true}} {
		t.Run(c.at, func(t *testing.T) {
			dir := t.TempDir()
			src := "sqlite:///" + filepath.Join(dir, "b.db") + "?table=exp&schema_type=experience&if_exists=append"
			tbl := filepath.Join(dir, "table")
			recs := fixtureRows(t)
			appendRows(t, src, recs[:20])
			if _, err := feed.Ingest(context.Background(), src, tbl, feed.Options{Experiment: "e"}); err != nil {
				t.Fatal(err)
			}
			appendRows(t, src, recs[20:])

			cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "KILL_AT="+c.at, "KILL_SRC="+src, "KILL_TABLE="+tbl)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("helper was not killed: %v\n%s", err, out)
			}
			want := int64(20)
			if c.committed {
				want = 64
			}
			if n := countRows(t, tbl); n != want {
				t.Fatalf("after a kill at %s the table reads %d rows, want %d", c.at, n, want)
			}
			// Iceberg never ahead of the log: one version behind after a
			// kill between the log commit and the metadata
			wantLog := 1
			if c.committed {
				wantLog = 2
			}
			if logged, written := versions(t, tbl); logged != wantLog || written != 1 {
				t.Fatalf("after a kill at %s: log at snapshot %d, Iceberg at version %d; want %d, 1", c.at, logged, written, wantLog)
			}
			res, err := feed.Ingest(context.Background(), src, tbl, feed.Options{Experiment: "e"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Rows != 64-want {
				t.Fatalf("rerun ingested %d rows, want %d", res.Rows, 64-want)
			}
			if n := countRows(t, tbl); n != 64 {
				t.Fatalf("after the rerun the table reads %d rows, want 64", n)
			}
			checkVersion(t, tbl, 2) // the rerun wrote what was missing
		})
	}
}

// versions returns the table's last log snapshot and its newest Iceberg
// metadata version.
func versions(t *testing.T, tbl string) (logged, written int) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(tbl, "_log", "*.json"))
	mds, _ := filepath.Glob(filepath.Join(tbl, iceberg.Dir, "v*.metadata.json"))
	return len(logs), len(mds)
}

// fixtureRows reads Trinity-RFT 0.5's experience buffer fixture.
func fixtureRows(t *testing.T) []arrow.Record {
	t.Helper()
	abs, err := filepath.Abs("../../fixtures/trinity/experience.db")
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.Open("sqlite:///"+abs+"?table=experience_buffer", store.BatchRows(1))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []arrow.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		out = append(out, rec)
	}
}

// appendRows writes recs into a buffer with the project's Trinity writer.
func appendRows(t *testing.T, url string, recs []arrow.Record) {
	t.Helper()
	w, err := store.Create(url, recs[0].Schema())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			w.Abort()
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// countRows reads a store whole and counts its rows.
func countRows(t *testing.T, path string) int64 {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n int64
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		n += rec.NumRows()
	}
}
