package feed

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/table"
)

// fixture is Trinity-RFT 0.5's experience buffer (64 rows, null rewards on
// 4 of them).
const fixture = "../../../fixtures/trinity/experience.db"

// readAll returns the rows of a store, its reward column's nulls, and a key
// per row (task, run) in order.
func readAll(t *testing.T, path string) (rows int64, nullRewards int64, keys []string) {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows += rec.NumRows()
		rw := rec.Column(rec.Schema().FieldIndices(schema.Reward)[0])
		nullRewards += int64(rw.NullN())
		for i := 0; i < int(rec.NumRows()); i++ {
			keys = append(keys, keyOf(rec, i))
		}
	}
	return rows, nullRewards, keys
}

// records reads the fixture's rows as batches of one row each.
func records(t *testing.T) []arrow.Record {
	t.Helper()
	r, err := store.Open("sqlite:///"+mustAbs(t, fixture)+"?table=experience_buffer", store.BatchRows(1))
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

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// writeBuffer writes recs into the buffer at url with the project's Trinity
// writer (appending to the table when it exists).
func writeBuffer(t *testing.T, url string, recs []arrow.Record) {
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

// TestBufferGrowsOverThreeIngests ingests a buffer of each layout after
// each of three writes: each ingest appends exactly the rows written since
// the last (null rewards as they are), with no warning (the 0.6 layout's
// blob rows below the watermark are not taken for orphans), a rerun says 0
// new, and every snapshot reads back as the buffer held it.
func TestBufferGrowsOverThreeIngests(t *testing.T) {
	for _, layout := range []string{"0.5", "0.6"} {
		t.Run(layout, func(t *testing.T) { bufferGrows(t, layout) })
	}
}

func bufferGrows(t *testing.T, layout string) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "buffer.db")
	url := "sqlite:///" + db + "?table=exp&schema_type=experience&if_exists=append&layout=" + layout
	tbl := filepath.Join(dir, "table")
	recs := records(t)
	if len(recs) != 64 {
		t.Fatalf("fixture: %d rows, want 64", len(recs))
	}
	cuts := []int{0, 20, 41, 64}
	for step := 0; step < 3; step++ {
		writeBuffer(t, url, recs[cuts[step]:cuts[step+1]])
		res, err := Ingest(ctx, url, tbl, Options{Experiment: "e1"})
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(cuts[step+1] - cuts[step]); res.Rows != want || len(res.Snapshots) != 1 || res.Snapshots[0] != int64(step+1) || len(res.Warnings) > 0 {
			t.Fatalf("ingest %d: %+v, want %d rows in snapshot %d", step+1, res, want, step+1)
		}
		again, err := Ingest(ctx, url, tbl, Options{Experiment: "e1"})
		if err != nil || again.Rows != 0 || len(again.Snapshots) != 0 {
			t.Fatalf("rerun of ingest %d: %+v, %v; want 0 new", step+1, again, err)
		}
		_, _, bufKeys := readAll(t, url)
		rows, _, keys := readAll(t, tbl)
		if rows != int64(cuts[step+1]) || strings.Join(keys, ",") != strings.Join(bufKeys, ",") {
			t.Fatalf("after ingest %d the table holds %d rows %v, want the buffer's %v", step+1, rows, keys, bufKeys)
		}
	}
	_, bufNulls, _ := readAll(t, url)
	_, nulls, _ := readAll(t, tbl)
	if bufNulls != 4 || nulls != bufNulls {
		t.Fatalf("null rewards: table %d, buffer %d, want 4 in both", nulls, bufNulls)
	}
	for snap, want := range map[int]int64{1: 20, 2: 41, 3: 64} {
		rows, _, _ := readAll(t, tbl+"?as_of="+strconv.Itoa(snap))
		if rows != want {
			t.Errorf("as_of=%d: %d rows, want %d", snap, rows, want)
		}
	}
}

