package pipeline

import (
	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

// Columns a job does not change are not decoded when the store allows it:
// the streaming pass then reads a Parquet store deferred (store.Deferred),
// decoding only the columns the stages read, one batch per row group; a
// batch whose rows all pass through, in order and without copies, is written
// with the other columns' chunks (and those of the decoded columns it passes
// on unchanged) copied from the input (store.Writer.WriteWith). In a job
// whose stages drop rows, every batch writes the other columns the output
// keeps for its kept rows alone (store.Rest.Keep, see keptRows), written
// from their pages or decoded, encoded as a decoded read's are: the bytes
// do not depend on which row groups lost rows.

// deferredReader opens the streaming pass's deferred reader over the store
// of r, with the columns it decodes resolved; nil when the job cannot defer
// (an output that is not Parquet, a store Deferrable refuses).
func deferredReader(job *Job, r *store.Reader, cols *columns) (*store.Reader, *columns, error) {
	if f, err := store.FormatOf(job.Out); err != nil || f != store.Parquet {
		return nil, nil, nil
	}
	drops := false
	for _, st := range job.Stages {
		// A batch with copied rows is decoded whole anyway (reading
		// deferred would only add a pass over its raw chunks), and so are
		// the dropped rows a rejected-rows store keeps.
		n := st.Needs()
		if n.Duplicates || (n.Drops && job.Rejected != "") {
			return nil, nil, nil
		}
		drops = drops || n.Drops
	}
	// The output's row groups are its batches': a job that drops rows
	// writes the bytes a decoded read writes only when the deferred read's
	// batches are the same.
	if drops && !store.RowGroupsWithin(r.Files(), int64(job.BatchRows)) {
		return nil, nil, nil
	}
	var decode []string
	add := func(name string) {
		if i := cols.lookup(name); i >= 0 {
			decode = append(decode, r.Schema().Field(i).Name)
		}
	}
	for _, st := range job.Stages {
		n := st.Needs()
		for _, c := range append(append([]string(nil), n.Columns...), n.Optional...) {
			add(c)
		}
	}
	if job.Shard != nil {
		add(schema.Batch) // which rows are the shard's
	}
	add(schema.ActionMask) // the response layout (Batch.Rows)
	if cols.lookup(schema.ActionMask) < 0 {
		add(schema.Logprobs)
	}
	if !store.Deferrable(r.Files(), decode, job.BatchRows) {
		return nil, nil, nil
	}
	if parts, err := store.Partitions(job.In, r.Files()); err != nil || len(parts) > 0 {
		return nil, nil, err // partition columns are in no column chunk to copy
	}
	d, err := store.Open(job.In, job.readOptions(store.Columns(decode...), store.Deferred())...)
	if err != nil {
		return nil, nil, err
	}
	return d, newColumns(d.Files()[0], d.Schema(), job.Columns), nil
}

// input returns the batch's input column name: decoded, or from the rest
// (decoding it), nil when the store lacks it.
func (b *Batch) input(name string) (arrow.Array, error) {
	if i := fieldIndex(b.rec.Schema(), name); i >= 0 {
		return b.rec.Column(i), nil
	}
	if b.rest == nil {
		return nil, nil
	}
	dec, err := b.rest.Decode()
	if err != nil {
		return nil, err
	}
	if i := fieldIndex(dec.Schema(), name); i >= 0 {
		return dec.Column(i), nil
	}
	return nil, nil
}

// passThrough returns the output record of a batch whose rows all pass
// through: the decoded input columns and the stages' columns, without the
// rest's, which the writer copies.
func (s *shaper) passThrough(b *Batch) (arrow.Record, error) {
	var fields []arrow.Field
	var cols []arrow.Array
	var nullDup arrow.Array
	for i, j := range s.src {
		var a arrow.Array
		switch {
		case j >= 0:
			if k := fieldIndex(b.rec.Schema(), s.in.Field(j).Name); k >= 0 {
				a = b.rec.Column(k)
			}
		case i == s.dupOf:
			nullDup = array.MakeArrayOfNull(s.mem, arrow.PrimitiveTypes.Int64, b.Len())
			defer nullDup.Release()
			a = nullDup
		default:
			if a = b.set[s.name[i]]; a == nil {
				return nil, errNotSet(s.name[i])
			}
		}
		if a != nil {
			fields, cols = append(fields, s.out.Field(i)), append(cols, a)
		}
	}
	return array.NewRecord(arrow.NewSchema(fields, nil), cols, int64(b.Len())), nil
}

// validateRest checks the columns of a deferred batch that were not
// decoded, without decoding them: each per-token column must hold as many
// values as the decoded response layout gives (one per token, one per empty
// or null row). On a mismatch the batch is decoded and validated whole, so
// the error names the row.
func (b *Batch) validateRest() error {
	layout := b.Column(schema.ActionMask)
	if layout == nil {
		layout = b.Column(schema.Logprobs)
	}
	list, ok := layout.(array.ListLike)
	if b.rest == nil || !ok {
		return nil
	}
	var want int64
	for i := 0; i < list.Len(); i++ {
		lo, hi := list.ValueOffsets(i)
		if list.IsNull(i) || hi == lo {
			want++
		} else {
			want += hi - lo
		}
	}
	for _, f := range b.rest.Schema().Fields() {
		if _, isList := f.Type.(*arrow.ListType); !isList || !schema.IsResponseList(f.Name) {
			continue
		}
		if got, _ := b.rest.Levels(f.Name); got != want {
			full, err := b.full()
			if err != nil {
				return err
			}
			defer full.Release()
			if err := schema.Validate(b.File, b.FileRow, full, schema.ValidateOptions{AllowInvalidReward: true}); err != nil {
				return err
			}
			return b.Errorf(0, f.Name, "%d values in this row group, where the response layout gives %d", got, want)
		}
	}
	return nil
}

// full returns the batch's decoded columns and its rest's, decoded.
func (b *Batch) full() (arrow.Record, error) {
	dec, err := b.rest.Decode()
	if err != nil {
		return nil, err
	}
	fields := append(append([]arrow.Field(nil), b.rec.Schema().Fields()...), dec.Schema().Fields()...)
	cols := append(append([]arrow.Array(nil), b.rec.Columns()...), dec.Columns()...)
	return array.NewRecord(arrow.NewSchema(fields, nil), cols, b.rec.NumRows()), nil
}

// keptRows returns the output record of a deferred batch in a job that
// drops rows (nil when the stages dropped every row), with the rest of its
// kept rows (store.Rest.Keep): the decoded and the stages' columns take the
// kept rows, and the writer writes the rest's columns the output keeps
// for those rows alone, from their pages where it can; the kept rows are
// validated as the decoded columns were, their rest's columns included
// (the dropped rows' are not read), before they are written.
func (s *shaper) keptRows(b *Batch) (arrow.Record, *store.Rest, error) {
	n := b.Len()
	if b.dropped == n {
		return nil, nil, nil
	}
	keep := make([]bool, n)
	idx := make([]int64, 0, n-b.dropped)
	for i := range keep {
		if b.dropped == 0 || !b.drop[i] {
			keep[i], idx = true, append(idx, int64(i))
		}
	}
	// The output columns at hand: decoded, set.
	var fields []arrow.Field
	var cols []arrow.Array
	for i, j := range s.src {
		var a arrow.Array
		switch {
		case j >= 0:
			k := fieldIndex(b.rec.Schema(), s.in.Field(j).Name)
			if k < 0 {
				continue // the rest's
			}
			a = b.rec.Column(k)
		case i == s.dupOf:
			nullDup := array.MakeArrayOfNull(s.mem, arrow.PrimitiveTypes.Int64, n)
			defer nullDup.Release()
			a = nullDup
		default:
			if a = b.set[s.name[i]]; a == nil {
				return nil, nil, errNotSet(s.name[i])
			}
		}
		fields, cols = append(fields, s.out.Field(i)), append(cols, a)
	}
	all := array.NewRecord(arrow.NewSchema(fields, nil), cols, int64(n))
	defer all.Release()
	kept, err := takeRows(all, idx)
	if err != nil {
		return nil, nil, err
	}
	file, first, fileRows := b.File, b.FileRow, b.fileRows
	rowOf := func(i int64) int64 {
		if fileRows != nil {
			return fileRows[i]
		}
		return first + i
	}
	check := func(all arrow.Record) error { return validateKept(file, rowOf, all, idx) }
	rest, err := b.rest.Keep(keep, check)
	if err != nil {
		kept.Release()
		return nil, nil, err
	}
	return kept, rest, nil
}

// validateKept validates the kept rows idx of a batch of file, whose row i
// is rowOf(i) in the file: at once, and on an error run of consecutive
// rows by run, so that the error names the row in the file.
func validateKept(file string, rowOf func(int64) int64, kept arrow.Record, idx []int64) error {
	if schema.Validate(file, 0, kept, schema.ValidateOptions{AllowInvalidReward: true}) == nil {
		return nil
	}
	for k := 0; k < len(idx); {
		m := k + 1
		for m < len(idx) && idx[m] == idx[m-1]+1 {
			m++
		}
		run := kept.NewSlice(int64(k), int64(m))
		err := schema.Validate(file, rowOf(idx[k]), run, schema.ValidateOptions{AllowInvalidReward: true})
		run.Release()
		if err != nil {
			return err
		}
		k = m
	}
	return nil
}
