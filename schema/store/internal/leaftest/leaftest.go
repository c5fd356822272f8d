// Package leaftest builds the records the leaf codec's tests write and read
// back (schema/store and schema/store/leafcodec): every shape the codec
// takes.
package leaftest

import (
	"math/rand/v2"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// Record builds a record with every shape the leaf codec takes: flat
// and list columns of each value type, with null lists, empty lists, null
// elements and null flat values when holes is set.
func Record(rows int, holes bool, seed uint64) arrow.Record {
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