// TestFileSourceGrows ingests a JSONL file that grows: each ingest appends
// the rows after the last one's, by row; a file shorter than what the table
// holds of it is refused.
func TestFileSourceGrows(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "rows.jsonl")
	recs := records(t)
	write := func(n int) {
		w, err := store.Create(src, recs[0].Schema())
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs[:n] {
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	tbl := filepath.Join(dir, "table")
	for _, n := range []int{10, 30, 30} {
		write(n)
		if _, err := Ingest(ctx, src, tbl, Options{Experiment: "files"}); err != nil {
			t.Fatal(err)
		}
		if rows, _, _ := readAll(t, tbl); rows != int64(n) {
			t.Fatalf("file of %d rows: the table holds %d", n, rows)
		}
	}
	write(5) // replaced by a shorter file
	if _, err := Ingest(ctx, src, tbl, Options{Experiment: "files"}); err == nil || !strings.Contains(err.Error(), "the file was replaced") {
		t.Fatalf("ingest of a file shorter than its watermark: %v, want an error", err)
	}
}

// TestSourceInsideTable: a file of the table itself, however spelled, is
// refused as a source, and the table is left as it was.
func TestSourceInsideTable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "rows.jsonl")
	recs := records(t)
	w, err := store.Create(src, recs[0].Schema())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs[:10] {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	tbl := filepath.Join(dir, "table")
	if _, err := Ingest(ctx, src, tbl, Options{Experiment: "a"}); err != nil {
		t.Fatal(err)
	}
	data, err := filepath.Glob(filepath.Join(tbl, "data", "*", "*.parquet"))
	if err != nil || len(data) != 1 {
		t.Fatalf("data files %v %v", data, err)
	}
	if err := os.Symlink(tbl, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(tbl, data[0])
	for _, in := range []string{data[0], filepath.Join(dir, "link", rel), filepath.Join(tbl, "data", "*", "*.parquet")} {
		if _, err := Ingest(ctx, in, tbl, Options{Experiment: "b"}); err == nil || !strings.Contains(err.Error(), "lies inside the table") {
			t.Errorf("ingest of %s into its own table: %v, want a refusal", in, err)
		}
	}
	if rows, _, _ := readAll(t, tbl); rows != 10 {
		t.Errorf("the table holds %d rows, want 10", rows)
	}
}

// TestConcurrentIngests runs ingests of one buffer, and of another, at
// once: every row lands once; a loser of a race for one source fails with
// ErrConcurrent and a rerun brings the rest.
func TestConcurrentIngests(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	recs := records(t)
	a := "sqlite:///" + filepath.Join(dir, "a.db") + "?table=exp&schema_type=experience"
	b := "sqlite:///" + filepath.Join(dir, "b.db") + "?table=exp&schema_type=experience"
	writeBuffer(t, a, recs)
	writeBuffer(t, b, recs[:32])
	tbl := filepath.Join(dir, "table")
	if _, err := table.Open(tbl, true); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		src := a
		if i%2 == 1 {
			src = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Ingest(ctx, src, tbl, Options{Experiment: "e"})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, table.ErrConcurrent) {
			t.Fatalf("concurrent ingest: %v", err)
		}
	}
	for _, src := range []string{a, b} { // the reruns
		if _, err := Ingest(ctx, src, tbl, Options{Experiment: "e"}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{}
	for i, rec := range recs {
		want[keyOf(rec, 0)]++
		if i < 32 {
			want[keyOf(rec, 0)]++
		}
	}
	rows, _, keys := readAll(t, tbl)
	got := map[string]int{}
	for _, k := range keys {
		got[k]++
	}
	if rows != 96 || len(got) != len(want) {
		t.Fatalf("table holds %d rows of %d keys, want 96 of %d", rows, len(got), len(want))
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("row %s: %d times in the table, want %d", k, got[k], n)
		}
	}
}

// keyOf returns row i's batch/task/run.
func keyOf(rec arrow.Record, i int) string {
	var k []string
	for _, c := range []string{schema.Batch, schema.Task, schema.Run} {
		k = append(k, rec.Column(rec.Schema().FieldIndices(c)[0]).ValueStr(i))
	}
	return strings.Join(k, "/")
}
