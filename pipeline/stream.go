package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"runtime/pprof"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

// streamer is the streaming pass: it reads batches on one goroutine, runs
// the stages on a second, shapes their output records on a third (the
// shaper's seeded suffixes are drawn in batch order there) and writes on a
// fourth, so reading, computing, shaping and encoding overlap.
type streamer struct {
	job       *Job
	cols      *columns
	g         *Grouping
	sh        *shaper
	w         *store.Writer // nil: the job writes no store
	spill     *store.Writer
	spillPath string
	rej       *store.Writer // the rejected rows (Job.Rejected)
	rejSchema *arrow.Schema
	// rejInfo: the rejected store is a Trinity buffer, which holds no
	// columns of its own: the reason and dropper go into each row's info.
	rejInfo bool
	// pass: the streaming pass's own reader and its columns, when the
	// columns no stage reads pass through undecoded (deferredReader, in
	// defer.go); nil: the pass reads the store's reader.
	pass     *store.Reader
	passCols *columns

	// hold is the index of the first stage that defers its work on a batch
	// (Completer): a batch is begun up to it, held, and completed after the
	// next one is begun; -1: none.
	hold int

	rows, written, copied, rejectedRows int64
}

// out is one output record, for the store or the spill, with the rest of
// its columns when they pass through undecoded.
type out struct {
	rec      arrow.Record
	rest     *store.Rest
	spill    bool
	rejected bool
}

// release releases the record and its rest.
func (o out) release() {
	o.rec.Release()
	if o.rest != nil {
		o.rest.Release()
	}
}

// newStreamer makes the streaming pass of job over r: the output records'
// shaper, and the output, rejected-rows and spill stores it creates.
func newStreamer(ctx context.Context, job *Job, r *store.Reader, cols *columns, g *Grouping, tmp string) (*streamer, error) {
	var writes []string
	dup := fieldIndex(r.Schema(), schema.DuplicateOf) >= 0 && job.Keep == nil
	drops := false
	for _, st := range job.Stages {
		n := st.Needs()
		for _, w := range n.Writes {
			if !slices.Contains(writes, w) {
				writes = append(writes, w)
			}
		}
		dup = dup || n.Duplicates
		drops = drops || n.Drops
	}
	for _, st := range job.Stages { // needs known only after the group pass
		if err := cols.require(st.Needs().Columns...); err != nil {
			return nil, err
		}
	}
	s := &streamer{job: job, cols: cols, g: g, hold: -1}
	for i, st := range job.Stages {
		if c, ok := st.(Completer); ok && c.Deferred() {
			s.hold = i
			break
		}
	}
	s.sh = newShaper(r.Schema(), cols, job.Keep, writes, dup, job.Seed)
	s.sh.dropping = drops
	if job.Out == "" {
		return s, nil
	}
	var err error
	// Kept and rejected rows in one database: one transaction. A signal
	// stops the wait for a database's lock.
	together := store.Together()
	if s.w, err = store.Create(job.Out, s.sh.out, store.NotOver(append([]string{job.In}, r.Files()...)...), store.WithParquet(job.Parquet), together, store.WriteContext(ctx)); err != nil {
		return nil, err
	}
	if s.pass, s.passCols, err = deferredReader(job, r, cols); err != nil {
		s.w.Abort()
		return nil, err
	}
	if job.Rejected != "" {
		fields := append(slices.Clone(r.Schema().Fields()),
			arrow.Field{Name: DropReason, Type: arrow.BinaryTypes.String},
			arrow.Field{Name: DroppedBy, Type: arrow.BinaryTypes.String})
		s.rejSchema = arrow.NewSchema(fields, nil)
		if f, _ := store.FormatOf(job.Rejected); f == store.TrinityBuffer {
			if s.rejInfo = fieldIndex(r.Schema(), schema.Info) >= 0; !s.rejInfo {
				s.abort()
				return nil, schema.Errorf(job.In, -1, schema.Info, "missing: a rejected-rows Trinity buffer records drop_reason and dropped_by in info")
			}
		}
		if s.rej, err = store.Create(job.Rejected, s.rejSchema, store.NotOver(append([]string{job.In}, r.Files()...)...), store.WithParquet(job.Parquet), together, store.WriteContext(ctx)); err != nil {
			s.abort()
			return nil, err
		}
	}
	if dup {
		s.spillPath = filepath.Join(tmp, "copies.arrows")
		if s.spill, err = store.Create(s.spillPath, s.sh.out); err != nil {
			s.abort()
			return nil, err
		}
	}
	return s, nil
}

