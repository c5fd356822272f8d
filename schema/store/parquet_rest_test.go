package store_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema/store"
)

// deferredCopy copies in to out through a deferred read that decodes only
// decode, writing each batch with WriteWith (its other columns as a Rest);
// it returns the batches read.
func deferredCopy(t *testing.T, in, out string, decode ...string) int {
	t.Helper()
	full, err := store.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	sc := full.Schema()
	full.Close()
	r, err := store.Open(in, store.Columns(decode...), store.Deferred(), store.BatchRows(7))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := store.Create(out, sc)
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
		rest := r.Rest()
		if rest == nil || rest.Rows() != rec.NumRows() {
			t.Fatalf("batch %d: rest %v for %d rows", batches, rest, rec.NumRows())
		}
		if err := w.WriteWith(rec, rest); err != nil {
			t.Fatal(err)
		}
		rest.Release()
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
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
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
			out = append(out, data[start:start+cc.TotalCompressedSize()])
		}
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

	r, err := store.Open(demo, store.Columns("reward"), store.Deferred())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fresh := filepath.Join(t.TempDir(), "b.parquet")
	w, err := store.Create(fresh, fullSchema(t, demo))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// The same values in a new array (its slice of itself, concatenated).
		reward, err := array.Concatenate([]arrow.Array{rec.Column(0)}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		other := array.NewRecord(rec.Schema(), []arrow.Array{reward}, rec.NumRows())
		rest := r.Rest()
		if err := w.WriteWith(other, rest); err != nil {
			t.Fatal(err)
		}
		rest.Release()
		other.Release()
		reward.Release()
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
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
