package store

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// Stores written by other tools use types that hold the same values as the
// canonical ones of package schema: polars writes large lists and string
// views, pandas and polars categoricals are dictionaries, numpy gives int64
// tokens and float64 log-probs, Trinity-shaped exporters nest the ids in an
// `eid` struct. Every source is read through normalise, so every consumer of
// a Reader sees the canonical types and nothing else:
//
//   - large_list, fixed_size_list → list; large_utf8, string_view and
//     dictionary-encoded strings → utf8 (dictionaries of other types → their
//     values); binary kinds likewise → binary. In unknown columns too.
//   - a known integer column of any integer type (signed or unsigned), or
//     of a float type holding integral values → its canonical width, when
//     the value fits (a fractional value is an error) (run, step, prompt_length,
//     tokens: int32; batch, task, model_version: int64);
//   - float16, float32 and float64 → the canonical float width. float64
//     log-probs and advantages are rounded to float32, as upstream keeps them
//     in float32 tensors; a finite value beyond float32's range is an error.
//   - integers in a float column when exact (|v| ≤ 2^53), 0/1 integers in a
//     bool column;
//   - a struct column `eid` → its fields as top-level columns.
//
// A value that does not cast losslessly stops the read with one line naming
// the file, the row and the column. A type with no cast is left as is, and
// schema.CheckKnown reports it.

// normSource casts the batches of a source to the canonical types.
type normSource struct {
	source
	path string
	sc   *arrow.Schema
	plan []colPlan
	mem  memory.Allocator
	row  int64 // file row of the next batch's first row
	cur  arrow.Record
}

// colPlan says where output column comes from and what type it gets.
type colPlan struct {
	src   int // column of the source record
	child int // field of the source's struct column (eid), or -1
	to    arrow.DataType
}

// normalise wraps s so that its batches have canonical types.
func normalise(path string, s source, mem memory.Allocator) source {
	var fields []arrow.Field
	var plan []colPlan
	ident := true
	in := s.Schema()
	add := func(f arrow.Field, src, child int) {
		to := canonicalType(schema.Role(in, f.Name), f.Type)
		ident = ident && child < 0 && arrow.TypeEqual(to, f.Type)
		fields = append(fields, arrow.Field{Name: f.Name, Type: to, Nullable: true, Metadata: f.Metadata})
		plan = append(plan, colPlan{src: src, child: child, to: to})
	}
	for i, f := range in.Fields() {
		if st, ok := f.Type.(*arrow.StructType); ok && f.Name == "eid" {
			for k, cf := range st.Fields() {
				add(cf, i, k)
			}
			continue
		}
		add(f, i, -1)
	}
	if ident {
		return s
	}
	return &normSource{source: s, path: path, sc: arrow.NewSchema(fields, trinity.StoreMeta(in.Metadata())), plan: plan, mem: mem}
}

func (n *normSource) Schema() *arrow.Schema { return n.sc }

// lastRest passes on the Rest of a deferred read.
func (n *normSource) lastRest() *Rest {
	if d, ok := n.source.(interface{ lastRest() *Rest }); ok {
		return d.lastRest()
	}
	return nil
}

func (n *normSource) Next() (arrow.Record, error) {
	if n.cur != nil {
		n.cur.Release()
		n.cur = nil
	}
	rec, err := n.source.Next()
	if err != nil {
		return nil, err
	}
	cols := make([]arrow.Array, len(n.plan))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, p := range n.plan {
		a := rec.Column(p.src)
		if p.child >= 0 {
			st := a.(*array.Struct)
			a = structField(st, p.child)
			defer a.Release()
		}
		c, row, err := castArray(a, p.to, n.mem)
		if err != nil {
			return nil, schema.Errorf(n.path, n.row+int64(row), n.sc.Field(i).Name, "%v", err)
		}
		cols[i] = c
	}
	n.cur = array.NewRecord(n.sc, cols, rec.NumRows())
	n.row += rec.NumRows()
	return n.cur, nil
}

