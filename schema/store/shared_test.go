package store

import (
	"bytes"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

// TestSharedColumnEncodedOnce: a column whose array is an earlier column's
// (returns set to advantages) is planned as a copy of that column's chunk,
// encoded once, whether the record holds the very array or Write's slice
// of it (a row group cut from a record, a dropping job's kept rows); a
// column of equal values in arrays of its own is encoded. Either way the
// file's bytes are those of every column encoded.
func TestSharedColumnEncodedOnce(t *testing.T) {
	typ := arrow.ListOf(arrow.PrimitiveTypes.Float32)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "advantages", Type: typ, Nullable: true},
		{Name: "returns", Type: typ, Nullable: true},
	}, nil)
	list := func() arrow.Array {
		b := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Float32)
		defer b.Release()
		v := b.ValueBuilder().(*array.Float32Builder)
		for r := range 50 {
			b.Append(true)
			for k := range r % 7 {
				v.Append(float32(r*k) / 3)
			}
		}
		return b.NewArray()
	}
	adv, other := list(), list()
	defer adv.Release()
	defer other.Release()
	shared := array.NewRecord(sc, []arrow.Array{adv, adv}, int64(adv.Len()))
	defer shared.Release()
	apart := array.NewRecord(sc, []arrow.Array{adv, other}, int64(adv.Len()))
	defer apart.Release()
	sliced := shared.NewSlice(10, 40)
	defer sliced.Release()
	slicedApart := apart.NewSlice(10, 40)
	defer slicedApart.Release()
	props, err := ParquetOptions{}.writerProperties(sc)
	if err != nil {
		t.Fatal(err)
	}
	write := func(rec arrow.Record) []byte {
		var buf bytes.Buffer
		sk, err := newColumnSink(&buf, sc, props)
		if err != nil {
			t.Fatal(err)
		}
		if err := sk.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := sk.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name       string
		rec, apart arrow.Record
		same       int
		isSlice    bool
	}{
		{"the very array", shared, nil, 0, false},
		{"a slice of one array", sliced, slicedApart, 0, true},
		{"arrays of their own", apart, nil, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sk, err := newColumnSink(&bytes.Buffer{}, sc, props)
			if err != nil {
				t.Fatal(err)
			}
			rg, err := sk.(*columnSink).plan(tc.rec, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := rg.plans[1]
			if p.same != tc.same || p.sliced != tc.isSlice || (p.col == nil) != (tc.same >= 0) {
				t.Errorf("returns planned as same %d (sliced %v, encoded %v), want same %d (sliced %v)", p.same, p.sliced, p.col != nil, tc.same, tc.isSlice)
			}
			if tc.apart != nil {
				if got, want := write(tc.rec), write(tc.apart); !bytes.Equal(got, want) {
					t.Errorf("%d bytes written, %d with every column encoded, differing", len(got), len(want))
				}
			}
		})
	}
}