// abort closes the pass's own reader and abandons the stores not yet
// committed.
func (s *streamer) abort() {
	if s.pass != nil {
		s.pass.Close()
	}
	if s.w != nil {
		s.w.Abort()
	}
	if s.spill != nil {
		s.spill.Abort()
	}
	if s.rej != nil {
		s.rej.Abort()
	}
}

// run streams r's batches through the stages into the outputs: reading,
// applying the stages, shaping and writing each on a goroutine of its own,
// joined by channels in batch order.
func (s *streamer) run(ctx context.Context, r *store.Reader) error {
	cols := s.cols
	if s.pass != nil {
		r, cols = s.pass, s.passCols
	}
	eg, ctx := errgroup.WithContext(ctx)
	in := make(chan *Batch, 1)
	bt := newBatcher(s.job, cols, r.Schema())
	applied := make(chan *Batch, 1)
	outs := make(chan out, 2)
	step := labelled(ctx, eg)
	step("read", func() error { return s.readBatches(ctx, r, bt, in) })
	step("write", func() error { return s.writeOuts(outs) })
	step("shape", func() error { return s.shapeBatches(ctx, applied, outs) })
	step("stages", func() error { return s.applyBatches(ctx, in, applied) })
	return eg.Wait()
}

// readBatches reads r's records into batches and sends them on in, which it
// closes.
func (s *streamer) readBatches(ctx context.Context, r *store.Reader, bt *batcher, in chan<- *Batch) error {
	defer close(in)
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.job.Progress != nil {
			s.job.Progress(rec.NumRows())
		}
		file, fileRow, _ := r.Pos()
		b, err := bt.batch(rec, r.Rest(), file, fileRow)
		if err != nil {
			return err
		}
		if b == nil {
			continue
		}
		select {
		case in <- b:
		case <-ctx.Done():
			discard(b)
			return ctx.Err()
		}
	}
}

// writeOuts writes each output record from outs to its store; after an
// error it releases the rest.
func (s *streamer) writeOuts(outs <-chan out) error {
	for o := range outs {
		err := s.write(o)
		o.release()
		if err != nil {
			for o := range outs {
				o.release()
			}
			return err
		}
	}
	return nil
}

// shapeBatches shapes each batch from applied into its output records and
// sends them on outs, which it closes; after an error it discards the rest.
func (s *streamer) shapeBatches(ctx context.Context, applied <-chan *Batch, outs chan<- out) error {
	defer close(outs)
	for b := range applied {
		if err := s.finish(ctx, b, outs); err != nil {
			for b := range applied {
				discard(b)
			}
			return err
		}
	}
	return nil
}

// applyBatches runs the stages over each batch from in and sends it on
// applied, which it closes; after an error it discards the batch it holds
// and the rest.
func (s *streamer) applyBatches(ctx context.Context, in <-chan *Batch, applied chan<- *Batch) error {
	defer close(applied)
	held, err := s.applyInOrder(ctx, in, applied)
	if err != nil {
		if held != nil {
			discard(held)
		}
		for b := range in {
			discard(b)
		}
	}
	return err
}

// applyInOrder begins each batch from in and sends it on applied once its
// stages are done: at once when no stage defers its work (s.hold), else
// held until the next batch is begun. On an error it returns the batch it
// still holds.
func (s *streamer) applyInOrder(ctx context.Context, in <-chan *Batch, applied chan<- *Batch) (held *Batch, err error) {
	for b := range in {
		if err := s.begin(b); err != nil {
			discard(b)
			return held, err
		}
		if held != nil {
			h := held
			held = nil
			if err := s.send(ctx, h, applied); err != nil {
				discard(b)
				return nil, err
			}
		}
		if s.hold >= 0 {
			held = b
		} else if err := s.send(ctx, b, applied); err != nil {
			return nil, err
		}
	}
	if held != nil {
		return nil, s.send(ctx, held, applied)
	}
	return nil, nil
}