// structField returns field k of a struct array, with the struct's nulls
// (a null eid makes every id null).
func structField(st *array.Struct, k int) arrow.Array {
	f := st.Field(k)
	if st.NullN() == 0 {
		f.Retain()
		return f
	}
	b := array.NewBuilder(memory.DefaultAllocator, f.DataType())
	defer b.Release()
	for i := 0; i < st.Len(); i++ {
		if st.IsNull(i) || f.IsNull(i) {
			b.AppendNull()
		} else if err := b.AppendValueFromString(f.ValueStr(i)); err != nil {
			b.AppendNull()
		}
	}
	return b.NewArray()
}

func (n *normSource) Close() error {
	if n.cur != nil {
		n.cur.Release()
		n.cur = nil
	}
	return n.source.Close()
}

// canonicalType returns the type a column named name of type t is read as.
func canonicalType(name string, t arrow.DataType) arrow.DataType {
	want, known := schema.Type(name)
	if !known {
		return plainType(t)
	}
	p := plainType(t)
	switch name {
	case schema.Batch, schema.Task:
		if p.ID() == arrow.STRING {
			return p
		}
	}
	if castable(p, want) {
		return want
	}
	return t
}

// plainType replaces the large, view, fixed-size and dictionary variants
// of a type by the plain one, recursively.
func plainType(t arrow.DataType) arrow.DataType {
	switch t := t.(type) {
	case *arrow.DictionaryType:
		return plainType(t.ValueType)
	case *arrow.LargeStringType, *arrow.StringViewType:
		return arrow.BinaryTypes.String
	case *arrow.LargeBinaryType, *arrow.BinaryViewType:
		return arrow.BinaryTypes.Binary
	case *arrow.ListType:
		return arrow.ListOfField(plainField(t.ElemField()))
	case *arrow.LargeListType:
		return arrow.ListOfField(plainField(t.ElemField()))
	case *arrow.FixedSizeListType:
		return arrow.ListOfField(plainField(t.ElemField()))
	}
	return t
}

func plainField(f arrow.Field) arrow.Field {
	f.Type = plainType(f.Type)
	return f
}

// castable reports whether castArray converts plain type from to to.
func castable(from, to arrow.DataType) bool {
	if arrow.TypeEqual(from, to) {
		return true
	}
	if lt, ok := to.(*arrow.ListType); ok {
		lf, ok := from.(*arrow.ListType)
		return ok && castable(lf.Elem(), lt.Elem())
	}
	switch to.ID() {
	case arrow.INT16:
		return isInt(from)
	case arrow.INT32, arrow.INT64:
		return isInt(from) || isFloat(from)
	case arrow.FLOAT32, arrow.FLOAT64:
		return isFloat(from) || isInt(from)
	case arrow.BOOL:
		return isInt(from)
	}
	return false
}

func isInt(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func isFloat(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return true
	}
	return false
}

// castArray converts a to type to (as planned by canonicalType). On a value
// that does not convert it returns the index of its row and the reason.
func castArray(a arrow.Array, to arrow.DataType, mem memory.Allocator) (arrow.Array, int, error) {
	if arrow.TypeEqual(a.DataType(), to) {
		a.Retain()
		return a, 0, nil
	}
	if lt, ok := to.(*arrow.ListType); ok {
		return castList(a, lt, mem)
	}
	b := array.NewBuilder(mem, to)
	defer b.Release()
	b.Reserve(a.Len())
	get, idx := a, func(i int) int { return i }
	if d, ok := a.(*array.Dictionary); ok {
		get, idx = d.Dictionary(), d.GetValueIndex
	}
	put, err := copier(b, get)
	if err != nil {
		return nil, 0, err
	}
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			b.AppendNull()
			continue
		}
		if err := put(idx(i)); err != nil {
			return nil, i, err
		}
	}
	return b.NewArray(), 0, nil
}

