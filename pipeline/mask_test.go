package pipeline

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
)

// TestOperatorsZeroMaskBits: the operators' stage zeroes the masked rows of
// a list<bool> action_mask bit for bit, whatever the bits' offset (a sliced
// record, rows of every length), converting no token until a stage after
// asks: then Tokens gives the zeroed mask.
func TestOperatorsZeroMaskBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	sc := arrow.NewSchema([]arrow.Field{{Name: schema.ActionMask, Type: schema.Field(schema.ActionMask).Type, Nullable: true}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	lb := bld.Field(0).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.BooleanBuilder)
	var rows [][]bool
	for range 200 {
		lb.Append(true)
		row := make([]bool, rng.IntN(30))
		for k := range row {
			row[k] = rng.IntN(4) != 0
			vb.Append(row[k])
		}
		rows = append(rows, row)
	}
	rec := bld.NewRecord()
	defer rec.Release()
	for _, off := range []int64{0, 1, 3, 8, 13} {
		part := rec.NewSlice(off, rec.NumRows())
		n := int(part.NumRows())
		s := &operatorStage{why: make([]uint8, n), by: make([]uint8, n), reasons: []string{""}, bys: []string{""}, maskZero: make([]bool, n)}
		var want []float64
		for i, row := range rows[off:] {
			s.maskZero[i] = i%3 == 1
			for _, v := range row {
				want = append(want, map[bool]float64{true: 1}[v && !s.maskZero[i]])
			}
		}
		b := &Batch{rec: part, cols: newColumns("mem", sc, nil), drop: make([]bool, n), why: make([]dropWhy, n)}
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
		if _, ok := b.tokens[schema.ActionMask]; ok {
			t.Errorf("offset %d: the mask was converted to tokens, no stage asking", off)
		}
		got := b.set[schema.ActionMask].(*array.List)
		vals := got.ListValues().(*array.Boolean)
		k := 0
		for i := range n {
			lo, hi := got.ValueOffsets(i)
			if int(hi-lo) != len(rows[int(off)+i]) {
				t.Fatalf("offset %d: row %d has %d values, want %d", off, i, hi-lo, len(rows[int(off)+i]))
			}
			for j := lo; j < hi; j++ {
				if v := map[bool]float64{true: 1}[vals.Value(int(j))]; v != want[k] {
					t.Fatalf("offset %d: row %d token %d is %v, want %v", off, i, j-lo, v, want[k])
				}
				k++
			}
		}
		tok, err := b.Tokens(schema.ActionMask)
		if err != nil {
			t.Fatal(err)
		}
		for k := range want {
			if tok[k] != want[k] {
				t.Fatalf("offset %d: token %d read after the stage is %v, want %v", off, k, tok[k], want[k])
			}
		}
		b.release()
		part.Release()
	}
}
