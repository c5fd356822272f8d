package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
)

// leafRecord builds a record with every shape the leaf codec takes: flat
// and list columns of each value type, with null lists, empty lists, null
// elements and null flat values when holes is set.
func leafRecord(rows int, holes bool, seed uint64) arrow.Record {
	rng := rand.New(rand.NewPCG(seed, 1))
	mem := memory.DefaultAllocator
	fields := []arrow.Field{
		{Name: "f32", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "f64", Type: arrow.ListOf(arrow.PrimitiveTypes.Float64), Nullable: true},
		{Name: "i32", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "i64", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: false},
		{Name: "b", Type: arrow.ListOf(arrow.FixedWidthTypes.Boolean), Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "r", Type: arrow.PrimitiveTypes.Float64, Nullable: false},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}
	bld := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer bld.Release()
	hole := func(p float64) bool { return holes && rng.Float64() < p }
	for i := 0; i < rows; i++ {
		n := rng.IntN(40)
		for c := 0; c < 5; c++ {
			lb := bld.Field(c).(*array.ListBuilder)
			if c != 3 && hole(0.05) {
				lb.AppendNull()
				continue
			}
			m := n
			if hole(0.05) {
				m = 0
			}
			lb.Append(true)
			for j := 0; j < m; j++ {
				vb := lb.ValueBuilder()
				if c != 3 && hole(0.02) {
					vb.AppendNull()
					continue
				}
				switch vb := vb.(type) {
				case *array.Float32Builder:
					vb.Append(rng.Float32() - 0.5)
				case *array.Float64Builder:
					vb.Append(rng.NormFloat64())
				case *array.Int32Builder:
					vb.Append(int32(rng.IntN(50))) // repeats: dictionary pages
				case *array.Int64Builder:
					vb.Append(rng.Int64())
				case *array.BooleanBuilder:
					vb.Append(rng.IntN(3) > 0)
				}
			}
		}
		if hole(0.1) {
			bld.Field(5).AppendNull()
		} else {
			bld.Field(5).(*array.Int64Builder).Append(int64(i / 8))
		}
		bld.Field(6).(*array.Float64Builder).Append(rng.Float64())
		if hole(0.1) {
			bld.Field(7).AppendNull()
		} else {
			bld.Field(7).(*array.BooleanBuilder).Append(rng.IntN(2) == 0)
		}
	}
	return bld.NewRecord()
}

// TestLeafDecoder: every leaf the codec takes, written by pqarrow with page
// v1 and v2, with and without dictionaries, small and large pages, reads the
// same through the leaf codec as through pqarrow, in any batch size.
func TestLeafDecoder(t *testing.T) {
	for _, holes := range []bool{false, true} {
		rec := leafRecord(600, holes, 3)
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
					checkLeafRead(t, buf.Bytes(), n)
				}
			})
		}
	}
}

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
		fast, err := fieldReaders(pf, fr, plans, rg)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := fieldReaders(pf, fr, slow, rg)
		if err != nil {
			t.Fatal(err)
		}
		for left := pf.MetaData().RowGroup(rg).NumRows(); left > 0; left -= min(n, left) {
			for i := range plans {
				got, err := fast[i].read(n)
				if err != nil {
					t.Fatalf("row group %d, %s: %v", rg, sc.Field(i).Name, err)
				}
				want, err := ref[i].read(n)
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
		rec := leafRecord(600, holes, 5)
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
	if err := sk.Write(rec); err != nil {
		return // refused: fine
	}
	if err := sk.Close(); err != nil {
		t.Fatal(err)
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