// castList converts any list-like array to a list of to's element type.
func castList(a arrow.Array, to *arrow.ListType, mem memory.Allocator) (arrow.Array, int, error) {
	l, ok := a.(array.ListLike)
	if !ok {
		return nil, 0, fmt.Errorf("want a list, have %s", a.DataType())
	}
	n := a.Len()
	var first, end int64
	if n > 0 {
		first, _ = l.ValueOffsets(0)
		_, end = l.ValueOffsets(n - 1)
	}
	if end-first > math.MaxInt32 {
		return nil, 0, errors.New("list values overflow 32-bit offsets; split the batch")
	}
	offsets := memory.NewResizableBuffer(mem)
	offsets.Resize(arrow.Int32Traits.BytesRequired(n + 1))
	off := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
	valid := memory.NewResizableBuffer(mem)
	valid.Resize(int(bitutil.BytesForBits(int64(n))))
	bits := valid.Bytes()
	prev := first
	for i := 0; i < n; i++ {
		lo, hi := l.ValueOffsets(i)
		if lo != prev || hi < lo {
			offsets.Release()
			valid.Release()
			return nil, i, errors.New("list values out of order (list views are not supported)")
		}
		prev = hi
		off[i] = int32(lo - first)
		bitutil.SetBitTo(bits, i, !l.IsNull(i))
	}
	off[n] = int32(end - first)
	child := array.NewSlice(l.ListValues(), first, end)
	defer child.Release()
	vals, k, err := castArray(child, to.Elem(), mem)
	if err != nil {
		offsets.Release()
		valid.Release()
		row := 0
		for row+1 < n && int64(off[row+1]) <= int64(k) {
			row++
		}
		return nil, row, fmt.Errorf("item %d: %w", int64(k)-int64(off[row]), err)
	}
	defer vals.Release()
	data := array.NewData(to, n, []*memory.Buffer{valid, offsets}, []arrow.ArrayData{vals.Data()}, a.NullN(), 0)
	offsets.Release()
	valid.Release()
	defer data.Release()
	return array.MakeFromData(data), 0, nil
}

// exactInt reads a float column as integers (polars and pandas write
// integer ids as float64 when a column had a null): a value is cast when it
// is integral and exact (|v| <= 2^53); a fractional, non-finite or larger
// one is not an integer (ok false).
func exactInt(asFloat func(i int) float64) func(i int) (int64, bool) {
	return func(i int) (int64, bool) {
		v := asFloat(i)
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, false
		}
		return int64(v), true
	}
}

// notInt says why element i of src is not an integer of type width: a
// fraction, a value outside width's range, or (in a float column) an
// integer past 2^53, which a float64 may hold rounded — DuckDB writes
// HUGEINT columns to Parquet as DOUBLE.
func notInt(src arrow.Array, i int, width string) error {
	if asFloat, ok := floatGetter(src); ok {
		switch v := asFloat(i); {
		case v != math.Trunc(v):
			return fmt.Errorf("%s is not an integer", src.ValueStr(i))
		case math.Abs(v) > 1<<53 && math.Abs(v) < 1<<63 && width == "int64":
			return fmt.Errorf("%s is an integer past 2^53 in a float column, which may have rounded it (DuckDB writes HUGEINT as DOUBLE: cast it to BIGINT)", src.ValueStr(i))
		}
	}
	return fmt.Errorf("%s is outside %s's range", src.ValueStr(i), width)
}

