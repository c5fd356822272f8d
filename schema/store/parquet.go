package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// parquetSource reads the wanted columns of one Parquet file batch by batch.
// It drives pqarrow's column readers itself (rather than pqarrow's record
// reader) so that a decoder panic on a corrupt file — which pqarrow raises
// on its own goroutines — is recovered and reported as bad input instead of
// killing the process.
//
// Several row groups are decoded at once: a window of up to inFlight row
// groups, each on a goroutine of its own (rowGroupRead) that decodes its
// columns in parallel, one batch ahead of the consumer; batches are
// delivered strictly in file order, and memory holds at most inFlight+1
// decoded batches (and a page buffer per column of each row group).
//
// It proves it read every row the footer promises: each column must return
// exactly the rows its row group holds (pqarrow's readers end a row group
// early, silently, when its pages are cut or overwritten), and the file
// must not change while it is read. A damaged row group's error is reported
// when the reader reaches it, after every batch before it.
type parquetSource struct {
	path    string
	fr      *pqarrow.FileReader
	pf      *file.Reader
	plans   []fieldPlan // per field of sc
	text    []textLeaf  // per field of sc, nil when none holds text read as bytes
	sc      *arrow.Schema
	batch   int64
	rg      int   // the row group being read (-1 before the first)
	left    int64 // its rows not yet read
	read    int64 // rows of the file read so far
	stamp   fileStamp
	cur     arrow.Record
	skip    rowGroupSkipper
	skipped int64 // rows of the row groups skipped (SkipRowGroups)
	// The row groups being decoded: reading is row group rg's, ahead are the
	// next ones to read, in file order; next is the row group after the last
	// one started.
	inFlight int
	reading  *rowGroupRead
	ahead    []*rowGroupRead
	next     int
	ctx      context.Context
	done     chan struct{} // closed by Close: the goroutines stop
	wg       sync.WaitGroup
	// A deferred read (Deferred): the other columns' leaves and schema, the
	// file, its size, and the last batch's Rest.
	restLeaves []int
	restSc     *arrow.Schema
	in         *inputFile
	size       int64
	rest       *Rest
}

// rowGroupRead is one row group decoded on a goroutine of its own, batch by
// batch: out yields its batches in order, then closes.
type rowGroupRead struct {
	rg  int
	out chan decodedBatch
}

// decodedBatch is one batch of a row group's columns as read (errs per
// column), or err when the row group could not be read at all.
type decodedBatch struct {
	cols []arrow.Array
	errs []error
	err  error
}

// rowGroupsInFlight is the number of row groups a Parquet reader decodes at
// once: one per core, up to 4 (each decodes its columns in parallel too).
func rowGroupsInFlight() int { return min(runtime.GOMAXPROCS(0), 4) }

func openParquet(path string, cfg readConfig) (source, error) {
	fh, stamp, err := openHandle(cfg.ctx, path)
	if err != nil {
		return nil, err
	}
	kept := false
	defer closeUnless(&kept, fh)
	in := newInputFile(fh, cfg.bytes)
	pf, err := file.NewParquetReader(in, file.WithReadProps(readProperties()))
	if err != nil {
		return nil, fileError(path, err, "not a readable Parquet file")
	}
	if v := pf.MetaData().KeyValueMetadata().FindValue("ARROW:schema"); v != nil {
		if err := checkParquetArrowSchema(*v); err != nil {
			return nil, fileError(path, err, "not a readable Parquet file")
		}
	}
	if err := checkRowGroups(path, pf.MetaData()); err != nil {
		return nil, err
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{Parallel: true, BatchSize: int64(cfg.batchRows)}, cfg.mem)
	if err != nil {
		return nil, fileError(path, err, "not a readable Parquet file")
	}
	full, err := fr.Schema()
	if err != nil {
		return nil, fileError(path, err, "unsupported Parquet schema")
	}
	// Map wanted top-level fields to their leaf columns.
	var leaves []int
	fields := project(full, cfg.columns)
	if len(fields) == 0 {
		return nil, schema.Errorf(path, -1, "", "store has none of the columns %v", cfg.columns)
	}
	sc := pf.MetaData().Schema
	for j := 0; j < sc.NumColumns(); j++ {
		top := sc.Column(j).ColumnPath()[0]
		for _, fi := range fields {
			if full.Field(fi).Name == top {
				leaves = append(leaves, j)
				break
			}
		}
	}
	// The schema the column readers produce, from readers over no row group.
	readers, rsc, err := fr.GetFieldReaders(context.Background(), leaves, []int{})
	if err != nil {
		return nil, fileError(path, err, "not a readable Parquet file")
	}
	for _, rd := range readers {
		rd.Release()
	}
	kept = true
	plans := planFields(pf, rsc)
	if err := checkDecodable(path, pf, plans); err != nil {
		return nil, err
	}
	text, psc := textLeaves(pf, plans, arrow.NewSchema(rsc.Fields(), trinity.StoreMeta(full.Metadata())))
	p := &parquetSource{path: path, fr: fr, pf: pf, plans: plans, text: text, sc: psc, batch: int64(cfg.batchRows), rg: -1, stamp: stamp, in: in,
		skip: newRowGroupSkipper(pf, cfg), inFlight: max(cfg.rowGroupsInFlight, 1), ctx: cfg.ctx, done: make(chan struct{})}
	if cfg.deferred {
		p.batch = maxDeferredRows(cfg.batchRows) // one batch per row group
		p.size = stamp.size
		if p.restLeaves, p.restSc, err = restColumns(path, fr, full, leaves); err != nil {
			pf.Close()
			return nil, err
		}
	}
	return p, nil
}