// send applies the rest of the stages to a begun batch and passes it to the
// shaper on applied; a batch it cannot pass on it discards.
func (s *streamer) send(ctx context.Context, b *Batch, applied chan<- *Batch) error {
	if err := s.apply(b); err != nil {
		discard(b)
		return err
	}
	select {
	case applied <- b:
		return nil
	case <-ctx.Done():
		discard(b)
		return ctx.Err()
	}
}

// labelled returns a func that runs f on a goroutine of eg under the
// profiler label step=name, so that a CPU profile (RFTPIPE_CPUPROFILE;
// go tool pprof -tagfocus, -tags) tells the steps apart, the goroutines
// they start included.
func labelled(ctx context.Context, eg *errgroup.Group) func(name string, f func() error) {
	return func(name string, f func() error) {
		eg.Go(func() (err error) {
			pprof.Do(ctx, pprof.Labels("step", name), func(context.Context) { err = f() })
			return err
		})
	}
}

// discard releases a batch that will not be written.
func discard(b *Batch) {
	b.release()
	b.rec.Release()
	if b.rest != nil {
		b.rest.Release()
	}
}

// finish shapes the output records of a batch the stages are done with,
// sends them to outs and releases the batch.
func (s *streamer) finish(ctx context.Context, b *Batch, outs chan<- out) error {
	var kept, copies, rejected arrow.Record
	var rest *store.Rest
	var err error
	if s.w != nil {
		kept, copies, rest, err = s.sh.shape(b)
	}
	if err == nil && s.rej != nil && b.dropped > 0 {
		rejected, err = s.rejected(b)
	}
	b.release()
	b.rec.Release()
	if b.rest != nil && rest != b.rest {
		b.rest.Release()
	}
	for _, o := range []out{{rec: kept, rest: rest}, {rec: copies, spill: true}, {rec: rejected, rejected: true}} {
		if o.rec == nil {
			continue
		}
		select {
		case outs <- o:
		case <-ctx.Done():
			o.release()
			err = ctx.Err()
		}
	}
	return err
}

// begin validates one batch and runs it through the stages up to the
// first whose work on it may still be in flight (s.hold), all of them when
// none defers.
func (s *streamer) begin(b *Batch) error {
	if err := b.validate(); err != nil {
		return err
	}
	if err := b.validateRest(); err != nil { // deferred columns (defer.go)
		return err
	}
	if s.g != nil && b.Row+int64(b.Len()) > s.g.Rows {
		return schema.Errorf(s.job.In, -1, "", "the store changed while it was read: more than the %d rows the group pass counted", s.g.Rows)
	}
	s.rows += int64(b.Len())
	if s.hold < 0 {
		return nil // apply runs every stage
	}
	for _, st := range s.job.Stages[:s.hold] {
		if err := applyNow(st, b); err != nil {
			return err
		}
	}
	return s.job.Stages[s.hold].(Applier).Apply(b)
}

// apply runs a begun batch through the rest of the stages, completing it
// at the deferring stage first.
func (s *streamer) apply(b *Batch) error {
	rem := s.job.Stages
	if s.hold >= 0 {
		if err := s.job.Stages[s.hold].(Completer).Complete(b); err != nil {
			return err
		}
		rem = rem[s.hold+1:]
	}
	for _, st := range rem {
		if err := applyNow(st, b); err != nil {
			return err
		}
	}
	return nil
}

// applyNow runs stage st over b, its work done when it returns.
func applyNow(st Stage, b *Batch) error {
	a, ok := st.(Applier)
	if !ok {
		return nil
	}
	if err := a.Apply(b); err != nil {
		return err
	}
	if c, ok := st.(Completer); ok && c.Deferred() {
		return c.Complete(b)
	}
	return nil
}

// write writes o to its store: the rejected rows, the spill or the output.
func (s *streamer) write(o out) error {
	if o.rejected {
		return s.rej.Write(o.rec)
	}
	if o.spill {
		s.copied += o.rec.NumRows()
		return s.spill.Write(o.rec)
	}
	return s.w.WriteWith(o.rec, o.rest)
}

