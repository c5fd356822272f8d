package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/store/internal/leaftest"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// deferredCopy copies in to out through a deferred read that decodes only
// decode, writing each batch with WriteWith (its other columns as a Rest);
// it returns the batches read.
func deferredCopy(t *testing.T, in, out string, decode ...string) int {
	return copyDeferred(t, in, out, false, decode...)
}

// copyReencoding is deferredCopy with the decoded columns written as new
// arrays of the same values (encoded, not copied as read).
func copyReencoding(t *testing.T, in, out string, decode ...string) int {
	return copyDeferred(t, in, out, true, decode...)
}

func copyDeferred(t *testing.T, in, out string, reencode bool, decode ...string) int {
	t.Helper()
	r, err := store.Open(in, store.Columns(decode...), store.Deferred(), store.BatchRows(7))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := store.Create(out, fullSchema(t, in))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	batches := 0
	for ; ; batches++ {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if reencode {
			// The same values in new arrays (each its slice of itself, concatenated).
			cols := make([]arrow.Array, rec.NumCols())
			for i := range cols {
				if cols[i], err = array.Concatenate([]arrow.Array{rec.Column(i)}, memory.DefaultAllocator); err != nil {
					t.Fatal(err)
				}
			}
			rec = array.NewRecord(rec.Schema(), cols, rec.NumRows())
			for _, c := range cols {
				c.Release() // the record holds them
			}
		} else {
			rec.Retain()
		}
		rest := r.Rest()
		if rest == nil || rest.Rows() != rec.NumRows() {
			t.Fatalf("batch %d: rest %v for %d rows", batches, rest, rec.NumRows())
		}
		if err := w.WriteWith(rec, rest); err != nil {
			t.Fatal(err)
		}
		rest.Release()
		rec.Release()
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return batches
}

func TestDeferredCopy(t *testing.T) {
	decode := []string{"batch", "task", "reward", "action_mask"}
	if !store.Deferrable([]string{demo}, decode, 0) {
		t.Fatal("the bundled store is not deferrable")
	}
	if store.Deferrable([]string{"../../fixtures/stores/demo.jsonl"}, decode, 0) {
		t.Fatal("a JSONL store is deferrable")
	}
	want, _ := readAll(t, demo)
	dir := t.TempDir()
	// Parquet copies the rest's chunks as bytes, the other formats decode
	// them: every column of every row reads back the same.
	for _, name := range []string{"a.parquet", "b.parquet", "c.arrows", "d.jsonl"} {
		out := filepath.Join(dir, name)
		if n := deferredCopy(t, demo, out, decode...); n == 0 {
			t.Fatalf("%s: no batch", name)
		}
		if got, _ := readAll(t, out); got != want {
			t.Fatalf("%s: the deferred copy reads back differently", name)
		}
	}
	if sha(t, filepath.Join(dir, "a.parquet")) != sha(t, filepath.Join(dir, "b.parquet")) {
		t.Fatal("two deferred copies differ")
	}
}

// A column that is the same array as an earlier one (returns written as
// advantages) is encoded once; both read back whole.
func TestSharedColumnArray(t *testing.T) {
	r, err := store.Open(demo, store.Columns("logprobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	lp := r.Schema().Field(0)
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: lp.Type, Nullable: true}, {Name: "b", Type: lp.Type, Nullable: true}}, nil)
	out := filepath.Join(t.TempDir(), "shared.parquet")
	w, err := store.Create(out, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	var want []string
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		col := rec.Column(0)
		two := array.NewRecord(sc, []arrow.Array{col, col}, rec.NumRows())
		if err := w.Write(two); err != nil {
			t.Fatal(err)
		}
		two.Release()
		for i := 0; i < col.Len(); i++ {
			want = append(want, col.ValueStr(i))
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	back, err := store.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	k := 0
	for {
		rec, err := back.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < int(rec.NumRows()); i, k = i+1, k+1 {
			if a, b := rec.Column(0).ValueStr(i), rec.Column(1).ValueStr(i); a != want[k] || b != want[k] {
				t.Fatalf("row %d: %s and %s, want %s", k, a, b, want[k])
			}
		}
	}
	if k != len(want) {
		t.Fatalf("read %d rows, want %d", k, len(want))
	}
}

// chunkBytes returns the bytes of every column chunk of a Parquet file, row
// group by row group.
func chunkBytes(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, s := range chunkSpans(t, path) {
		out = append(out, data[s[0]:s[1]])
	}
	return out
}

// TestDecodedColumnsCopiedAsRead: a column a deferred read decoded and the
// writer is handed as read (the very array) is copied as its input chunk,
// like the rest's; a decoded column replaced by another array, even of the
// same values, is encoded.
func TestDecodedColumnsCopiedAsRead(t *testing.T) {
	out := filepath.Join(t.TempDir(), "a.parquet")
	deferredCopy(t, demo, out, "batch", "task", "reward", "action_mask")
	in, got := chunkBytes(t, demo), chunkBytes(t, out)
	if len(in) != len(got) {
		t.Fatalf("%d chunks, want %d", len(got), len(in))
	}
	for i := range in {
		if !bytes.Equal(in[i], got[i]) {
			t.Fatalf("chunk %d was not copied as read", i)
		}
	}

	fresh := filepath.Join(t.TempDir(), "b.parquet")
	copyReencoding(t, demo, fresh, "reward")
	want, _ := readAll(t, demo)
	if back, _ := readAll(t, fresh); back != want {
		t.Fatal("the store with a re-encoded column reads back differently")
	}
}

// fullSchema returns the schema of every column of a store.
func fullSchema(t *testing.T, path string) *arrow.Schema {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return r.Schema()
}

// TestCopiesKeepBatchStatistics: a decoded batch column whose input chunks
// lack min/max statistics is encoded, not copied, so the output keeps the
// statistics sharded reads skip row groups by.
func TestCopiesKeepBatchStatistics(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "nostats.parquet"), filepath.Join(dir, "out.parquet")
	r, err := store.Open(demo)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithStats(false), parquet.WithRootRepetition(parquet.Repetitions.Required),
		parquet.WithCompression(compress.Codecs.Zstd))
	w, err := pqarrow.NewFileWriter(r.Schema(), f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteBuffered(rec); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	deferredCopy(t, in, out, "batch", "task", "reward", "action_mask")
	pf, err := file.OpenParquetFile(out, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	col := pf.MetaData().Schema.ColumnIndexByName("batch")
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		cc, err := pf.MetaData().RowGroup(rg).ColumnChunk(col)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := cc.StatsSet(); !ok {
			t.Fatalf("row group %d: the batch column has no statistics", rg)
		}
	}
	want, _ := readAll(t, demo)
	if got, _ := readAll(t, out); got != want {
		t.Fatal("the copy reads back differently")
	}
}

// chunkSpans returns each column chunk's [start, start+size) in a Parquet
// file, row group by row group.
func chunkSpans(t *testing.T, path string) [][2]int64 {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	var out [][2]int64
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		for c := 0; c < pf.MetaData().Schema.NumColumns(); c++ {
			cc, err := pf.MetaData().RowGroup(rg).ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
				start = min(start, cc.DictionaryPageOffset())
			}
			out = append(out, [2]int64{start, start + cc.TotalCompressedSize()})
		}
	}
	return out
}

