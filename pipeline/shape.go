package pipeline

import (
	"fmt"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
)

// shaper turns input batches into output batches: every input column passes
// through unchanged, except advantages, returns and duplicate_of, which are
// computed (replaced in place when the input has them, appended otherwise),
// and, on duplicated rows, suffix (fresh) and task (+ the plan's task offset).
type shaper struct {
	out *arrow.Schema
	// src[i] is the input column of output column i, -1 for a computed one.
	src               []int
	adv, ret, dupOf   int // output columns (dupOf -1: not written)
	mask, suffix, tid int // input columns (suffix -1: absent)
	mem               memory.Allocator
}

// newShaper plans the output schema of input schema in. With withAdv the
// advantages go where a pipeline-side fn puts them: score × action_mask, so
// action_mask is required (the caller checks it); without (a filter), the
// input's advantages and returns pass through. duplicate_of is written when
// withDup.
func newShaper(in *arrow.Schema, withAdv, withDup bool) *shaper {
	s := &shaper{adv: -1, ret: -1, dupOf: -1, mask: -1, suffix: -1, tid: -1, mem: memory.DefaultAllocator}
	fields := make([]arrow.Field, 0, in.NumFields()+3)
	for i, f := range in.Fields() {
		switch f.Name {
		case schema.Advantages:
			if !withAdv {
				break
			}
			s.adv = len(fields)
			f = schema.Field(f.Name)
			i = -1
		case schema.Returns:
			if !withAdv {
				break
			}
			s.ret = len(fields)
			f = schema.Field(f.Name)
			i = -1
		case schema.DuplicateOf:
			if !withDup { // a stale column of an earlier run: our rows are originals
				continue
			}
			s.dupOf = len(fields)
			f = schema.Field(f.Name)
			i = -1
		case schema.ActionMask:
			s.mask = i
		case schema.Suffix:
			s.suffix = i
		case schema.Task:
			s.tid = i
		}
		fields = append(fields, f)
		s.src = append(s.src, i)
	}
	add := func(name string) int {
		fields = append(fields, schema.Field(name))
		s.src = append(s.src, -1)
		return len(fields) - 1
	}
	if withAdv && s.adv < 0 {
		s.adv = add(schema.Advantages)
	}
	if withAdv && s.ret < 0 {
		s.ret = add(schema.Returns)
	}
	if withDup && s.dupOf < 0 {
		s.dupOf = add(schema.DuplicateOf)
	}
	md := in.Metadata()
	s.out = arrow.NewSchema(fields, &md)
	return s
}

// copies describes the duplicated rows of an output batch: for output row i,
// the store row it copies, its fresh suffix and its task offset.
type copies struct {
	of     []int64
	suffix []string
	offset []int64
}

// shape returns the output batch for rec, whose rows are exactly the rows to
// write: row i gets advantages = returns = score[i] × action_mask. cp is nil
// for original rows.
func (s *shaper) shape(rec arrow.Record, score []float32, cp *copies) (arrow.Record, error) {
	n := int(rec.NumRows())
	var adv arrow.Array
	if s.adv >= 0 {
		var err error
		if adv, err = broadcast(rec.Column(s.mask), score); err != nil {
			return nil, err
		}
		defer adv.Release()
	}
	var dup arrow.Array
	if s.dupOf >= 0 {
		if cp == nil {
			dup = array.MakeArrayOfNull(s.mem, arrow.PrimitiveTypes.Int64, n)
		} else {
			b := array.NewInt64Builder(s.mem)
			b.AppendValues(cp.of, nil)
			dup = b.NewArray()
			b.Release()
		}
		defer dup.Release()
	}
	cols := make([]arrow.Array, len(s.src))
	for i, j := range s.src {
		switch {
		case j < 0 && (i == s.adv || i == s.ret):
			cols[i] = adv // returns is a copy of advantages: the same values
		case j < 0 && i == s.dupOf:
			cols[i] = dup
		case cp != nil && j == s.suffix:
			a := suffixArray(s.mem, rec.Column(j).DataType(), cp.suffix)
			defer a.Release()
			cols[i] = a
		case cp != nil && j == s.tid && hasOffset(cp.offset):
			a, err := addTaskOffset(s.mem, rec.Column(j), cp.offset)
			if err != nil {
				return nil, err
			}
			defer a.Release()
			cols[i] = a
		default:
			cols[i] = rec.Column(j)
		}
	}
	return array.NewRecord(s.out, cols, int64(n)), nil
}