// copier returns a function that appends element i of src to b, converting
// it to b's type, or an error when the value does not convert losslessly.
func copier(b array.Builder, src arrow.Array) (func(i int) error, error) {
	asInt, isI := intGetter(src)
	asFloat, isF := floatGetter(src)
	switch bb := b.(type) {
	case *array.Int64Builder:
		if isF {
			asInt, isI = exactInt(asFloat), true
		}
		if isI {
			return func(i int) error {
				v, ok := asInt(i)
				if !ok {
					return notInt(src, i, "int64")
				}
				bb.Append(v)
				return nil
			}, nil
		}
	case *array.Int32Builder:
		if isF {
			asInt, isI = exactInt(asFloat), true
		}
		if isI {
			return func(i int) error {
				v, ok := asInt(i)
				if !ok || v < math.MinInt32 || v > math.MaxInt32 {
					return notInt(src, i, "int32")
				}
				bb.Append(int32(v))
				return nil
			}, nil
		}
	case *array.Int16Builder:
		if isI {
			return func(i int) error {
				v, ok := asInt(i)
				if !ok || v < math.MinInt16 || v > math.MaxInt16 {
					return notInt(src, i, "int16")
				}
				bb.Append(int16(v))
				return nil
			}, nil
		}
	case *array.Float64Builder:
		if isF {
			return func(i int) error { bb.Append(asFloat(i)); return nil }, nil
		}
		if isI {
			return func(i int) error {
				v, ok := asInt(i)
				if !ok || v > 1<<53 || v < -(1<<53) {
					return fmt.Errorf("integer %s has no exact float64", src.ValueStr(i))
				}
				bb.Append(float64(v))
				return nil
			}, nil
		}
	case *array.Float32Builder:
		if isF {
			return func(i int) error {
				v := asFloat(i)
				f := float32(v)
				if math.IsInf(float64(f), 0) && !math.IsInf(v, 0) {
					return fmt.Errorf("%v is beyond float32's range", v)
				}
				bb.Append(f)
				return nil
			}, nil
		}
		if isI {
			return func(i int) error {
				v, ok := asInt(i)
				if !ok || v > 1<<24 || v < -(1<<24) {
					return fmt.Errorf("integer %s has no exact float32", src.ValueStr(i))
				}
				bb.Append(float32(v))
				return nil
			}, nil
		}
	case *array.BooleanBuilder:
		if isI {
			return func(i int) error {
				v, ok := asInt(i)
				if !ok || (v != 0 && v != 1) {
					return fmt.Errorf("%s is not 0 or 1", src.ValueStr(i))
				}
				bb.Append(v == 1)
				return nil
			}, nil
		}
	case *array.StringBuilder:
		if get, ok := stringGetter(src); ok {
			return func(i int) error { bb.Append(get(i)); return nil }, nil
		}
	case *array.BinaryBuilder:
		if get, ok := bytesGetter(src); ok {
			return func(i int) error { bb.Append(get(i)); return nil }, nil
		}
	}
	return nil, fmt.Errorf("cannot convert %s to %s", src.DataType(), b.Type())
}

// intGetter reads integers of any width; ok is false for a uint64 past int64.
func intGetter(a arrow.Array) (func(i int) (int64, bool), bool) {
	switch a := a.(type) {
	case *array.Int8:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, true
	case *array.Int16:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, true
	case *array.Int32:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, true
	case *array.Int64:
		return func(i int) (int64, bool) { return a.Value(i), true }, true
	case *array.Uint8:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, true
	case *array.Uint16:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, true
	case *array.Uint32:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, true
	case *array.Uint64:
		return func(i int) (int64, bool) { v := a.Value(i); return int64(v), v <= math.MaxInt64 }, true
	}
	return nil, false
}

func floatGetter(a arrow.Array) (func(i int) float64, bool) {
	switch a := a.(type) {
	case *array.Float16:
		return func(i int) float64 { return float64(a.Value(i).Float32()) }, true
	case *array.Float32:
		return func(i int) float64 { return float64(a.Value(i)) }, true
	case *array.Float64:
		return a.Value, true
	}
	return nil, false
}

func stringGetter(a arrow.Array) (func(i int) string, bool) {
	switch a := a.(type) {
	case *array.String:
		return a.Value, true
	case *array.LargeString:
		return a.Value, true
	case *array.StringView:
		return a.Value, true
	}
	return nil, false
}

func bytesGetter(a arrow.Array) (func(i int) []byte, bool) {
	switch a := a.(type) {
	case *array.Binary:
		return a.Value, true
	case *array.LargeBinary:
		return a.Value, true
	case *array.BinaryView:
		return a.Value, true
	}
	return nil, false
}
