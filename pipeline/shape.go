package pipeline

import (
	"fmt"
	"runtime"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/advantage"
)

// shaper turns batches into output records: the kept input columns pass
// through unchanged, the stages' columns are set (replacing an input column
// of that name in place, appended otherwise), and copied rows get a fresh
// suffix, their task offset and duplicate_of.
type shaper struct {
	in, out *arrow.Schema
	// src[i] is the input column of output column i, -1 for a written one;
	// name[i] the vocabulary name of a written one.
	src   []int
	name  []string
	dupOf int // output column of duplicate_of, -1: not written
	// dropping: a stage may drop rows, so every deferred batch is written
	// from its kept rows (keptRows), none passes through: the output has
	// the bytes of a decoded read's whichever row groups lost rows.
	dropping bool
	// input columns (-1: absent)
	suffix, task int
	mem          memory.Allocator
	rng          *advantage.RNG
}

// newShaper plans the output schema of input schema in: the columns keep
// (all when nil), then writes (each a known column). duplicate_of is
// written when withDup, and a stale input duplicate_of is dropped when not.
func newShaper(in *arrow.Schema, cols *columns, keep, writes []string, withDup bool, seed uint64) *shaper {
	s := &shaper{in: in, dupOf: -1, suffix: fieldIndex(in, schema.Suffix), task: fieldIndex(in, schema.Task),
		mem: memory.DefaultAllocator, rng: advantage.NewRNG(seed ^ suffixSalt)}
	written := map[int]string{} // input column → vocabulary name written there
	for _, w := range writes {
		if i := cols.lookup(w); i >= 0 {
			written[i] = w
		}
	}
	if withDup {
		writes = append(writes, schema.DuplicateOf)
		if i := fieldIndex(in, schema.DuplicateOf); i >= 0 {
			written[i] = schema.DuplicateOf
		}
	}
	placed := map[string]bool{}
	var fields []arrow.Field
	for i, f := range in.Fields() {
		w, isWritten := written[i]
		switch {
		case isWritten:
			f = arrow.Field{Name: f.Name, Type: schema.Field(w).Type, Nullable: true}
			s.src, s.name = append(s.src, -1), append(s.name, w)
			placed[w] = true
		case f.Name == schema.DuplicateOf, keep != nil && !contains(keep, f.Name):
			continue // a stale duplicate_of of an earlier run: our rows are originals
		default:
			s.src, s.name = append(s.src, i), append(s.name, "")
		}
		if w == schema.DuplicateOf {
			s.dupOf = len(fields)
		}
		fields = append(fields, f)
	}
	for _, w := range writes {
		if placed[w] {
			continue
		}
		placed[w] = true
		if w == schema.DuplicateOf {
			s.dupOf = len(fields)
		}
		fields = append(fields, schema.Field(w))
		s.src, s.name = append(s.src, -1), append(s.name, w)
	}
	md := in.Metadata()
	s.out = arrow.NewSchema(fields, &md)
	return s
}

func errNotSet(name string) error { return fmt.Errorf("pipeline: no stage set column %s", name) }

// suffixSalt separates the suffix generator's stream from the stages'.
const suffixSalt = 0x5eed5f1f

// shape returns the batch's output records: its kept rows, and the copies
// (nil when none). A deferred batch whose rows all pass through keeps its
// rest for the writer (passThrough); in a job that drops rows the writer
// writes the rest's kept rows alone (keptRows).
func (s *shaper) shape(b *Batch) (kept, copies arrow.Record, rest *store.Rest, err error) {
	if b.rest != nil && len(b.copies) == 0 {
		if s.dropping {
			kept, rest, err = s.keptRows(b)
			return kept, nil, rest, err // the batch's rest is released with it
		}
		if kept, err = s.passThrough(b); err != nil {
			return nil, nil, nil, err
		}
		return kept, nil, b.rest, nil
	}
	n := b.Len()
	cols := make([]arrow.Array, len(s.src))
	var nullDup arrow.Array
	for i, j := range s.src {
		switch {
		case j >= 0: // by name: decoded, from the rest, or joined to the record (Rest.Join)
			if cols[i], err = b.input(s.in.Field(j).Name); err != nil {
				return nil, nil, nil, err
			}
		case i == s.dupOf:
			nullDup = array.MakeArrayOfNull(s.mem, arrow.PrimitiveTypes.Int64, n)
			cols[i] = nullDup
		default:
			a := b.set[s.name[i]]
			if a == nil {
				return nil, nil, nil, errNotSet(s.name[i])
			}
			cols[i] = a
		}
	}
	if nullDup != nil {
		defer nullDup.Release()
	}
	all := array.NewRecord(s.out, cols, int64(n))
	defer all.Release()
	if b.dropped == 0 {
		all.Retain()
		kept = all
	} else if b.dropped < n {
		idx := make([]int64, 0, n-b.dropped)
		for i, d := range b.drop {
			if !d {
				idx = append(idx, int64(i))
			}
		}
		if kept, err = takeRows(all, idx); err != nil {
			return nil, nil, nil, err
		}
	}
	if len(b.copies) > 0 {
		copies, err = s.copies(b, all)
		if err != nil {
			if kept != nil {
				kept.Release()
			}
			return nil, nil, nil, err
		}
	}
	return kept, copies, nil, nil
}

