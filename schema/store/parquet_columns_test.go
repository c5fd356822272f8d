package store

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
)

// awkward builds a record of every flat shape with nulls where they are
// allowed: nullable and required scalars, lists with null, empty and full
// rows, null elements, and required lists of required elements.
func awkward(t *testing.T, rows int) arrow.Record {
	t.Helper()
	s := arrow.NewSchema([]arrow.Field{
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "req_i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "lf32", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "lbool", Type: arrow.ListOf(arrow.FixedWidthTypes.Boolean), Nullable: true},
		{Name: "lstr", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "req_list", Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int32)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for r := 0; r < rows; r++ {
		null := r%7 == 3
		appendOr(b.Field(0), null, func() { b.Field(0).(*array.Int64Builder).Append(int64(r) * 1000003) })
		b.Field(1).(*array.Int32Builder).Append(int32(r))
		appendOr(b.Field(2), null, func() { b.Field(2).(*array.StringBuilder).Append(strings.Repeat("x", r%5)) })
		appendOr(b.Field(3), null, func() { b.Field(3).(*array.BooleanBuilder).Append(r%2 == 0) })
		appendOr(b.Field(4), r%5 == 1, func() { b.Field(4).(*array.Float64Builder).Append(float64(r) / 3) })
		for c := 5; c <= 8; c++ {
			lb := b.Field(c).(*array.ListBuilder)
			if c < 8 && null {
				lb.AppendNull()
				continue
			}
			lb.Append(true)
			for j := 0; j < (r*(c+1))%6; j++ { // some rows empty
				v := lb.ValueBuilder()
				if c < 8 && (r+j)%4 == 0 {
					v.AppendNull()
					continue
				}
				switch v := v.(type) {
				case *array.Float32Builder:
					v.Append(float32(r) - float32(j)/7)
				case *array.BooleanBuilder:
					v.Append(j%3 == 0)
				case *array.StringBuilder:
					v.Append(strings.Repeat("y", j))
				case *array.Int32Builder:
					v.Append(int32(r*10 + j))
				}
			}
		}
	}
	return b.NewRecord()
}

func appendOr(b array.Builder, null bool, value func()) {
	if null {
		b.AppendNull()
	} else {
		value()
	}
}

// writeWith writes recs with the sink made by mk and returns the file.
func writeWith(t *testing.T, mk func(io.Writer) (sink, error), recs ...arrow.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	sk, err := mk(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := sk.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := sk.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readBack reads a Parquet file with pqarrow's own reader, as one table
// rendered row by row, plus its Arrow schema and row group count.
func readBack(t *testing.T, data []byte) (string, *arrow.Schema, int) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, -1)
	defer tr.Release()
	var sb strings.Builder
	for tr.Next() {
		rec := tr.Record()
		for i := 0; i < int(rec.NumRows()); i++ {
			for c := 0; c < int(rec.NumCols()); c++ {
				sb.WriteString(rec.Column(c).ValueStr(i) + ";")
			}
			sb.WriteByte('\n')
		}
	}
	return sb.String(), tbl.Schema(), pf.NumRowGroups()
}

// TestColumnSinkMatchesPQArrow: the concurrent writer's files read back the
// same as pqarrow's FileWriter's, for every flat shape, for sliced batches
// (non-zero array offsets), empty batches and row groups split by
// RowGroupRows; and the same input gives the same bytes every time.
func TestColumnSinkMatchesPQArrow(t *testing.T) {
	rec := awkward(t, 300)
	defer rec.Release()
	sliced := []arrow.Record{rec.NewSlice(0, 0), rec.NewSlice(0, 117), rec.NewSlice(117, 300)}
	defer func() {
		for _, r := range sliced {
			r.Release()
		}
	}()
	for _, tc := range []struct {
		name string
		opts ParquetOptions
		recs []arrow.Record
	}{
		{"one batch", ParquetOptions{}, []arrow.Record{rec}},
		{"sliced batches", ParquetOptions{Codec: "snappy"}, sliced},
		{"row groups of 50", ParquetOptions{Codec: "none", RowGroupRows: 50}, sliced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props, err := tc.opts.writerProperties(rec.Schema())
			if err != nil {
				t.Fatal(err)
			}
			ours := func(w io.Writer) (sink, error) { return newColumnSink(w, rec.Schema(), props) }
			theirs := func(w io.Writer) (sink, error) { return newPQArrowSink(w, rec.Schema(), props) }
			got := writeWith(t, ours, tc.recs...)
			want := writeWith(t, theirs, tc.recs...)
			gotRows, gotSchema, gotGroups := readBack(t, got)
			wantRows, wantSchema, wantGroups := readBack(t, want)
			if !gotSchema.Equal(wantSchema) {
				t.Errorf("schema read back:\n%v\nwant\n%v", gotSchema, wantSchema)
			}
			if gotRows != wantRows {
				t.Errorf("rows read back differ from pqarrow's file:\n%.2000s\nwant\n%.2000s", gotRows, wantRows)
			}
			if gotGroups != wantGroups {
				t.Errorf("%d row groups, pqarrow wrote %d", gotGroups, wantGroups)
			}
			if again := writeWith(t, ours, tc.recs...); !bytes.Equal(again, got) {
				t.Error("the same batches gave different bytes")
			}
			// A repeated root (arrow-go's default) makes strict readers
			// see one more level of nesting in every column.
			for name, data := range map[string][]byte{"ours": got, "pqarrow": want} {
				pf, err := file.NewParquetReader(bytes.NewReader(data))
				if err != nil {
					t.Fatal(err)
				}
				if rep := pf.MetaData().Schema.Root().RepetitionType(); rep != parquet.Repetitions.Required {
					t.Errorf("%s: root repetition %v, want required", name, rep)
				}
			}
		})
	}
}