// checkRowGroups checks the row counts of a Parquet footer: the file's is
// the sum of its row groups', none negative, and every column chunk holds at
// least a value (or null) per row of its row group. A footer that promises
// rows its column chunks do not hold is refused before any reader trusts it
// (DuckDB counts rows by the footer alone).
func checkRowGroups(path string, md *metadata.FileMetaData) error {
	var sum int64
	for i := range md.RowGroups {
		rg := md.RowGroup(i)
		n := rg.NumRows()
		if n < 0 {
			return schema.Errorf(path, -1, "", "row group %d: footer gives %d rows", i, n)
		}
		for c := 0; c < rg.NumColumns(); c++ {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return fileError(path, err, "row group %d: unreadable column chunk metadata", i)
			}
			if cc.NumValues() < n {
				return schema.Errorf(path, -1, cc.PathInSchema().String(), "row group %d: footer gives %d rows but the column chunk holds %d values (file cut, overwritten or corrupt)", i, n, cc.NumValues())
			}
		}
		sum += n
	}
	if sum != md.NumRows {
		return schema.Errorf(path, -1, "", "footer promises %d rows but its row groups hold %d", md.NumRows, sum)
	}
	return nil
}

func (p *parquetSource) Schema() *arrow.Schema { return p.sc }

// skippedRows implements skipper.
func (p *parquetSource) skippedRows() int64 { return p.skipped }

// wanted reports whether row group rg is read: it has rows and its
// statistics do not rule it out (SkipRowGroups).
func (p *parquetSource) wanted(rg int) bool {
	return p.pf.MetaData().RowGroup(rg).NumRows() > 0 && !p.skip.skips(rg)
}

// fill starts decoding the next wanted row groups until inFlight are
// (the one being read included).
func (p *parquetSource) fill() {
	for p.next < p.pf.NumRowGroups() {
		n := len(p.ahead)
		if p.reading != nil {
			n++
		}
		if n >= p.inFlight {
			return
		}
		rg := p.next
		p.next++
		if !p.wanted(rg) {
			continue
		}
		g := &rowGroupRead{rg: rg, out: make(chan decodedBatch)}
		p.ahead = append(p.ahead, g)
		p.wg.Add(1)
		go p.decode(g)
	}
}

// decode reads row group g.rg batch by batch into g.out, until its end, a
// damaged batch, Close or the context's end.
func (p *parquetSource) decode(g *rowGroupRead) {
	defer p.wg.Done()
	defer close(g.out)
	defer func() {
		if r := recover(); r != nil {
			p.send(g, decodedBatch{err: fileError(p.path, fmt.Errorf("%v", r), "row group %d: unreadable data (file cut, overwritten or corrupt)", g.rg)})
		}
	}()
	readers, err := fieldReaders(p.pf, p.in, p.fr, p.plans, g.rg)
	if err != nil {
		p.send(g, decodedBatch{err: fileError(p.path, flattenEOF(err), "row group %d: unreadable (file cut, overwritten or corrupt)", g.rg)})
		return
	}
	defer releaseReaders(readers)
	for left := p.pf.MetaData().RowGroup(g.rg).NumRows(); left > 0; {
		n := min(p.batch, left)
		cols, errs := readColumns(readers, n, nil)
		whole := true // checked before the consumer owns cols
		for i, err := range errs {
			whole = whole && err == nil && cols[i] != nil && int64(cols[i].Len()) == n
		}
		if !p.send(g, decodedBatch{cols: cols, errs: errs}) || !whole {
			return // a damaged batch: the consumer reports it
		}
		left -= n
	}
}

