package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// sink encodes record batches into one output file.
type sink interface {
	Write(rec arrow.Record) error
	Close() error
}

// WriteOption configures Create.
type WriteOption func(*writeConfig)

type writeConfig struct {
	parquet ParquetOptions
	inputs  []string
	ctx     context.Context
	group   *trinity.Group
}

// WriteContext makes connecting to a buffer's database, the checks against
// the inputs and a buffer's inserts stop when ctx is done (a signal); Copy
// passes its own.
func WriteContext(ctx context.Context) WriteOption { return func(c *writeConfig) { c.ctx = ctx } }

// Together returns an option that makes the buffer outputs created with it
// share a transaction where they write into one database (trinity.Group):
// the outputs of one job, committed by CommitAll, one never waiting for
// another's lock.
func Together() WriteOption {
	g := trinity.NewGroup()
	return func(c *writeConfig) { c.group = g }
}

// WithParquet sets the Parquet writer options.
func WithParquet(o ParquetOptions) WriteOption { return func(c *writeConfig) { c.parquet = o } }

// NotOver makes Create refuse a target that is (or resolves to) one of the
// given input stores or one of their files.
func NotOver(inputs ...string) WriteOption {
	return func(c *writeConfig) { c.inputs = append(c.inputs, inputs...) }
}

// Writer writes a store atomically: batches go to a temp file beside the
// target; Commit fsyncs and renames it into place, Abort removes it. A
// target in object storage (s3://) is streamed to a multipart upload (no
// local copy: its parts go up as they fill), which Prepare finishes,
// Commit completes and Abort aborts: nothing is ever visible under its
// name but the whole.
type Writer struct {
	path string
	to   string // the file replaced: path, or the file its link points to (Target)
	tmp  *os.File
	obj  *objstore.Writer // the upload of an s3:// target (no tmp)
	ctx  context.Context
	buf  *bufio.Writer
	sink sink
	// table is the transaction of a TrinityBuffer target (no temp file).
	table *trinity.Writer
	sc    *arrow.Schema
	rows  int64
	// prepared: the file is finished and closed, only the rename is left.
	prepared bool
	done     bool
}

// Create opens a writer for path. The target directory must exist.
func Create(path string, s *arrow.Schema, opts ...WriteOption) (*Writer, error) {
	cfg := writeConfig{ctx: context.Background()}
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkNotInput(cfg.ctx, path, cfg.inputs); err != nil {
		return nil, err
	}
	f, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	if f == TrinityBuffer {
		return createBuffer(cfg.ctx, path, s, cfg.group)
	}
	w := &Writer{path: path, sc: s, ctx: cfg.ctx}
	// out: the sinks' writer, written in order (an object) or with input
	// ranges copied into it in the kernel (a file: fileBuffer); seeker: the
	// IPC writers', which tell their offset.
	var out io.Writer
	var seeker io.WriteSeeker
	if objstore.IsURL(path) {
		if w.obj, err = newObjectOut(cfg.ctx, path); err != nil {
			return nil, err
		}
		w.buf = bufio.NewWriterSize(w.obj, 1<<20)
		out, seeker = w.buf, w.obj
	} else {
		dir := filepath.Dir(path)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, schema.Errorf(path, -1, "", "output directory %s does not exist", dir)
		}
		if w.to, err = Target(path); err != nil {
			return nil, err
		}
		if w.tmp, err = CreateTemp(w.to); err != nil {
			return nil, fmt.Errorf("%s: cannot create output: %w", path, err)
		}
		fb := newFileBuffer(w.tmp)
		w.buf = fb.Writer
		out, seeker = fb, w.tmp
	}
	switch f {
	case Parquet:
		w.sink, err = newParquetSink(out, s, cfg.parquet)
	case ArrowFile, ArrowStream:
		w.sink, err = newIPCSink(seeker, s, f) // the IPC file writer tells its offset
	case JSONL:
		w.sink = newJSONLSink(w.buf, s)
	}
	if err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// Write appends a record batch. A Parquet store may still be encoding it
// when Write returns (it retains what it needs, so the caller may release
// rec): an error then comes from a later Write or from Commit.
func (w *Writer) Write(rec arrow.Record) error {
	if w.prepared || w.done {
		return fmt.Errorf("%s: write: the store is finished", w.path)
	}
	if err := w.sink.Write(rec); err != nil {
		return w.writeError(err)
	}
	w.rows += rec.NumRows()
	return nil
}

// WriteWith appends one batch whose columns are rec's and, for the columns
// rec lacks, those of rest (a deferred read's, see Deferred): a Parquet
// store copies the rest's column chunks as they are when it can, any other
// store decodes them. The output rows are rec's, in order. As with Write,
// the caller may release rec and rest when it returns.
func (w *Writer) WriteWith(rec arrow.Record, rest *Rest) error {
	if rest == nil || w.prepared || w.done {
		return w.Write(rec)
	}
	var err error
	if rs, ok := w.sink.(interface {
		WriteWith(arrow.Record, *Rest) error
	}); ok {
		err = rs.WriteWith(rec, rest)
	} else {
		var full arrow.Record
		if full, err = mergeRest(w.sc, rec, rest); err == nil {
			err = w.sink.Write(full)
			full.Release()
		}
	}
	if err != nil {
		return w.writeError(err)
	}
	w.rows += rest.rows
	return nil
}