// commit appends the spilled copies, in the order they were set aside (the
// order of the rows they copy), and commits the output store.
func (s *streamer) commit(ctx context.Context) error {
	if s.w == nil {
		return nil
	}
	if s.spill != nil {
		if err := s.spill.Commit(); err != nil {
			return err
		}
		s.spill = nil
		if s.copied == 0 {
			return s.commitOut()
		}
		r, err := store.Open(s.spillPath, store.BatchRows(s.job.BatchRows))
		if err != nil {
			return err
		}
		defer r.Close()
		if err := r.ForEach(ctx, s.w.Write); err != nil {
			return err
		}
	}
	return s.commitOut()
}

// commitOut commits the output store and the rejected rows together
// (store.CommitAll: a failed write leaves neither behind, unless they are
// buffer tables of two databases).
func (s *streamer) commitOut() error {
	outs := []*store.Writer{s.w}
	if s.rej != nil {
		outs = append(outs, s.rej)
	}
	if err := store.CommitAll(outs...); err != nil {
		return err
	}
	if s.rej != nil {
		s.rejectedRows, s.rej = s.rej.Rows(), nil
	}
	s.written = s.w.Rows()
	return nil
}

// Columns a rejected-rows store adds to the input's (Job.Rejected).
const (
	DropReason = schema.DropReason
	DroppedBy  = schema.DroppedBy
)

// withDropInfo returns the info column (JSON text) with the keys
// drop_reason and dropped_by added to every row's object (a null info
// becomes one); the other keys keep their values as written (numbers
// digit for digit), in sorted order.
func withDropInfo(mem memory.Allocator, col arrow.Array, reason, by *array.String) (arrow.Array, error) {
	info, ok := col.(*array.String)
	if !ok {
		return nil, schema.BadInputf("column %s: want JSON text, have %s", schema.Info, col.DataType())
	}
	bld := array.NewStringBuilder(mem)
	defer bld.Release()
	for i := 0; i < info.Len(); i++ {
		m := map[string]json.RawMessage{}
		if info.IsValid(i) && info.Value(i) != "" {
			if err := json.Unmarshal([]byte(info.Value(i)), &m); err != nil {
				return nil, schema.BadInputf("column %s: rejected row %d: info is not a JSON object: %v", schema.Info, i, err)
			}
		}
		r, _ := json.Marshal(reason.Value(i))
		d, _ := json.Marshal(by.Value(i))
		m[DropReason], m[DroppedBy] = r, d
		text, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		bld.Append(string(text))
	}
	return bld.NewArray(), nil
}

// rejected returns the rows of b the stages dropped, as read, with their
// drop reason and the stage that dropped them.
func (s *streamer) rejected(b *Batch) (arrow.Record, error) {
	idx := make([]int64, 0, b.dropped)
	reason := array.NewStringBuilder(b.mem)
	defer reason.Release()
	by := array.NewStringBuilder(b.mem)
	defer by.Release()
	for i, d := range b.drop {
		if d {
			idx = append(idx, int64(i))
			reason.Append(b.why[i].reason)
			by.Append(b.why[i].by)
		}
	}
	if int(b.rec.NumCols()) != s.rejSchema.NumFields()-2 {
		return nil, schema.Errorf(s.job.In, -1, "", "rejected rows: the batch has %d columns, the store %d", b.rec.NumCols(), s.rejSchema.NumFields()-2)
	}
	rows, err := takeRows(b.rec, idx)
	if err != nil {
		return nil, err
	}
	defer rows.Release()
	cols := append(slices.Clone(rows.Columns()), reason.NewArray(), by.NewArray())
	if s.rejInfo {
		i := fieldIndex(rows.Schema(), schema.Info)
		info, err := withDropInfo(b.mem, rows.Column(i), cols[len(cols)-2].(*array.String), cols[len(cols)-1].(*array.String))
		if err != nil {
			cols[len(cols)-1].Release()
			cols[len(cols)-2].Release()
			return nil, err
		}
		defer info.Release()
		cols[i] = info
	}
	defer cols[len(cols)-1].Release()
	defer cols[len(cols)-2].Release()
	return array.NewRecord(s.rejSchema, cols, rows.NumRows()), nil
}
