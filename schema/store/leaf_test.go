package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema/store/internal/leaftest"
)

// checkLeafRead reads every field of every row group in batches of n with
// the leaf codec and with pqarrow, and compares them.
func checkLeafRead(t *testing.T, data []byte, n int64) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: n}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	plans := planFields(pf, sc)
	slow := make([]fieldPlan, len(plans))
	for i, p := range plans {
		if p.shape == nil {
			t.Fatalf("field %s: not taken by the leaf codec", sc.Field(i).Name)
		}
		slow[i].leaves = p.leaves
	}
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		fast, err := fieldReaders(pf, bytes.NewReader(data), fr, plans, rg)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := fieldReaders(pf, bytes.NewReader(data), fr, slow, rg)
		if err != nil {
			t.Fatal(err)
		}
		for left := pf.MetaData().RowGroup(rg).NumRows(); left > 0; left -= min(n, left) {
			for i := range plans {
				got, err := fast[i].read(n, nil)
				if err != nil {
					t.Fatalf("row group %d, %s: %v", rg, sc.Field(i).Name, err)
				}
				want, err := ref[i].read(n, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !arrow.TypeEqual(got.DataType(), want.DataType()) || !array.Equal(got, want) {
					t.Fatalf("row group %d, %s, batch of %d: leaf codec\n%v\npqarrow\n%v", rg, sc.Field(i).Name, n, got, want)
				}
				got.Release()
				want.Release()
			}
		}
		releaseReaders(fast)
		releaseReaders(ref)
	}
}

// TestLeafEncoder: records written by the column sink (list columns through
// the leaf codec, in pages of a few rows or of many) read back through
// pqarrow as they were written.
func TestLeafEncoder(t *testing.T) {
	for _, holes := range []bool{false, true} {
		rec := leaftest.Record(600, holes, 5)
		for _, pageSize := range []int64{64, 1 << 20} {
			t.Run(fmt.Sprintf("holes=%v page=%d", holes, pageSize), func(t *testing.T) {
				props, err := ParquetOptions{}.writerProperties(rec.Schema())
				if err != nil {
					t.Fatal(err)
				}
				var opts []parquet.WriterProperty
				opts = append(opts, parquet.WithDataPageSize(pageSize), parquet.WithCompression(compress.Codecs.Zstd),
					parquet.WithRootRepetition(parquet.Repetitions.Required), parquet.WithStats(false), parquet.WithMaxRowGroupLength(250))
				for _, f := range rec.Schema().Fields() {
					if _, ok := f.Type.(*arrow.ListType); ok {
						path := f.Name + ".list.element"
						opts = append(opts, parquet.WithDictionaryFor(path, props.DictionaryEnabledFor(path)))
					}
				}
				var buf bytes.Buffer
				sk, err := newColumnSink(&buf, rec.Schema(), parquet.NewWriterProperties(opts...))
				if err != nil {
					t.Fatal(err)
				}
				if err := sk.Write(rec); err != nil {
					t.Fatal(err)
				}
				if err := sk.Close(); err != nil {
					t.Fatal(err)
				}
				for i, got := range pqarrowColumns(t, buf.Bytes()) {
					if !array.Equal(got, rec.Column(i)) {
						t.Fatalf("column %s: %d rows read back differ from the %d written (%s vs %s)", rec.ColumnName(i), got.Len(), rec.Column(i).Len(), got.DataType(), rec.Column(i).DataType())
					}
				}
				checkLeafRead(t, buf.Bytes(), 7)
			})
		}
	}
}

