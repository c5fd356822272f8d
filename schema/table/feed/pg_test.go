package feed

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema/trinity/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestPostgresBufferGrows ingests a PostgreSQL buffer after each of two
// writes: each ingest appends exactly the rows written since the last, and
// the watermark is the database's, whatever the URL's user or options.
func TestPostgresBufferGrows(t *testing.T) {
	base, skip := pgtest.Start()
	if skip != "" {
		t.Skip("PostgreSQL tests skipped: " + skip)
	}
	ctx := context.Background()
	url := base + "&table=feed_grows&schema_type=experience&if_exists=append"
	tbl := filepath.Join(t.TempDir(), "table")
	recs := records(t)
	for step, cut := range [][2]int{{0, 20}, {20, 64}} {
		writeBuffer(t, url, recs[cut[0]:cut[1]])
		res, err := Ingest(ctx, url, tbl, Options{Experiment: "pg"})
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(cut[1] - cut[0]); res.Rows != want || res.Read != want {
			t.Fatalf("ingest %d: %+v, want %d rows read and appended", step+1, res, want)
		}
	}
	// the same table through a URL spelled otherwise: nothing new
	res, err := Ingest(ctx, strings.Replace(base, "?", "?connect_timeout=5&", 1)+"&table=feed_grows", tbl, Options{Experiment: "pg"})
	if err != nil || res.Rows != 0 {
		t.Fatalf("rerun through another spelling of the URL: %+v %v, want 0 new", res, err)
	}
	_, _, bufKeys := readAll(t, url)
	if _, _, keys := readAll(t, tbl); strings.Join(keys, ",") != strings.Join(bufKeys, ",") {
		t.Fatalf("the table holds %v, want the buffer's %v", keys, bufKeys)
	}
}