// copies returns the batch's copied rows, from its full output record all.
func (s *shaper) copies(b *Batch, all arrow.Record) (arrow.Record, error) {
	take := make([]int64, len(b.copies))
	of := make([]int64, len(b.copies))
	off := make([]int64, len(b.copies))
	for k, c := range b.copies {
		take[k], of[k], off[k] = int64(c.Row), b.Row+int64(c.Row), c.Offset
	}
	sel, err := takeRows(all, take)
	if err != nil {
		return nil, err
	}
	defer sel.Release()
	cols := append([]arrow.Array(nil), sel.Columns()...)
	var built []arrow.Array
	defer func() {
		for _, a := range built {
			a.Release()
		}
	}()
	for i, j := range s.src {
		var a arrow.Array
		switch {
		case i == s.dupOf:
			bld := array.NewInt64Builder(s.mem)
			bld.AppendValues(of, nil)
			a = bld.NewArray()
			bld.Release()
		case j >= 0 && j == s.suffix:
			a = suffixArray(s.mem, cols[i].DataType(), s.freshSuffixes(cols[i], of))
		case j >= 0 && j == s.task && hasOffset(off):
			if a, err = addTaskOffset(s.mem, cols[i], off); err != nil {
				return nil, err
			}
		default:
			continue
		}
		built = append(built, a)
		cols[i] = a
	}
	return array.NewRecord(s.out, cols, int64(len(take))), nil
}

// takeRows returns the rows idx of rec, in that order: each run of
// consecutive rows is a zero-copy slice, and the slices of every column are
// concatenated (linear; arrow's compute.Take regrows its list buffers for
// every row it adds, quadratic in the batch's token count), the columns
// concurrently (up to GOMAXPROCS at once). Columns that are one array (a
// stage's returns set to its advantages) stay one array, taken once.
func takeRows(rec arrow.Record, idx []int64) (arrow.Record, error) {
	type run struct{ lo, hi int64 }
	var runs []run
	for _, i := range idx {
		if k := len(runs) - 1; k >= 0 && runs[k].hi == i {
			runs[k].hi++
		} else {
			runs = append(runs, run{i, i + 1})
		}
	}
	if len(runs) == 0 {
		runs = append(runs, run{0, 0})
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	take := func(i int, c arrow.Array) error {
		if len(runs) == 1 { // one zero-copy slice
			cols[i] = array.NewSlice(c, runs[0].lo, runs[0].hi)
			return nil
		}
		parts := make([]arrow.Array, len(runs))
		for k, r := range runs {
			parts[k] = array.NewSlice(c, r.lo, r.hi)
		}
		var err error
		cols[i], err = array.Concatenate(parts, memory.DefaultAllocator)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			return fmt.Errorf("column %s: %w", rec.ColumnName(i), err)
		}
		return nil
	}
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	if len(runs) == 1 { // nothing to spread
		g.SetLimit(1)
	}
	for i, c := range rec.Columns() {
		if j := slices.Index(rec.Columns(), c); j == i {
			g.Go(func() error { return take(i, c) })
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, c := range rec.Columns() {
		if j := slices.Index(rec.Columns(), c); j < i {
			cols[i] = cols[j]
			cols[i].Retain()
		}
	}
	return array.NewRecord(rec.Schema(), cols, int64(len(idx))), nil
}

// freshSuffixes draws a suffix for every copy: six hex digits, like
// upstream's, from the seeded generator, differing from the suffix of the row
// copied (orig) and of its other copies (so every uid stays unique).
func (s *shaper) freshSuffixes(orig arrow.Array, of []int64) []string {
	out := make([]string, len(of))
	for i := range of {
		for {
			v := fmt.Sprintf("%06x", s.rng.Uint64()&0xffffff)
			if orig.IsValid(i) && orig.ValueStr(i) == v {
				continue
			}
			clash := false
			for k := i - 1; k >= 0 && of[k] == of[i]; k-- {
				clash = clash || out[k] == v
			}
			if !clash {
				out[i] = v
				break
			}
		}
	}
	return out
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