// TestNullListWithValues: an Arrow list whose null row spans values (Arrow
// allows it, Parquet holds none under a null list) is not written as if the
// values were the next row's: the write fails or the store reads back as
// written.
func TestNullListWithValues(t *testing.T) {
	vals := array.NewFloat32Builder(memory.DefaultAllocator)
	vals.AppendValues([]float32{1, 2, 3, 4, 5}, nil)
	v := vals.NewArray()
	defer v.Release()
	typ := arrow.ListOf(arrow.PrimitiveTypes.Float32)
	valid := []byte{0b101} // row 1 null, spanning values 3 and 4
	offsets := arrow.Int32Traits.CastToBytes([]int32{0, 2, 4, 5})
	data := array.NewData(typ, 3, []*memory.Buffer{memory.NewBufferBytes(valid), memory.NewBufferBytes(offsets)}, []arrow.ArrayData{v.Data()}, 1, 0)
	col := array.MakeFromData(data)
	defer col.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: typ, Nullable: true}}, nil)
	rec := array.NewRecord(sc, []arrow.Array{col}, 3)
	defer rec.Release()
	props, err := ParquetOptions{}.writerProperties(sc)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sk, err := newColumnSink(&buf, sc, props)
	if err != nil {
		t.Fatal(err)
	}
	// Refused (by Write, or by Close when the row group encodes after
	// Write returns): fine.
	if err := sk.Write(rec); err != nil {
		return
	}
	if err := sk.Close(); err != nil {
		return
	}
	if got := pqarrowColumns(t, buf.Bytes())[0]; !array.Equal(got, col) {
		t.Fatalf("read back %v, wrote %v", got, col)
	}
}

// pqarrowColumns reads a Parquet file's columns whole with pqarrow.
func pqarrowColumns(t *testing.T, data []byte) []arrow.Array {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(t.Context())
	if err != nil {
		t.Fatalf("the written store does not read back: %v", err)
	}
	defer tbl.Release()
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		if cols[i], err = array.Concatenate(tbl.Column(i).Data().Chunks(), memory.DefaultAllocator); err != nil {
			t.Fatal(err)
		}
	}
	return cols
}

// TestChunkPages: a page reader handed on from one column chunk to the next
// (pageReaders) gives each chunk's pages as the row group's own reader
// does, over chunks of every shape, dictionary-encoded or not, in pages of
// a few rows or of many.
func TestChunkPages(t *testing.T) {
	rec := leaftest.Record(600, true, 11)
	for _, pageSize := range []int64{64, 1 << 20} {
		t.Run(fmt.Sprintf("page=%d", pageSize), func(t *testing.T) {
			var buf bytes.Buffer
			props := parquet.NewWriterProperties(parquet.WithDataPageSize(pageSize), parquet.WithCompression(compress.Codecs.Zstd),
				parquet.WithMaxRowGroupLength(250))
			w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.DefaultWriterProps())
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			src := bytes.NewReader(buf.Bytes())
			pf, err := file.NewParquetReader(src)
			if err != nil {
				t.Fatal(err)
			}
			pages := func(pr file.PageReader) [][]byte {
				var out [][]byte
				for pr.Next() {
					out = append(out, bytes.Clone(pr.Page().Data()))
				}
				if pr.Err() != nil {
					t.Fatal(pr.Err())
				}
				return out
			}
			for rg := pf.NumRowGroups() - 1; rg >= 0; rg-- {
				for leaf := pf.MetaData().Schema.NumColumns() - 1; leaf >= 0; leaf-- {
					pr, err := chunkPages(pf, src, rg, leaf)
					if err != nil {
						t.Fatal(err)
					}
					got := pages(pr)
					pageReaders.Put(pr)
					ref, err := pf.RowGroup(rg).GetColumnPageReader(leaf)
					if err != nil {
						t.Fatal(err)
					}
					want := pages(ref)
					if len(got) != len(want) {
						t.Fatalf("row group %d, leaf %d: %d pages, want %d", rg, leaf, len(got), len(want))
					}
					for k := range got {
						if !bytes.Equal(got[k], want[k]) {
							t.Fatalf("row group %d, leaf %d, page %d differs", rg, leaf, k)
						}
					}
				}
			}
		})
	}
}
