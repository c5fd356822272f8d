package pipeline

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/parallel"
)

// TestTokensBits: a mask column's bits become 0/1 tokens whatever their
// offset in the bitmap (a sliced record, rows of every length), as a bit by
// bit reading gives them.
func TestTokensBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	sc := arrow.NewSchema([]arrow.Field{{Name: schema.ActionMask, Type: arrow.ListOf(arrow.FixedWidthTypes.Boolean)}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	lb := bld.Field(0).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.BooleanBuilder)
	var want [][]float64
	for i := 0; i < 200; i++ {
		lb.Append(true)
		row := make([]float64, rng.IntN(30))
		for k := range row {
			v := rng.IntN(2) == 1
			vb.Append(v)
			if v {
				row[k] = 1
			}
		}
		want = append(want, row)
	}
	rec := bld.NewRecord()
	defer rec.Release()
	for _, off := range []int64{0, 1, 3, 7, 8, 13} {
		part := rec.NewSlice(off, rec.NumRows())
		b := &Batch{rec: part, cols: newColumns("mem", sc, nil)}
		got, err := b.Tokens(schema.ActionMask)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for i, row := range want[off:] {
			for j, w := range row {
				if got[k] != w {
					t.Fatalf("offset %d: row %d token %d is %v, want %v", off, i, j, got[k], w)
				}
				k++
			}
		}
		if k != len(got) {
			t.Fatalf("offset %d: %d tokens, want %d", off, len(got), k)
		}
		part.Release()
	}
}

