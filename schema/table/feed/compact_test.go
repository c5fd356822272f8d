package feed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/table/catalog"
)

// TestCompactUnderConcurrentReader ingests a buffer in eight small steps,
// then compacts the table while readers read it again and again: every read
// sees the 64 rows once each, in the buffer's order. Expiring afterwards
// removes the merged files and makes the old snapshots unreadable, and the
// table still reads whole.
func TestCompactUnderConcurrentReader(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	url := "sqlite:///" + dir + "/b.db?table=exp&schema_type=experience&if_exists=append"
	tbl := dir + "/table"
	recs := records(t)
	for i := 0; i < 64; i += 8 {
		writeBuffer(t, url, recs[i:i+8])
		if _, err := Ingest(ctx, url, tbl, Options{Experiment: "e"}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, want := readAll(t, url)
	files, _ := store.Expand(tbl)
	if len(files) != 8 {
		t.Fatalf("%d data files before compaction, want 8", len(files))
	}

	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, _, keys := readAll(t, tbl)
				if strings.Join(keys, ",") != strings.Join(want, ",") {
					t.Errorf("a read during compaction saw %d rows %v, want %v", len(keys), keys, want)
					return
				}
				reads.Add(1)
			}
		}()
	}
	res, err := Compact(ctx, tbl, 20, time.Time{}, "", catalog.Target{})
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Merged != 8 || res.Written != 1 || reads.Load() == 0 {
		t.Fatalf("compaction %+v with %d reads, want 8 files merged into 1 under reads", res, reads.Load())
	}
	if files, _ := store.Expand(tbl); len(files) != 1 {
		t.Fatalf("%d data files after compaction, want 1", len(files))
	}
	if _, _, keys := readAll(t, tbl+"?as_of=8"); len(keys) != 64 {
		t.Fatalf("as_of=8 (before compaction) reads %d rows, want 64", len(keys))
	}

	// a killed ingest's data file, old, and a running one's, new
	old, fresh := filepath.Join(tbl, "data", "experiment=e", "old.parquet"), filepath.Join(tbl, "data", "experiment=e", "new.parquet")
	for _, f := range []string{old, fresh} {
		if err := os.WriteFile(f, []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	expireAt := time.Now()
	if err := os.Chtimes(old, expireAt.Add(-time.Hour), expireAt.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(fresh, expireAt.Add(time.Hour), expireAt.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	res, err = Compact(ctx, tbl, 20, expireAt, "", catalog.Target{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Expired != 9 {
		t.Fatalf("expiry removed %d files, want the 8 merged ones and the old orphan", res.Expired)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("the old orphan is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("the new orphan (a running ingest's) was removed: %v", err)
	}
	if _, _, keys := readAll(t, tbl); strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Fatalf("after expiry the table reads %v, want %v", keys, want)
	}
	if _, err := store.Expand(tbl + "?as_of=8"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("as_of=8 after expiry: %v, want an expired snapshot error", err)
	}
}
