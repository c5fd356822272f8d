package feed

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema/table"
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

// copyRow inserts, in tx, a copy of row src of a buffer table with run_id
// run (so that its key is new), and returns its id: a writer drawing its id
// from the table's sequence.
func copyRow(t *testing.T, tx *sql.Tx, table, layout string, src, run int64) int64 {
	t.Helper()
	cols := "task_id, msg_id, model_version, reward, consumed"
	if layout == "0.5" {
		cols += ", experience_bytes"
	}
	var id int64
	q := "INSERT INTO " + table + " (run_id, " + cols + ") SELECT $1, " + cols + " FROM " + table + " WHERE id = $2 RETURNING id"
	if err := tx.QueryRow(q, run, src).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if layout == "0.6" {
		if _, err := tx.Exec("INSERT INTO "+table+"_blob (id, experience_bytes) SELECT $1, experience_bytes FROM "+table+"_blob WHERE id = $2", id, src); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// TestPostgresHoles ingests a PostgreSQL buffer while a transaction that
// drew a lower id is in flight and a later id has committed: the first
// ingest keeps the lower id as a hole, and the one after its commit
// ingests it; a hole whose transaction rolled back is dropped once it has
// ended. Every row is ingested exactly once; a watermark without holes is
// the plain id, as before holes.
func TestPostgresHoles(t *testing.T) {
	base, skip := pgtest.Start()
	if skip != "" {
		t.Skip("PostgreSQL tests skipped: " + skip)
	}
	for _, layout := range []string{"0.5", "0.6"} {
		t.Run(layout, func(t *testing.T) { postgresHoles(t, base, layout) })
	}
}

func postgresHoles(t *testing.T, base, layout string) {
	ctx := context.Background()
	name := "feed_holes_" + strings.ReplaceAll(layout, ".", "")
	url := base + "&table=" + name + "&schema_type=experience&if_exists=append&layout=" + layout
	tbl := filepath.Join(t.TempDir(), "table")
	writeBuffer(t, url, records(t)[:20])
	db, err := sql.Open("pgx", strings.Replace(base, "postgresql://", "postgres://", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, err := sourceKey(url)
	if err != nil {
		t.Fatal(err)
	}
	begin := func() *sql.Tx {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	commit := func(tx *sql.Tx) {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	ingest := func(step string, rows int64, mark string) {
		t.Helper()
		res, err := Ingest(ctx, url, tbl, Options{Experiment: "pg"})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		tb, err := table.Open(tbl, false)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tb.Base()
		if err != nil {
			t.Fatal(err)
		}
		got := b.Watermark(key)
		if res.Rows != rows || got != mark && !(strings.HasSuffix(mark, "[") && strings.HasPrefix(got, mark)) {
			t.Fatalf("%s: %d rows, watermark %s; want %d rows, watermark %s…", step, res.Rows, got, rows, mark)
		}
	}
	ingest("first ingest", 20, "20")

	held := begin()
	heldID := copyRow(t, held, name, layout, 1, 901) // 21, in flight
	later := begin()
	laterID := copyRow(t, later, name, layout, 2, 902) // 22
	commit(later)
	if heldID != 21 || laterID != 22 {
		t.Fatalf("ids %d, %d; want 21, 22", heldID, laterID)
	}
	ingest("with 21 in flight", 1, `{"id":22,"holes":[{"ids":[[21,21]],"open":[`)
	ingest("21 still in flight", 0, `{"id":22,"holes":[{"ids":[[21,21]],"open":[`)
	commit(held)
	ingest("21 committed", 1, "22")
	ingest("nothing new", 0, "22")

	gone := begin()
	copyRow(t, gone, name, layout, 3, 903) // 23, rolled back below
	after := begin()
	copyRow(t, after, name, layout, 4, 904) // 24
	commit(after)
	ingest("with 23 in flight", 1, `{"id":24,"holes":[{"ids":[[23,23]],"open":[`)
	if err := gone.Rollback(); err != nil {
		t.Fatal(err)
	}
	last := begin()
	copyRow(t, last, name, layout, 5, 905) // 25
	commit(last)
	ingest("23 rolled back", 1, "25")

	_, _, bufKeys := readAll(t, url)
	_, _, keys := readAll(t, tbl)
	sort.Strings(bufKeys)
	sort.Strings(keys)
	if strings.Join(keys, ",") != strings.Join(bufKeys, ",") {
		t.Fatalf("the table holds %v, want the buffer's %v", keys, bufKeys)
	}
}