// TestTokensInChunks: a batch of several conversion chunks gives every row's
// values in place at GOMAXPROCS 1 and 8, and of bad rows in different
// chunks (a null list, a short list, a null value) the first in row order
// is the error.
func TestTokensInChunks(t *testing.T) {
	const rows, width = 700, 256 // 179,200 tokens: three chunks
	sc := arrow.NewSchema([]arrow.Field{
		{Name: schema.ActionMask, Type: arrow.ListOf(arrow.FixedWidthTypes.Boolean)},
		{Name: schema.Logprobs, Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
	}, nil)
	build := func(short, null, nullValue int) arrow.Record {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		defer bld.Release()
		mb, lb := bld.Field(0).(*array.ListBuilder), bld.Field(1).(*array.ListBuilder)
		mv, lv := mb.ValueBuilder().(*array.BooleanBuilder), lb.ValueBuilder().(*array.Float32Builder)
		for i := 0; i < rows; i++ {
			mb.Append(true)
			for k := 0; k < width; k++ {
				mv.Append(true)
			}
			switch {
			case i == null:
				lb.AppendNull()
			case i == short:
				lb.Append(true)
				lv.Append(1)
			case i == nullValue:
				lb.Append(true)
				for k := 0; k < width; k++ {
					if k == 7 {
						lv.AppendNull()
					} else {
						lv.Append(0)
					}
				}
			default:
				lb.Append(true)
				for k := 0; k < width; k++ {
					lv.Append(float32(i) + float32(k)/1024)
				}
			}
		}
		return bld.NewRecord()
	}
	good := build(-1, -1, -1)
	defer good.Release()
	for _, procs := range []int{1, 8} {
		prev := runtime.GOMAXPROCS(procs)
		b := &Batch{rec: good, cols: newColumns("mem", sc, nil)}
		got, err := b.Tokens(schema.Logprobs)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < rows; i++ {
			for k := 0; k < width; k++ {
				if w := float64(float32(i) + float32(k)/1024); got[i*width+k] != w {
					t.Fatalf("GOMAXPROCS %d: row %d token %d is %v, want %v", procs, i, k, got[i*width+k], w)
				}
			}
		}
		for _, tc := range []struct {
			short, null, nullValue int
			want                   string
		}{
			{650, 100, -1, `row 100: column "logprobs": null list`},
			{90, 600, -1, `row 90: column "logprobs": 1 values, the row has 256 response tokens`},
			{690, 680, 400, `row 400: column "logprobs": null value at token 7`},
		} {
			bad := build(tc.short, tc.null, tc.nullValue)
			_, err := (&Batch{rec: bad, cols: newColumns("mem", sc, nil)}).Tokens(schema.Logprobs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("GOMAXPROCS %d: error %v, want %q", procs, err, tc.want)
			}
			bad.Release()
		}
		runtime.GOMAXPROCS(prev)
	}
}

// TestFloat32Tokens: a list<float32> column's values come as stored, the
// values Tokens converts, in a sliced record too; a list<float64> column is
// not float32 (false, no error); a bad row is Tokens' error.
func TestFloat32Tokens(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: schema.ActionMask, Type: arrow.ListOf(arrow.FixedWidthTypes.Boolean)},
		{Name: schema.Logprobs, Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
		{Name: schema.OldLogprob, Type: arrow.ListOf(arrow.PrimitiveTypes.Float64)},
	}, nil)
	// build gives logprobs a null list at row null, one value at row short
	// and a null value at row nullValue (-1: none).
	build := func(null, short, nullValue int) arrow.Record {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		defer bld.Release()
		mb, lb, ob := bld.Field(0).(*array.ListBuilder), bld.Field(1).(*array.ListBuilder), bld.Field(2).(*array.ListBuilder)
		mv, lv, ov := mb.ValueBuilder().(*array.BooleanBuilder), lb.ValueBuilder().(*array.Float32Builder), ob.ValueBuilder().(*array.Float64Builder)
		for i := range 40 {
			n := 1 + i%7
			mb.Append(true)
			ob.Append(true)
			for k := range n {
				mv.Append(k%2 == 0)
				ov.Append(float64(k))
			}
			switch i {
			case null:
				lb.AppendNull()
				continue
			case short:
				n = 0
			}
			lb.Append(true)
			for k := range n {
				if i == nullValue && k == n-1 {
					lv.AppendNull()
				} else {
					lv.Append(float32(i) - float32(k)/3)
				}
			}
		}
		return bld.NewRecord()
	}
	good := build(-1, -1, -1)
	defer good.Release()
	for _, off := range []int64{0, 5} {
		part := good.NewSlice(off, good.NumRows())
		b := &Batch{rec: part, cols: newColumns("mem", sc, nil)}
		got, ok, err := b.Float32Tokens(schema.Logprobs)
		want, werr := b.Tokens(schema.Logprobs)
		if !ok || err != nil || werr != nil || len(got) != len(want) {
			t.Fatalf("offset %d: ok %v, error %v (converted: %v), %d values, want %d", off, ok, err, werr, len(got), len(want))
		}
		for i, x := range got {
			if float64(x) != want[i] {
				t.Fatalf("offset %d: value %d is %v, converted %v", off, i, x, want[i])
			}
		}
		if v, ok, err := b.Float32Tokens(schema.OldLogprob); v != nil || ok || err != nil {
			t.Errorf("offset %d: list<float64>: %v, %v, %v", off, v, ok, err)
		}
		part.Release()
	}
	for _, tc := range []struct {
		null, short, nullValue int
		want                   string
	}{
		{12, -1, -1, `row 12: column "logprobs": null list`},
		{-1, 13, -1, `row 13: column "logprobs": 0 values, the row has 7 response tokens`},
		{-1, -1, 14, `row 14: column "logprobs": null value at token 0`},
	} {
		bad := build(tc.null, tc.short, tc.nullValue)
		_, ok, err := (&Batch{rec: bad, cols: newColumns("mem", sc, nil)}).Float32Tokens(schema.Logprobs)
		if !ok || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ok %v, error %v, want %q", ok, err, tc.want)
		}
		bad.Release()
	}
}