// TestLargeChunksCopiedAligned: an input's column chunk of 64 KiB or more
// is copied to an output offset congruent with its own modulo 4096 (so a
// file system that shares blocks clones it), a smaller one right after the
// chunk before, when a re-encoded column before them moves the output's
// offsets off the input's; the output reads back as the input, twice the
// same bytes.
func TestLargeChunksCopiedAligned(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "batch", Type: arrow.PrimitiveTypes.Int64},
		{Name: "logprobs", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
		{Name: "note", Type: arrow.BinaryTypes.String},
		{Name: "entropy", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
	}, nil)
	// arrow-go's writer, "batch" without a dictionary: re-encoded by
	// rftpipe's writer (with one) it takes another number of bytes.
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryFor("batch", false)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	seed := uint32(1)
	next := func() float32 { seed = seed*1664525 + 1013904223; return float32(seed>>8) / (1 << 24) }
	for g := 0; g < 3; g++ { // three row groups of 300 rows × 120 random floats: ~140 KiB chunks
		bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		for i := 0; i < 300; i++ {
			bld.Field(0).(*array.Int64Builder).Append(int64(g*1000 + i))
			for _, c := range []int{1, 3} {
				lb := bld.Field(c).(*array.ListBuilder)
				lb.Append(true)
				for k := 0; k < 120; k++ {
					lb.ValueBuilder().(*array.Float32Builder).Append(next())
				}
			}
			bld.Field(2).(*array.StringBuilder).Append("n")
		}
		rec := bld.NewRecord()
		bld.Release()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want, _ := readAll(t, in)
	inSpans := chunkSpans(t, in)
	for _, name := range []string{"a.parquet", "b.parquet"} {
		out := filepath.Join(dir, name)
		copyReencoding(t, in, out, "batch")
		if got, _ := readAll(t, out); got != want {
			t.Fatalf("%s reads back differently", name)
		}
		outSpans := chunkSpans(t, out)
		if len(outSpans) != len(inSpans) {
			t.Fatalf("%s: %d chunks, want %d", name, len(outSpans), len(inSpans))
		}
		large, moved := 0, 0
		for i, s := range inSpans {
			o := outSpans[i]
			if i%4 == 0 {
				continue // "batch", re-encoded
			}
			if o[1]-o[0] != s[1]-s[0] {
				t.Fatalf("%s: chunk %d has %d bytes, the input's %d", name, i, o[1]-o[0], s[1]-s[0])
			}
			if o[0] != s[0] {
				moved++
			}
			if s[1]-s[0] >= 64<<10 {
				large++
				if (o[0]-s[0])%4096 != 0 {
					t.Errorf("%s: chunk %d of %d bytes at %d, the input's at %d: not congruent modulo 4096", name, i, s[1]-s[0], o[0], s[0])
				}
			} else if o[0] > outSpans[i-1][1]+1024 {
				t.Errorf("%s: small chunk %d at %d, %d bytes after the chunk before", name, i, o[0], o[0]-outSpans[i-1][1])
			}
		}
		if large != 6 || moved == 0 {
			t.Errorf("%s: %d chunks of 64 KiB or more (want 6), %d moved (want some): not the test's input", name, large, moved)
		}
	}
	if sha(t, filepath.Join(dir, "a.parquet")) != sha(t, filepath.Join(dir, "b.parquet")) {
		t.Fatal("two copies differ")
	}
	// arrow-go's own Parquet reader (pqarrow) reads them as the input's.
	readTable := func(path string) arrow.Table {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tbl, err := pqarrow.ReadTable(context.Background(), f, nil, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	inT, outT := readTable(in), readTable(filepath.Join(dir, "a.parquet"))
	defer inT.Release()
	defer outT.Release()
	if !array.TableEqual(inT, outT) {
		t.Fatal("arrow-go reads the copy differently from the input")
	}
	// DuckDB reads the chunks after the gaps as the input's.
	db, err := duckdb.Open(duckdb.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var sums [2]string
	for i, p := range []string{in, filepath.Join(dir, "a.parquet")} {
		q := `SELECT count(*)::VARCHAR || ' ' || sum(hash(t))::VARCHAR FROM read_parquet(` + duckdb.QuoteString(p) + `) t`
		if err := db.QueryRow(q).Scan(&sums[i]); err != nil {
			t.Fatal(err)
		}
	}
	if sums[0] != sums[1] || !strings.HasPrefix(sums[0], "900 ") {
		t.Fatalf("DuckDB reads the copy as %q, the input as %q", sums[1], sums[0])
	}
}

// The kept rows of a Rest (Keep) written with WriteWith are the bytes of
// the same rows decoded and written with Write, over stores whose list
// columns the writer writes from their pages (full.parquet; one of pqarrow's
// with dictionary pages and data pages v2) and one with null elements (the
// columns that hold them decoded), for some rows kept, every one and none;
// the check sees the record of the batch's columns, a list written from its
// pages as its layout alone, and its error is the write's.
func TestRestKeep(t *testing.T) {
	dir := t.TempDir()
	holes, dict := filepath.Join(dir, "holes.parquet"), filepath.Join(dir, "dict.parquet")
	for path, rec := range map[string]arrow.Record{holes: leaftest.Record(300, true, 3), dict: leaftest.Record(300, false, 4)} {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		props := parquet.NewWriterProperties(parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithMaxRowGroupLength(64),
			parquet.WithDataPageSize(512), parquet.WithCompression(compress.Codecs.Zstd))
		if path == holes {
			props = parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(64), parquet.WithDictionaryDefault(false))
		}
		if err := pqarrow.WriteTable(array.NewTableFromRecords(rec.Schema(), []arrow.Record{rec}), f, 64, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, c := range []struct {
		in     string
		decode []string
		layout string // a column written from its pages
	}{
		{"../../fixtures/stores/full.parquet", []string{"batch", "task"}, "tokens"},
		{dict, []string{"id"}, "f32"},
		{holes, []string{"id"}, ""},
	} {
		for name, keepOf := range map[string]func(int) bool{"some": func(i int) bool { return i%3 != 0 && i%7 != 5 }, "all": func(int) bool { return true }, "none": func(int) bool { return false }} {
			outs := [2]string{filepath.Join(dir, "kept.parquet"), filepath.Join(dir, "decoded.parquet")}
			var mu sync.Mutex
			var bad []string
			checks, batches := 0, 0
			for k, out := range outs {
				r, err := store.Open(c.in, store.Columns(c.decode...), store.Deferred(), store.BatchRows(64))
				if err != nil {
					t.Fatal(err)
				}
				w, err := store.Create(out, fullSchema(t, c.in))
				if err != nil {
					t.Fatal(err)
				}
				for {
					rec, err := r.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					rest := r.Rest()
					keep := pattern(int(rec.NumRows()), keepOf)
					kept := keptRows(t, rec, keep)
					if k == 0 {
						rows := kept.NumRows()
						kr, err := rest.Keep(keep, func(all arrow.Record) error {
							mu.Lock()
							defer mu.Unlock()
							checks++
							lay := all.Schema().FieldIndices(c.layout)
							if all.NumCols() != int64(len(fullSchema(t, c.in).Fields())) || all.NumRows() != rows ||
								(len(lay) > 0) != (c.layout != "") || (len(lay) > 0 && !arrow.TypeEqual(all.Column(lay[0]).DataType(), arrow.ListOf(arrow.Null))) {
								bad = append(bad, all.Schema().String())
							}
							return nil
						})
						if err != nil {
							t.Fatal(err)
						}
						if err := w.WriteWith(kept, kr); err != nil {
							t.Fatal(err)
						}
						kr.Release()
						batches++
					} else {
						whole, err := rest.Join(rec)
						if err != nil {
							t.Fatal(err)
						}
						all := keptRows(t, whole, keep)
						if err := w.Write(all); err != nil {
							t.Fatal(err)
						}
						all.Release()
					}
					kept.Release()
					rest.Release()
				}
				r.Close()
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			if checks != batches || len(bad) > 0 {
				t.Fatalf("%s, %s: %d batches checked of %d; the check saw %v", c.in, name, checks, batches, bad)
			}
			if sha(t, outs[0]) != sha(t, outs[1]) {
				t.Fatalf("%s, %s: the kept rows written from the rest differ from the rows decoded", c.in, name)
			}
		}
	}
	// The check's error is the write's, as it is.
	r, err := store.Open(dict, store.Columns("id"), store.Deferred(), store.BatchRows(64))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := store.Create(filepath.Join(dir, "refused.parquet"), fullSchema(t, dict))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	refused := schema.Errorf(dict, 3, "f32", "refused")
	kr, err := r.Rest().Keep(pattern(int(rec.NumRows()), func(int) bool { return true }), func(arrow.Record) error { return refused })
	if err != nil {
		t.Fatal(err)
	}
	defer kr.Release()
	err = w.WriteWith(rec, kr)
	if err == nil {
		err = w.Commit()
	}
	if err == nil || err.Error() != refused.Error() {
		t.Fatalf("a refused check: %v", err)
	}
}

// keptRows returns the rows i of rec where keep[i] is true.
func keptRows(t *testing.T, rec arrow.Record, keep []bool) arrow.Record {
	t.Helper()
	cols := make([]arrow.Array, rec.NumCols())
	n := 0
	for c := range cols {
		var parts []arrow.Array
		for i, k := range keep {
			if k {
				parts = append(parts, array.NewSlice(rec.Column(c), int64(i), int64(i+1)))
			}
		}
		if len(parts) == 0 {
			parts = append(parts, array.NewSlice(rec.Column(c), 0, 0))
		}
		a, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols[c], n = a, a.Len()
	}
	return array.NewRecord(rec.Schema(), cols, int64(n))
}

func pattern(n int, keep func(int) bool) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = keep(i)
	}
	return out
}
