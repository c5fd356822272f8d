package schema

import (
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// TestFiniteUnderMask: a NaN or +Inf log-prob is an error naming its row
// and token where the mask trains on it (or there is no mask), and passes
// under a 0 mask; -Inf passes. Rows are read through a slice of the
// record, so the list values start past the buffer's start.
func TestFiniteUnderMask(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	sc := arrow.NewSchema([]arrow.Field{
		{Name: Logprobs, Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
		{Name: ActionMask, Type: arrow.ListOf(arrow.FixedWidthTypes.Boolean)},
	}, nil)
	for _, tc := range []struct {
		lp   []float32
		mask []bool // nil: no action_mask column
		want string
	}{
		{[]float32{-1, nan, -2}, []bool{true, true, true}, `row 7: column "logprobs": log-prob NaN at token 1`},
		{[]float32{-1, -2, inf}, []bool{true, false, true}, `row 7: column "logprobs": log-prob +Inf at token 2`},
		{[]float32{-1, nan, inf}, []bool{true, false, false}, ""},
		{[]float32{float32(math.Inf(-1)), -3, -1}, []bool{true, true, true}, ""},
		{[]float32{-1, -2, nan}, nil, `row 7: column "logprobs": log-prob NaN at token 2`},
	} {
		fields := sc.Fields()
		if tc.mask == nil {
			fields = fields[:1]
		}
		bld := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
		lb := bld.Field(0).(*array.ListBuilder)
		lv := lb.ValueBuilder().(*array.Float32Builder)
		for row := 0; row < 2; row++ { // row 0 pads the buffers; row 1 is the case
			lb.Append(true)
			if row == 0 {
				lv.AppendValues([]float32{-5, -6, -7, -8, -9}, nil)
			} else {
				lv.AppendValues(tc.lp, nil)
			}
			if tc.mask != nil {
				mb := bld.Field(1).(*array.ListBuilder)
				mb.Append(true)
				if row == 0 {
					mb.ValueBuilder().(*array.BooleanBuilder).AppendValues([]bool{true, true, true, true, true}, nil)
				} else {
					mb.ValueBuilder().(*array.BooleanBuilder).AppendValues(tc.mask, nil)
				}
			}
		}
		rec := bld.NewRecord()
		bld.Release()
		one := rec.NewSlice(1, 2)
		err := Validate("f.parquet", 7, one, ValidateOptions{AllowInvalidReward: true})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v under %v: error %v, want %q", tc.lp, tc.mask, err, tc.want)
		}
		one.Release()
		rec.Release()
	}
}
