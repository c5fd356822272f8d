package store_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/float16"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

// foreign rebuilds canonical array a as type to, element by element.
func foreign(t *testing.T, a arrow.Array, to arrow.DataType) arrow.Array {
	b := array.NewBuilder(memory.DefaultAllocator, to)
	defer b.Release()
	for i := 0; i < a.Len(); i++ {
		appendForeign(t, b, a, i)
	}
	return b.NewArray()
}

func appendForeign(t *testing.T, b array.Builder, a arrow.Array, i int) {
	if a.IsNull(i) {
		b.AppendNull()
		return
	}
	var num float64
	switch a := a.(type) {
	case *array.Int32:
		num = float64(a.Value(i))
	case *array.Int64:
		num = float64(a.Value(i))
	case *array.Float32:
		num = float64(a.Value(i))
	case *array.Float64:
		num = a.Value(i)
	case *array.Boolean:
		if bb, ok := b.(*array.BooleanBuilder); ok {
			bb.Append(a.Value(i))
			return
		}
		num = map[bool]float64{true: 1}[a.Value(i)]
	case *array.String:
		switch bb := b.(type) {
		case *array.LargeStringBuilder:
			bb.Append(a.Value(i))
		case *array.StringViewBuilder:
			bb.Append(a.Value(i))
		case *array.BinaryDictionaryBuilder:
			bb.AppendString(a.Value(i))
		default:
			t.Fatalf("no string builder %T", b)
		}
		return
	case array.ListLike:
		lo, hi := a.ValueOffsets(i)
		vb := b.(interface {
			Append(bool)
			ValueBuilder() array.Builder
		})
		vb.Append(true)
		for k := lo; k < hi; k++ {
			appendForeign(t, vb.ValueBuilder(), a.ListValues(), int(k))
		}
		return
	default:
		t.Fatalf("no foreign form of %T", a)
	}
	switch bb := b.(type) {
	case *array.Int64Builder:
		bb.Append(int64(num))
	case *array.Uint8Builder:
		bb.Append(uint8(num))
	case *array.Uint32Builder:
		bb.Append(uint32(num))
	case *array.Uint64Builder:
		bb.Append(uint64(num))
	case *array.Int16Builder:
		bb.Append(int16(num))
	case *array.Float64Builder:
		bb.Append(num)
	case *array.Float16Builder:
		bb.Append(float16.New(float32(num)))
	default:
		t.Fatalf("no builder %T", b)
	}
}