// writeError returns the error of a write: as it is when it is bad input
// (a kept rest's check, Rest.Keep), else naming the output.
func (w *Writer) writeError(err error) error {
	if errors.Is(err, schema.ErrBadInput) {
		return err
	}
	return fmt.Errorf("%s: write: %w", w.path, err)
}

// Rows returns the number of rows written so far.
func (w *Writer) Rows() int64 { return w.rows }

// CommitAll commits the outputs of one job so that a failure leaves as
// little behind as it can: every file is first finished and fsynced
// (Prepare), then the buffer tables commit (a transaction, which cannot be
// finished ahead; tables of one database created Together share one), then
// the files are renamed into place. A failure before the renames leaves no
// file behind and no table committed, except when there are tables in two
// databases and the second fails to commit after the first has.
func CommitAll(ws ...*Writer) error {
	for _, w := range ws {
		if err := w.Prepare(); err != nil {
			return err
		}
	}
	for _, tables := range []bool{true, false} {
		for _, w := range ws {
			if (w.table != nil) == tables {
				if err := w.Commit(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Prepare finishes the file and fsyncs it, everything Commit does but the
// rename, so that a job with several outputs can have every one of them
// whole before it renames the first: a write that fails then leaves none
// of them behind. A failed Prepare discards the file. Commit prepares a
// writer Prepare has not.
func (w *Writer) Prepare() error {
	if w.done {
		return errors.New("store: writer already closed")
	}
	if w.prepared {
		return nil
	}
	if w.table != nil {
		w.prepared = true // no more writes; the transaction commits in one step
		return nil
	}
	err := w.sink.Close()
	if err != nil && !errors.Is(err, schema.ErrBadInput) {
		err = fmt.Errorf("write: %w", err)
	} else if err == nil {
		err = w.buf.Flush()
	}
	if w.obj != nil {
		if err == nil {
			err = w.obj.Finish()
		}
	} else {
		if err == nil {
			err = w.tmp.Chmod(0o644) // CreateTemp makes 0600 files; a store is meant to be shared
		}
		if err == nil {
			err = w.tmp.Sync()
		}
		if cerr := w.tmp.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		w.done = true
		if w.obj != nil {
			w.obj.Abort()
		} else {
			os.Remove(w.tmp.Name())
		}
		if errors.Is(err, schema.ErrBadInput) || errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("%s: %w", w.path, err)
	}
	w.prepared = true
	return nil
}

// Commit finishes the file, fsyncs it and renames it over the target.
func (w *Writer) Commit() error {
	if w.done {
		return errors.New("store: writer already closed")
	}
	if w.table != nil {
		w.done = true
		return w.table.Commit()
	}
	if err := w.Prepare(); err != nil {
		return err
	}
	w.done = true
	if w.obj != nil {
		return w.obj.Complete()
	}
	if err := os.Rename(w.tmp.Name(), w.to); err != nil {
		os.Remove(w.tmp.Name())
		return fmt.Errorf("%s: %w", w.path, err)
	}
	syncDir(filepath.Dir(w.to))
	return nil
}

// Abort discards everything written; the target is left untouched. It is
// safe to call after Commit (it then does nothing), so `defer w.Abort()` is
// the idiom.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.table != nil {
		w.table.Abort()
		return
	}
	if w.prepared {
		if w.obj != nil {
			w.obj.Abort()
		} else {
			os.Remove(w.tmp.Name()) // closed by Prepare
		}
		return
	}
	if a, ok := w.sink.(interface{ abort() }); ok {
		a.abort() // stops the work in flight, writes nothing more
	} else if w.sink != nil {
		w.sink.Close()
	}
	if w.obj != nil {
		w.obj.Abort()
		return
	}
	w.tmp.Close()
	os.Remove(w.tmp.Name())
}

// Copy streams every batch of r into a new store at path, atomically, and
// returns the rows written. each, when not nil, sees every batch first (to
// validate it or count progress); its error stops the copy and nothing is
// written.
func Copy(ctx context.Context, r *Reader, path string, each func(arrow.Record) error, opts ...WriteOption) (int64, error) {
	w, err := Create(path, r.Schema(), append([]WriteOption{WriteContext(ctx)}, opts...)...)
	if err != nil {
		return 0, err
	}
	defer w.Abort()
	err = r.ForEach(ctx, func(rec arrow.Record) error {
		if each != nil {
			if err := each(rec); err != nil {
				return err
			}
		}
		return w.Write(rec)
	})
	if err != nil {
		return 0, err
	}
	return w.Rows(), w.Commit()
}

// TempName returns the temp file being written (for signal handlers that must
// clean up).
func (w *Writer) TempName() string {
	if w.tmp == nil {
		return ""
	}
	return w.tmp.Name()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// checkNotInput refuses an output that is one of the input files
// (CheckOutputs' rule; a caller that reads a directory store checks the
// whole rule before it starts).
func checkNotInput(ctx context.Context, out string, inputs []string) error {
	return CheckOutputs(ctx, inputs, []Output{{Path: out}}, true)
}

// arrayRecord builds a record from arrays (retaining them).
func arrayRecord(s *arrow.Schema, cols []arrow.Array, rows int64) arrow.Record {
	return array.NewRecord(s, cols, rows)
}