// TestTokensOf: TokensOf converts several columns in one pass to the
// values Tokens gives one column at a time (nil for a missing column, a
// repeated name converted once), and its error is the first in the names' order, then in row
// order, at GOMAXPROCS 1 and 8.
func TestTokensOf(t *testing.T) {
	const rows, width = 600, 256 // three chunks per column
	sc := arrow.NewSchema([]arrow.Field{
		{Name: schema.ActionMask, Type: arrow.ListOf(arrow.FixedWidthTypes.Boolean)},
		{Name: schema.Logprobs, Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)},
		{Name: schema.OldLogprob, Type: arrow.ListOf(arrow.PrimitiveTypes.Float64)},
		{Name: "ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
	}, nil)
	// build gives logprobs a null list at row nullLP and old_logprob one at
	// row nullOld (-1: none).
	build := func(nullLP, nullOld int) arrow.Record {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		defer bld.Release()
		mb, lb, ob, ib := bld.Field(0).(*array.ListBuilder), bld.Field(1).(*array.ListBuilder), bld.Field(2).(*array.ListBuilder), bld.Field(3).(*array.ListBuilder)
		mv, lv, ov, iv := mb.ValueBuilder().(*array.BooleanBuilder), lb.ValueBuilder().(*array.Float32Builder),
			ob.ValueBuilder().(*array.Float64Builder), ib.ValueBuilder().(*array.Int64Builder)
		for i := 0; i < rows; i++ {
			mb.Append(true)
			ib.Append(true)
			for k := 0; k < width; k++ {
				mv.Append((i+k)%3 != 0)
				iv.Append(int64(k))
			}
			for _, c := range []struct {
				b    *array.ListBuilder
				null bool
				add  func(k int)
			}{{lb, i == nullLP, func(k int) { lv.Append(float32(i) - float32(k)/512) }},
				{ob, i == nullOld, func(k int) { ov.Append(float64(i) + float64(k)/3) }}} {
				if c.null {
					c.b.AppendNull()
					continue
				}
				c.b.Append(true)
				for k := 0; k < width; k++ {
					c.add(k)
				}
			}
		}
		return bld.NewRecord()
	}
	good := build(-1, -1)
	defer good.Release()
	all := []string{schema.OldLogprob, "no_such_column", schema.ActionMask, schema.Logprobs, schema.OldLogprob}
	for _, procs := range []int{1, 8} {
		prev := runtime.GOMAXPROCS(procs)
		one, many := &Batch{rec: good, cols: newColumns("mem", sc, nil)}, &Batch{rec: good, cols: newColumns("mem", sc, nil)}
		vals, err := many.TokensOf(all...)
		if err != nil {
			t.Fatal(err)
		}
		if len(vals) != len(all) {
			t.Fatalf("%d columns for %d names", len(vals), len(all))
		}
		for i, name := range all {
			want, err := one.Tokens(name)
			if err != nil {
				t.Fatal(err)
			}
			got := vals[i]
			if name == "no_such_column" {
				if got != nil || want != nil {
					t.Errorf("GOMAXPROCS %d: a missing column gave %d values", procs, len(got))
				}
				continue
			}
			if len(got) != rows*width || !slices.Equal(got, want) {
				t.Fatalf("GOMAXPROCS %d: %s differs from Tokens' values", procs, name)
			}
		}
		for _, tc := range []struct {
			nullLP, nullOld int
			names           []string
			want            string
		}{
			{500, 10, []string{schema.Logprobs, schema.OldLogprob}, `row 500: column "logprobs": null list`},
			{500, 10, []string{schema.OldLogprob, schema.Logprobs}, `row 10: column "old_logprob": null list`},
			{500, -1, []string{schema.Logprobs, "ids"}, `row 500: column "logprobs": null list`},
			{500, -1, []string{"ids", schema.Logprobs}, `column "ids": has type list<item: int64, nullable>, want a list of float32, float64 or bool`},
		} {
			bad := build(tc.nullLP, tc.nullOld)
			b := &Batch{rec: bad, cols: newColumns("mem", sc, nil)}
			if _, err := b.TokensOf(tc.names...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("GOMAXPROCS %d: TokensOf%q: error %v, want %q", procs, tc.names, err, tc.want)
			}
			if len(b.tokens) != 0 {
				t.Errorf("GOMAXPROCS %d: TokensOf%q kept %d columns after an error", procs, tc.names, len(b.tokens))
			}
			bad.Release()
		}
		runtime.GOMAXPROCS(prev)
	}
}