// broadcast returns list<float32> rows score[i] × mask row i (Broadcast of
// the advantage stage, built straight into Arrow buffers); a null mask row
// gives a null row.
func broadcast(maskCol arrow.Array, score []float32) (arrow.Array, error) {
	mask, ok := maskCol.(array.ListLike)
	if !ok {
		return nil, fmt.Errorf("column %s: want a list, have %s", schema.ActionMask, maskCol.DataType())
	}
	bits, ok := mask.ListValues().(*array.Boolean)
	if !ok {
		return nil, fmt.Errorf("column %s: want list<bool>, have %s", schema.ActionMask, maskCol.DataType())
	}
	n := mask.Len()
	offsets := make([]int32, n+1)
	for i := 0; i < n; i++ {
		lo, hi := mask.ValueOffsets(i)
		if mask.IsNull(i) {
			hi = lo
		}
		offsets[i+1] = offsets[i] + int32(hi-lo)
	}
	vals := make([]float32, offsets[n])
	for i := 0; i < n; i++ {
		lo, _ := mask.ValueOffsets(i)
		dst := vals[offsets[i]:offsets[i+1]]
		s := score[i]
		z := s * 0 // -0 for a negative score, as upstream's score × mask
		for k := range dst {
			if bits.Value(int(lo) + k) {
				dst[k] = s
			} else {
				dst[k] = z
			}
		}
	}
	var valid *memory.Buffer
	nulls := mask.NullN()
	if nulls > 0 {
		bm := make([]byte, bitutil.BytesForBits(int64(n)))
		for i := 0; i < n; i++ {
			if mask.IsValid(i) {
				bitutil.SetBit(bm, i)
			}
		}
		valid = memory.NewBufferBytes(bm)
	}
	child := array.NewData(arrow.PrimitiveTypes.Float32, len(vals),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Float32Traits.CastToBytes(vals))}, nil, 0, 0)
	defer child.Release()
	data := array.NewData(schema.Field(schema.Advantages).Type, n,
		[]*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))},
		[]arrow.ArrayData{child}, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// suffixArray returns the suffixes as a column of type t (string or large string).
func suffixArray(mem memory.Allocator, t arrow.DataType, vals []string) arrow.Array {
	b := array.NewBuilder(mem, t)
	defer b.Release()
	app := b.(interface{ Append(string) })
	for _, v := range vals {
		app.Append(v)
	}
	return b.NewArray()
}

func hasOffset(off []int64) bool {
	for _, o := range off {
		if o != 0 {
			return true
		}
	}
	return false
}

// addTaskOffset returns the integer task column a with off[i] added to row i
// (the old duplicate_informative strategy gives its copies new task ids).
func addTaskOffset(mem memory.Allocator, a arrow.Array, off []int64) (arrow.Array, error) {
	b := array.NewBuilder(mem, a.DataType())
	defer b.Release()
	switch t := a.(type) {
	case *array.Int64:
		for i := 0; i < t.Len(); i++ {
			b.(*array.Int64Builder).Append(t.Value(i) + off[i])
		}
	case *array.Int32:
		for i := 0; i < t.Len(); i++ {
			b.(*array.Int32Builder).Append(t.Value(i) + int32(off[i]))
		}
	default:
		return nil, schema.BadInputf("column %s: duplicated groups get new task ids, which needs integer task ids, not %s", schema.Task, a.DataType())
	}
	return b.NewArray(), nil
}
