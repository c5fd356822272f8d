package leafcodec

import (
	"bytes"
	"fmt"
	"runtime"
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

// TestDecoder: every leaf the codec takes, written by pqarrow with page
// v1 and v2, with and without dictionaries, small and large pages, reads the
// same through the Decoder as through pqarrow, in any batch size.
func TestDecoder(t *testing.T) {
	for _, holes := range []bool{false, true} {
		rec := leaftest.Record(600, holes, 3)
		for _, tc := range []struct {
			name  string
			props []parquet.WriterProperty
		}{
			{"v1 plain", []parquet.WriterProperty{parquet.WithDictionaryDefault(false)}},
			{"v1 dict small pages", []parquet.WriterProperty{parquet.WithDataPageSize(100)}},
			{"v2 plain small pages", []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(64)}},
			{"v2 dict", []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithVersion(parquet.V2_LATEST)}},
			{"zstd row groups", []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(250)}},
		} {
			t.Run(fmt.Sprintf("%s holes=%v", tc.name, holes), func(t *testing.T) {
				var buf bytes.Buffer
				props := parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithRootRepetition(parquet.Repetitions.Required)}, tc.props...)...)
				w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Write(rec); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				for _, n := range []int64{7, 1000} {
					checkDecoder(t, buf.Bytes(), n)
				}
			})
		}
	}
}

// checkDecoder reads every column of every row group in batches of n with
// the Decoder and whole with pqarrow, and compares them: no batch holds more
// than n rows, and the batches together are pqarrow's column.
func checkDecoder(t *testing.T, data []byte, n int64) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		rgm := pf.MetaData().RowGroup(rg)
		for i, f := range sc.Fields() {
			s, ok := ShapeOf(pf.MetaData().Schema.Column(i), f.Type)
			if !ok {
				t.Fatalf("field %s: not taken by the leaf codec", f.Name)
			}
			cc, err := rgm.ColumnChunk(i)
			if err != nil {
				t.Fatal(err)
			}
			if !Decodes(cc.Encodings()) {
				t.Fatalf("row group %d, %s: encodings %v not decoded", rg, f.Name, cc.Encodings())
			}
			pr, err := pf.RowGroup(rg).GetColumnPageReader(i)
			if err != nil {
				t.Fatal(err)
			}
			d := NewDecoder(s, pr, rgm.NumRows(), cc.NumValues())
			var got []arrow.Array
			for left := rgm.NumRows(); left > 0; {
				a, err := d.Read(n)
				if err != nil {
					t.Fatalf("row group %d, %s: %v", rg, f.Name, err)
				}
				if a.Len() == 0 || int64(a.Len()) > min(n, left) {
					t.Fatalf("row group %d, %s: a batch of %d rows, asked for %d of %d left", rg, f.Name, a.Len(), n, left)
				}
				left -= int64(a.Len())
				got = append(got, a)
			}
			whole, err := array.Concatenate(got, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			col, err := fr.RowGroup(rg).Column(i).Read(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want, err := array.Concatenate(col.Chunks(), memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			if !arrow.TypeEqual(whole.DataType(), want.DataType()) || !array.Equal(whole, want) {
				t.Fatalf("row group %d, %s, batches of %d: leaf codec\n%v\npqarrow\n%v", rg, f.Name, n, whole, want)
			}
			pr, err = pf.RowGroup(rg).GetColumnPageReader(i)
			if err != nil {
				t.Fatal(err)
			}
			checkKept(t, NewDecoder(s, pr, rgm.NumRows(), cc.NumValues()), want, n)
			for _, a := range append(got, whole, want) {
				a.Release()
			}
			col.Release()
		}
	}
}

// checkKept reads a chunk in batches of n with ReadRows, keeping runs of
// rows of every length from 1 to 4 and dropping the others (the first and
// last rows of a batch among them), and compares the rows kept with those
// rows of want, the whole column.
func checkKept(t *testing.T, d *Decoder, want arrow.Array, n int64) {
	t.Helper()
	kept := func(row int64) bool { return row%9 != 0 && row%9 != 5 && row%13 != 3 }
	var got, exp []arrow.Array
	for lo := int64(0); lo < int64(want.Len()); lo += n {
		hi := min(lo+n, int64(want.Len()))
		keep := make([]bool, hi-lo)
		for i := range keep {
			if keep[i] = kept(lo + int64(i)); keep[i] {
				exp = append(exp, array.NewSlice(want, lo+int64(i), lo+int64(i)+1))
			}
		}
		a, err := d.ReadRows(hi-lo, keep)
		if err != nil {
			t.Fatalf("rows %d to %d: %v", lo, hi, err)
		}
		got = append(got, a)
	}
	gotAll, err := array.Concatenate(got, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	expAll, err := array.Concatenate(exp, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	if gotAll.Len() == 0 || gotAll.Len() == want.Len() || !array.Equal(gotAll, expAll) {
		t.Fatalf("batches of %d, the rows kept: leaf codec (%d rows)\n%v\nwant (%d rows)\n%v", n, gotAll.Len(), gotAll, expAll.Len(), expAll)
	}
	for _, a := range append(append(got, exp...), gotAll, expAll) {
		a.Release()
	}
}

// TestDecoderLongPage: a page of a million levels of a list of booleans,
// rows longer than a window of levels among shorter, empty and null ones,
// reads as pqarrow reads it, and decoding it allocates less than a byte per
// level: its levels are not held as a page-sized array.
func TestDecoderLongPage(t *testing.T) {
	mem := memory.DefaultAllocator
	sc := arrow.NewSchema([]arrow.Field{{Name: "mask", Type: arrow.ListOfNonNullable(arrow.FixedWidthTypes.Boolean), Nullable: true}}, nil)
	bld := array.NewRecordBuilder(mem, sc)
	defer bld.Release()
	lb := bld.Field(0).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.BooleanBuilder)
	levels := 0
	for r := 0; levels < 1<<20; r++ {
		if r%17 == 5 {
			lb.AppendNull()
			levels++
			continue
		}
		n := []int{0, 1, 190, 9000, 4095, 4097, 33}[r%7]
		lb.Append(true)
		for j := 0; j < n; j++ {
			vb.Append(j < n/2 || j%3 == 0)
		}
		levels += max(n, 1)
	}
	rec := bld.NewRecord()
	defer rec.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(64<<20), parquet.WithRootRepetition(parquet.Repetitions.Required))
	w, err := pqarrow.NewFileWriter(sc, &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkDecoder(t, buf.Bytes(), 1000)

	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ShapeOf(pf.MetaData().Schema.Column(0), sc.Field(0).Type)
	rgm := pf.MetaData().RowGroup(0)
	cc, err := rgm.ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := pf.RowGroup(0).GetColumnPageReader(0)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC() // no buffers of an earlier decoder left to reuse
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := NewDecoder(s, pr, rgm.NumRows(), cc.NumValues())
	var rows int64
	for rows < rgm.NumRows() {
		a, err := d.Read(rgm.NumRows())
		if err != nil {
			t.Fatal(err)
		}
		rows += int64(a.Len())
		a.Release()
	}
	d.Close()
	runtime.ReadMemStats(&after)
	// The page itself (levels RLE, values a bit each) and the array read
	// (offsets, a bit per value) are a few hundred KiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc >= uint64(levels) {
		t.Fatalf("decoding %d levels allocated %d bytes", levels, alloc)
	}
}