// send hands b to the consumer; false (b released) once the source is
// closed or its context done.
func (p *parquetSource) send(g *rowGroupRead, b decodedBatch) bool {
	select {
	case g.out <- b:
		return true
	case <-p.done:
	case <-p.ctx.Done():
	}
	releaseAll(b.cols)
	return false
}

// nextRowGroup moves to the next row group read, counting the rows of
// those skipped on the way; false at the end of the file.
func (p *parquetSource) nextRowGroup() bool {
	p.reading = nil
	p.fill()
	end := p.pf.NumRowGroups()
	if len(p.ahead) > 0 {
		end = p.ahead[0].rg
	}
	for p.rg+1 < end { // empty or skipped
		p.rg++
		p.skipped += p.pf.MetaData().RowGroup(p.rg).NumRows()
	}
	if len(p.ahead) == 0 {
		return false
	}
	p.reading, p.ahead = p.ahead[0], p.ahead[1:]
	p.rg = p.reading.rg
	p.left = p.pf.MetaData().RowGroup(p.rg).NumRows()
	p.fill()
	return true
}

func (p *parquetSource) Next() (arrow.Record, error) {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	if p.left == 0 && !p.nextRowGroup() {
		return nil, p.end()
	}
	b, ok := <-p.reading.out
	if !ok { // the goroutine stopped early: the context is done
		if err := p.ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fileError(p.path, errors.New("decoding stopped"), "row group %d: unreadable", p.rg)
	}
	if b.err != nil {
		return nil, b.err
	}
	n := min(p.batch, p.left)
	cols, errs := b.cols, b.errs
	release := func() { releaseAll(cols) }
	for i, err := range errs {
		got := int64(0)
		if cols[i] != nil {
			got = int64(cols[i].Len())
		}
		if err == io.EOF || (err == nil && got != n) {
			release()
			rows := p.pf.MetaData().RowGroup(p.rg).NumRows()
			return nil, p.lost(i, rows-p.left+got, rows)
		}
		if err != nil {
			release()
			return nil, fileError(p.path, err, "row group %d: column %q: unreadable data (file cut, overwritten or corrupt)", p.rg, p.sc.Field(i).Name)
		}
	}
	if err := p.toText(cols); err != nil {
		release()
		return nil, err
	}
	p.rest = nil
	if p.restLeaves != nil {
		if p.left != n {
			release()
			return nil, schema.Errorf(p.path, -1, "", "row group %d: %d rows, more than a deferred read takes", p.rg, p.left)
		}
		rest, err := p.readRest(p.rg, n, cols)
		if err != nil {
			release()
			return nil, err
		}
		p.rest = rest
	}
	p.cur = array.NewRecord(p.sc, cols, n)
	release() // the record holds its own references
	p.left -= n
	p.read += n
	return p.cur, nil
}

// readColumns reads n rows of every column (those kept, see leafReader),
// each on its own goroutine; a decoder's panic is its column's error.
func readColumns(readers []leafReader, n int64, keep []bool) ([]arrow.Array, []error) {
	cols := make([]arrow.Array, len(readers))
	errs := make([]error, len(readers))
	var wg sync.WaitGroup
	for i, rd := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("%v", r)
				}
			}()
			cols[i], errs[i] = rd.read(n, keep)
		}()
	}
	wg.Wait()
	return cols, errs
}

// lastRest returns the Rest of the last batch (deferred reads).
func (p *parquetSource) lastRest() *Rest { return p.rest }

// lost reports a column that ended before its row group did.
func (p *parquetSource) lost(col int, got, rows int64) error {
	return schema.Errorf(p.path, -1, p.sc.Field(col).Name,
		"row group %d: data ends after %d of the %d rows the footer promises (file cut, overwritten or corrupt)", p.rg, got, rows)
}

// end checks, at the end of the file, that every promised row was read and
// that the file did not change meanwhile; it returns io.EOF if so.
func (p *parquetSource) end() error {
	if p.read+p.skipped != p.pf.NumRows() {
		return schema.Errorf(p.path, -1, "", "read %d (and skipped %d) of the %d rows the footer promises", p.read, p.skipped, p.pf.NumRows())
	}
	if err := p.stamp.check(p.path); err != nil {
		return err
	}
	return io.EOF
}