// TestListArray: the list column built from flat values over the cores
// holds every row's values (float32, or bools v != 0 for a mask) at offsets
// laid out by the rows, for lengths of several spans not a multiple of 8.
func TestListArray(t *testing.T) {
	lens := []int{parallel.SpanSize - 3, 0, 5, parallel.SpanSize + 11, 1}
	rows := agg.NewRows(lens)
	flat := make([]float64, rows.Tokens())
	for i := range flat {
		flat[i] = float64(i%7) - 3 + 1.0/3
		if i%11 == 0 {
			flat[i] = 0
		}
	}
	for _, procs := range []int{1, 8} {
		prev := runtime.GOMAXPROCS(procs)
		for _, isMask := range []bool{false, true} {
			a := listArray(flat, rows, isMask).(*array.List)
			if a.Len() != len(lens) {
				t.Fatalf("%d rows, want %d", a.Len(), len(lens))
			}
			for r := range lens {
				lo, hi := a.ValueOffsets(r)
				if int(lo) != rows.Off[r] || int(hi) != rows.Off[r+1] {
					t.Fatalf("row %d at [%d, %d), want [%d, %d)", r, lo, hi, rows.Off[r], rows.Off[r+1])
				}
			}
			for i, v := range flat {
				var ok bool
				switch vals := a.ListValues().(type) {
				case *array.Boolean:
					ok = isMask && vals.Value(i) == (v != 0)
				case *array.Float32:
					ok = !isMask && vals.Value(i) == float32(v)
				}
				if !ok {
					t.Fatalf("GOMAXPROCS %d, mask %v: value %d wrong (%v)", procs, isMask, i, v)
				}
			}
			a.Release()
		}
		runtime.GOMAXPROCS(prev)
	}
}

// TestWithDropInfo: the rejected rows' info gets drop_reason and
// dropped_by; its other keys keep their values as written.
func TestWithDropInfo(t *testing.T) {
	mem := memory.DefaultAllocator
	str := func(vals []string, valid []bool) *array.String {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.AppendValues(vals, valid)
		return b.NewStringArray()
	}
	info := str([]string{`{"b":12345678901234567890,"a":1.0,"c":{"x":[1,2]}}`, ""}, []bool{true, false})
	reason, by := str([]string{"zero_std", "zero_std"}, nil), str([]string{"grpo", "grpo"}, nil)
	defer info.Release()
	defer reason.Release()
	defer by.Release()
	out, err := withDropInfo(mem, info, reason, by)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	got := out.(*array.String)
	want := []string{`{"a":1.0,"b":12345678901234567890,"c":{"x":[1,2]},"drop_reason":"zero_std","dropped_by":"grpo"}`,
		`{"drop_reason":"zero_std","dropped_by":"grpo"}`}
	for i, w := range want {
		if got.Value(i) != w {
			t.Errorf("row %d: %s, want %s", i, got.Value(i), w)
		}
	}
}

// TestPickBits: pickBits gives each token the value its bit picks, at every
// bit offset and length, as a bit-by-bit reading does, for both value types.
func TestPickBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	bm := make([]byte, 16)
	for i := range bm {
		bm[i] = byte(rng.IntN(256))
	}
	checkPickBits(t, bm, [2]float32{-0.5, 2})
	checkPickBits(t, bm, [2]float64{0, 1})
}

func checkPickBits[T float32 | float64](t *testing.T, bm []byte, pick [2]T) {
	t.Helper()
	for j := 0; j < 16; j++ {
		for n := 0; n+j <= 8*len(bm); n += 1 + n/4 {
			dst := make([]T, n)
			pickBits(dst, bm, j, pick)
			for k := range dst {
				if w := pick[bm[(j+k)/8]>>((j+k)%8)&1]; dst[k] != w {
					t.Fatalf("%T: offset %d length %d: token %d is %v, want %v", pick[0], j, n, k, dst[k], w)
				}
			}
		}
	}
}

// broadcastMask returns a mask column of rows rows over several spans,
// every 97th row (from the 5th) null, read through a slice of its column.
func broadcastMask(t *testing.T, rows int) *array.List {
	t.Helper()
	lb := array.NewListBuilder(memory.DefaultAllocator, arrow.FixedWidthTypes.Boolean)
	defer lb.Release()
	vb := lb.ValueBuilder().(*array.BooleanBuilder)
	for i := range rows + 1 { // row 0 is sliced off
		if i%97 == 5 {
			lb.AppendNull()
			continue
		}
		lb.Append(true)
		for k := range 100 + i%300 {
			vb.Append((i+k)%3 != 0)
		}
	}
	full := lb.NewListArray()
	defer full.Release()
	mask := array.NewSlice(full, 1, int64(rows)+1).(*array.List)
	t.Cleanup(mask.Release)
	return mask
}