// writeForeign writes the rows of in as an IPC file with the columns' types
// replaced as types says (a column named in eid goes into a struct "eid").
func writeForeign(t *testing.T, in, out string, types map[string]arrow.DataType, eid []string) {
	t.Helper()
	r, err := store.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var w *ipc.FileWriter
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		var fields []arrow.Field
		var cols []arrow.Array
		var eidFields []arrow.Field
		var eidCols []arrow.Array
		for c, f := range rec.Schema().Fields() {
			col := rec.Column(c)
			if to, ok := types[f.Name]; ok {
				col = foreign(t, col, to)
				f.Type = to
			}
			if strings.Contains(strings.Join(eid, ","), f.Name) {
				eidFields, eidCols = append(eidFields, f), append(eidCols, col)
				continue
			}
			fields, cols = append(fields, f), append(cols, col)
		}
		if len(eid) > 0 {
			names := make([]string, len(eidFields))
			for i, f := range eidFields {
				names[i] = f.Name
			}
			st, err := array.NewStructArray(eidCols, names)
			if err != nil {
				t.Fatal(err)
			}
			fields, cols = append([]arrow.Field{{Name: "eid", Type: st.DataType()}}, fields...), append([]arrow.Array{st}, cols...)
		}
		sc := arrow.NewSchema(fields, nil)
		if w == nil {
			if w, err = ipc.NewFileWriter(mustCreate(t, out), ipc.WithSchema(sc)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Write(array.NewRecord(sc, cols, rec.NumRows())); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestForeignTypesReadAsCanonical: a store whose columns have the types
// other writers use reads exactly as the canonical store, with canonical
// types.
func TestForeignTypesReadAsCanonical(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.parquet")
	genStore(t, base, 40)
	want, wantSchema := readAll(t, base)
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	for _, tc := range []struct {
		name  string
		types map[string]arrow.DataType
		eid   []string
	}{
		{"polars large lists and views", map[string]arrow.DataType{
			schema.Tokens:     arrow.LargeListOf(arrow.PrimitiveTypes.Int64),
			schema.Logprobs:   arrow.LargeListOf(arrow.PrimitiveTypes.Float64),
			schema.ActionMask: arrow.LargeListOf(arrow.FixedWidthTypes.Boolean),
			schema.Suffix:     arrow.BinaryTypes.StringView,
			schema.Run:        arrow.PrimitiveTypes.Int64,
			schema.Step:       arrow.PrimitiveTypes.Int64,
		}, nil},
		{"numpy widths and categoricals", map[string]arrow.DataType{
			schema.Batch:          arrow.PrimitiveTypes.Uint32,
			schema.Task:           arrow.PrimitiveTypes.Uint64,
			schema.Run:            arrow.PrimitiveTypes.Uint8,
			schema.PromptLength:   arrow.PrimitiveTypes.Int16,
			schema.Reward:         arrow.FixedWidthTypes.Float16, // 0/1 rewards: exact
			schema.Suffix:         dict,
			schema.TruncateStatus: arrow.BinaryTypes.LargeString,
			schema.ActionMask:     arrow.ListOf(arrow.PrimitiveTypes.Uint8),
		}, nil},
		{"eid struct", map[string]arrow.DataType{schema.Run: arrow.PrimitiveTypes.Int64},
			[]string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "foreign.arrow")
			writeForeign(t, base, path, tc.types, tc.eid)
			got, gotSchema := readAll(t, path)
			if !store.SameColumns(gotSchema, wantSchema) {
				t.Fatalf("schema\n%v\nwant\n%v", gotSchema, wantSchema)
			}
			if got != want {
				t.Fatal("values differ from the canonical store's")
			}
		})
	}
}

// TestLossyValuesFail: a value that has no lossless canonical form stops the
// read naming file, row and column.
func TestLossyValuesFail(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, col string
		typ       arrow.DataType
		vals      any
		want      string
	}{
		{"token past int32", schema.Tokens, arrow.ListOf(arrow.PrimitiveTypes.Int64), [][]int64{{1}, {2, 1 << 40}}, "row 1: column \"tokens\": item 1: 1099511627776 is outside int32's range"},
		{"run past int32", schema.Run, arrow.PrimitiveTypes.Int64, []int64{0, 1 << 33}, "row 1: column \"run\""},
		{"task past int64", schema.Task, arrow.PrimitiveTypes.Uint64, []uint64{0, math.MaxUint64}, "row 1: column \"task\": 18446744073709551615 is outside int64's range"},
		{"fractional float batch", schema.Batch, arrow.PrimitiveTypes.Float64, []float64{0, 2.5}, "row 1: column \"batch\": 2.5 is not an integer"},
		{"NaN float run", schema.Run, arrow.PrimitiveTypes.Float64, []float64{math.NaN()}, "row 0: column \"run\": NaN is not an integer"},
		{"float task past 2^53", schema.Task, arrow.PrimitiveTypes.Float64, []float64{1, 1e300}, "row 1: column \"task\": 1e+300 is outside int64's range"},
		{"float task rounded past 2^53", schema.Task, arrow.PrimitiveTypes.Float64, []float64{1, 1 << 60}, "row 1: column \"task\": 1.152921504606847e+18 is an integer past 2^53 in a float column"},
		{"log-prob past float32", schema.Logprobs, arrow.ListOf(arrow.PrimitiveTypes.Float64), [][]float64{{-1e300}}, "row 0: column \"logprobs\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := array.NewBuilder(memory.DefaultAllocator, tc.typ)
			switch v := tc.vals.(type) {
			case [][]int64:
				for _, l := range v {
					b.(*array.ListBuilder).Append(true)
					for _, x := range l {
						b.(*array.ListBuilder).ValueBuilder().(*array.Int64Builder).Append(x)
					}
				}
			case [][]float64:
				for _, l := range v {
					b.(*array.ListBuilder).Append(true)
					for _, x := range l {
						b.(*array.ListBuilder).ValueBuilder().(*array.Float64Builder).Append(x)
					}
				}
			case []int64:
				b.(*array.Int64Builder).AppendValues(v, nil)
			case []uint64:
				b.(*array.Uint64Builder).AppendValues(v, nil)
			case []float64:
				b.(*array.Float64Builder).AppendValues(v, nil)
			}
			col := b.NewArray()
			sc := arrow.NewSchema([]arrow.Field{{Name: tc.col, Type: tc.typ, Nullable: true}}, nil)
			path := filepath.Join(dir, "lossy.arrow")
			w, err := ipc.NewFileWriter(mustCreate(t, path), ipc.WithSchema(sc))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(array.NewRecord(sc, []arrow.Array{col}, int64(col.Len()))); err != nil {
				t.Fatal(err)
			}
			w.Close()
			err = drain(path)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s: %s", path, tc.want)) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func mustCreate(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestIntegralFloatIDs: ids a writer stored as float64 (polars, pandas after
// a null) read as the canonical integers, exactly.
func TestIntegralFloatIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.arrow")
	b := array.NewFloat64Builder(memory.DefaultAllocator)
	b.AppendValues([]float64{0, 3, -7, 1 << 53}, nil)
	col := b.NewArray()
	sc := arrow.NewSchema([]arrow.Field{{Name: schema.Batch, Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	w, err := ipc.NewFileWriter(mustCreate(t, path), ipc.WithSchema(sc))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(array.NewRecord(sc, []arrow.Array{col}, int64(col.Len()))); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	got, ok := rec.Column(0).(*array.Int64)
	if !ok {
		t.Fatalf("batch read as %s, want int64", rec.Column(0).DataType())
	}
	if want := []int64{0, 3, -7, 1 << 53}; fmt.Sprint(got.Int64Values()) != fmt.Sprint(want) {
		t.Errorf("batch = %v, want %v", got.Int64Values(), want)
	}
}