// readBatch reads up to n rows of one column as a single array, or io.EOF.
func readBatch(rd *pqarrow.ColumnReader, n int64) (arrow.Array, error) {
	ch, err := rd.NextBatch(n)
	if err != nil {
		return nil, err
	}
	defer ch.Release()
	switch len(ch.Chunks()) {
	case 0:
		return nil, io.EOF
	case 1:
		if ch.Len() == 0 {
			return nil, io.EOF
		}
		a := ch.Chunk(0)
		a.Retain()
		return a, nil
	}
	return array.Concatenate(ch.Chunks(), memory.DefaultAllocator)
}

// Close stops the row groups' goroutines, waits for them, and closes the
// file.
func (p *parquetSource) Close() error {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	select {
	case <-p.done:
		return nil // closed already
	default:
	}
	close(p.done)
	p.wg.Wait()
	p.reading, p.ahead = nil, nil
	return p.pf.Close()
}

// ParquetOptions tunes the Parquet writer.
type ParquetOptions struct {
	// Codec: "zstd" (default), "snappy", "gzip", "none".
	Codec string
	// Level is the codec's compression level (0: the codec's default).
	Level int
	// RowGroupRows caps the rows per row group (0: one row group per batch written).
	RowGroupRows int64
}

var codecs = map[string]compress.Compression{
	"zstd":   compress.Codecs.Zstd,
	"snappy": compress.Codecs.Snappy,
	"gzip":   compress.Codecs.Gzip,
	"none":   compress.Codecs.Uncompressed,
}

// writerProperties builds the Parquet writer properties for s. Numeric lists
// are written without dictionaries (their values rarely repeat, and a dictionary
// that overflows only costs time); masks and ids keep dictionary/RLE encoding.
func (o ParquetOptions) writerProperties(s *arrow.Schema) (*parquet.WriterProperties, error) {
	name := o.Codec
	if name == "" {
		name = "zstd"
	}
	codec, ok := codecs[name]
	if !ok {
		return nil, schema.BadInputf("unknown Parquet codec %q (valid: zstd, snappy, gzip, none)", name)
	}
	level := o.Level
	if level == 0 && name == "zstd" {
		level = 1 // fastest zstd level: the pipeline is I/O bound, not disk bound
	}
	opts := []parquet.WriterProperty{
		parquet.WithCompression(codec),
		parquet.WithStats(false), // but see batch below
		parquet.WithDataPageSize(1 << 20),
		// The format wants a required root; arrow-go writes a repeated one
		// by default, which readers that honour it (hyparquet) take as one
		// more level of nesting and misread every column.
		parquet.WithRootRepetition(parquet.Repetitions.Required),
	}
	if level != 0 {
		opts = append(opts, parquet.WithCompressionLevel(level))
	}
	if o.RowGroupRows > 0 {
		opts = append(opts, parquet.WithMaxRowGroupLength(o.RowGroupRows))
	}
	if s.HasField(schema.Batch) {
		// min/max of the batch ids per row group: a shard of a sharded job
		// skips the row groups that hold none of its batches.
		opts = append(opts, parquet.WithStatsFor(schema.Batch, true))
	}
	for _, f := range s.Fields() {
		if l, ok := f.Type.(*arrow.ListType); ok {
			switch l.Elem().ID() {
			case arrow.FLOAT32, arrow.FLOAT64, arrow.INT32, arrow.INT64:
				path := f.Name + ".list.element"
				opts = append(opts, parquet.WithDictionaryFor(path, false))
			}
		}
	}
	return parquet.NewWriterProperties(opts...), nil
}

// parquetSink writes any schema with pqarrow's FileWriter, one column after
// another; flat schemas get the concurrent columnSink.
type parquetSink struct {
	fw *pqarrow.FileWriter
}

func newParquetSink(w io.Writer, s *arrow.Schema, o ParquetOptions) (sink, error) {
	props, err := o.writerProperties(s)
	if err != nil {
		return nil, err
	}
	flat := true
	for _, f := range s.Fields() {
		flat = flat && flatColumn(f.Type)
	}
	if flat {
		return newColumnSink(w, s, props)
	}
	return newPQArrowSink(w, s, props)
}

func newPQArrowSink(w io.Writer, s *arrow.Schema, props *parquet.WriterProperties) (sink, error) {
	fw, err := pqarrow.NewFileWriter(s, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	return &parquetSink{fw: fw}, nil
}

func (p *parquetSink) Write(rec arrow.Record) error { return p.fw.Write(rec) }
func (p *parquetSink) Close() error                 { return p.fw.Close() }