// checkColumn checks that a is broadcast's column of score over mask:
// each row its score times its mask (-0 for a negative score on a masked
// token), or the score on every token unmasked, a null mask row a null row.
func checkColumn(t *testing.T, mask *array.List, score []float32, masked bool, a arrow.Array) {
	t.Helper()
	got := a.(*array.List)
	vals := got.ListValues().(*array.Float32)
	m := mask.ListValues().(*array.Boolean)
	for i := range mask.Len() {
		if mask.IsNull(i) != got.IsNull(i) {
			t.Fatalf("masked %v: row %d null %v, the mask's %v", masked, i, got.IsNull(i), mask.IsNull(i))
		}
		lo, hi := mask.ValueOffsets(i)
		glo, ghi := got.ValueOffsets(i)
		if mask.IsNull(i) {
			if ghi != glo {
				t.Fatalf("row %d: a null row with %d values", i, ghi-glo)
			}
			continue
		}
		if ghi-glo != hi-lo {
			t.Fatalf("row %d: %d values, the mask has %d", i, ghi-glo, hi-lo)
		}
		for k := range int(hi - lo) {
			want := score[i]
			if masked && !m.Value(int(lo)+k) {
				want = score[i] * 0
			}
			if g := vals.Value(int(glo) + k); math.Float32bits(g) != math.Float32bits(want) {
				t.Fatalf("masked %v: row %d token %d is %v, want %v", masked, i, k, g, want)
			}
		}
	}
}

// TestBroadcastRows: broadcast gives every row of several spans its score
// times its mask, or its score unmasked (checkColumn), at GOMAXPROCS 1
// and 8, read through a slice of the mask column.
func TestBroadcastRows(t *testing.T) {
	const rows = 700
	mask := broadcastMask(t, rows)
	score := make([]float32, rows)
	for i := range score {
		score[i] = float32(i%11) - 5
	}
	for _, procs := range []int{1, 8} {
		for _, masked := range []bool{true, false} {
			prev := runtime.GOMAXPROCS(procs)
			a, err := broadcast(mask, score, masked)
			runtime.GOMAXPROCS(prev)
			if err != nil {
				t.Fatal(err)
			}
			checkColumn(t, mask, score, masked, a)
			a.Release()
		}
	}
}

// TestBroadcastReusesBuffers: a column broadcast after another was released
// is built in the released one's buffers (tokenBuffers: from the heap, or
// past a huge page mapped), which are not cleared (a NaN left in every
// value here), and still holds every row's value; the column of SetList's
// values likewise.
func TestBroadcastReusesBuffers(t *testing.T) {
	// The values buffer of a, emptied of the buffers freed before it and
	// dirtied; a is released, and its buffer freed.
	release := func(a arrow.Array) []byte {
		vals := a.(*array.List).ListValues().Data().Buffers()[1].Bytes()
		for free := tokenBufferFree[bits.Len(uint(len(vals)-1))]; len(free) > 0; {
			<-free
		}
		for i := range vals {
			vals[i] = 0xff
		}
		a.Release()
		return vals
	}
	for _, rows := range []int{300, 2100} { // 0.3 and 2.1 MB of values
		mask := broadcastMask(t, rows)
		score := make([]float32, rows)
		for i := range score {
			score[i] = float32(i%7) - 3
		}
		for _, masked := range []bool{true, false} {
			a, err := broadcast(mask, score, masked)
			if err != nil {
				t.Fatal(err)
			}
			old := release(a)
			for i := range score {
				score[i] = -score[i] - 0.5
			}
			if a, err = broadcast(mask, score, masked); err != nil {
				t.Fatal(err)
			}
			if vals := a.(*array.List).ListValues().Data().Buffers()[1].Bytes(); &vals[0] != &old[0] {
				t.Fatalf("%d rows, masked %v: built in a new buffer, not in the one released", rows, masked)
			}
			checkColumn(t, mask, score, masked, a)
			a.Release()
		}
	}
	layout := agg.NewRows([]int{3, 0, 5, 1000})
	flat := make([]float64, layout.Tokens())
	for i := range flat {
		flat[i] = float64(i) / 8
	}
	old := release(listArray(flat, layout, false))
	a := listArray(flat, layout, false)
	defer a.Release()
	vals := a.(*array.List).ListValues().(*array.Float32)
	if &vals.Data().Buffers()[1].Bytes()[0] != &old[0] {
		t.Fatal("SetList's column built in a new buffer, not in the one released")
	}
	for i, v := range flat {
		if vals.Value(i) != float32(v) {
			t.Fatalf("value %d is %v, want %v", i, vals.Value(i), v)
		}
	}
}
