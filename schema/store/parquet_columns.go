package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/rftpipe/rftpipe/schema/store/leafcodec"
)

// columnSink writes each record batch as one row group (or several, past
// RowGroupRows) and encodes and compresses the columns of a batch
// concurrently, one goroutine per column, each into its own buffered column
// chunk; the row group is then written in column order, so the file's bytes
// do not depend on the scheduling. pqarrow's FileWriter encodes one column
// after another, which leaves all but one core idle while a store is written.
//
// Row groups are pipelined too: Write plans a batch's row group, starts its
// columns encoding and returns while they encode, up to window row groups
// ahead of the one being written (the batches' columns are retained until
// then); one goroutine lays the row groups out in the order they were
// written, each once its columns are encoded. An error is returned by the
// next Write or by Close.
//
// It lays out the file itself (magic, row groups, footer built with
// arrow-go's metadata builders), so that a row group may also take column
// chunks as they lie in an input file: those of a deferred read's Rest and
// of the columns it decoded that the batch passes on as read (WriteWith),
// copied in the kernel into ranges of the output reserved for them, in the
// background, one at a time (fileBuffer); and a column that is the very array of an earlier
// column of the batch, or a slice of its data over the same rows (returns
// written as advantages), is encoded once and its bytes written twice.
//
// It computes the Parquet definition and repetition levels itself, so it only
// takes schemas whose columns are flat (see flatColumn): every column of the
// experience store is. Other schemas are written by pqarrow's FileWriter.
type columnSink struct {
	out     *tellWriter
	props   *parquet.WriterProperties
	aprops  pqarrow.ArrowWriterProperties
	sc      *arrow.Schema
	pqs     *pqschema.Schema
	meta    *metadata.FileMetaDataBuilder
	ordinal int16
	// window is how many row groups may encode ahead of the one being laid
	// out; 0 lays each out before Write returns.
	window   int
	encoders chan struct{}  // one per column being encoded
	queue    chan *rowGroup // the row groups to lay out, in order (nil before the first)
	laid     chan struct{}  // closed when the goroutine laying them out returns
	stop     atomic.Bool    // an error or Abort: the work left is skipped
	mu       sync.Mutex
	err      error // the first error
}

// rowGroup is one row group on its way: its columns' plans, encoders and
// metadata.
type rowGroup struct {
	rows    int64
	ordinal int16
	rgb     *metadata.RowGroupMetaDataBuilder
	ccs     []*metadata.ColumnChunkMetaDataBuilder
	plans   []chunkPlan
	rest    *Rest                  // a kept rest's columns (its own reference to the input)
	written []leafcodec.Transcoded // the kept chunks written from pages
	reused  []bool                 // the chunk is written again as a later column
	cws     []chunkWriter          // the encoded columns'
	errs    []error                // the encoded columns'
	encoded chan struct{}          // closed when every column is encoded
}

// tellWriter counts the bytes written (the file offset), and keeps a copy
// of them while capture is set.
type tellWriter struct {
	w       io.Writer
	n       int64
	capture *[]byte
}

func (t *tellWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	if t.capture != nil {
		*t.capture = append(*t.capture, p[:n]...)
	}
	return n, err
}

func (t *tellWriter) Tell() int64 { return t.n }

// copyFrom appends bytes [off, off+n) of an input file, counted as read
// from it, and closes in (the copy's reference to it): a file's copies run
// in the background (fileBuffer), another writer's here.
func (t *tellWriter) copyFrom(in *inputFile, off, n int64) error {
	if fb, ok := t.w.(*fileBuffer); ok {
		if err := fb.copyRange(in, off, n); err != nil {
			return err
		}
		t.n += n
		return nil
	}
	defer in.Close()
	if err := copyThrough(t.w, in.handle, off, n); err != nil {
		return err
	}
	in.n.Add(n)
	t.n += n
	return nil
}

// An input's column chunk of alignMin bytes or more is copied to an offset
// of the output congruent with its own modulo alignBlock, the block size of
// most file systems, after at most alignBlock-1 zero bytes (a gap between
// column chunks, which Parquet readers skip: they read each chunk at its
// offset). Where the file system shares blocks between files (XFS, Btrfs:
// copy_file_range clones block-aligned ranges), the chunk's whole blocks
// are then cloned, not copied: no bytes are written and no space used for
// them. Elsewhere the chunk is copied as before. The layout depends on the
// input alone, so the output's bytes do not depend on the file system.
const (
	alignBlock = 4096
	alignMin   = 64 << 10
)

// zeroBlock is the padding written before an aligned chunk (never written to).
var zeroBlock [alignBlock]byte

// levels holds one column's definition and repetition levels.
type levels struct{ def, rep []int16 }

// flatColumn reports whether t is a primitive type or a list of one: the
// shapes columnSink computes levels for.
func flatColumn(t arrow.DataType) bool {
	if l, ok := t.(*arrow.ListType); ok {
		t = l.Elem()
	}
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.BINARY:
		return true
	}
	return false
}

var parquetMagic = []byte("PAR1")

func newColumnSink(w io.Writer, s *arrow.Schema, props *parquet.WriterProperties) (sink, error) {
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())
	pqs, err := pqarrow.ToParquet(s, props, aprops)
	if err != nil {
		return nil, err
	}
	// The Arrow schema goes in the footer, as pqarrow's FileWriter puts it, so
	// readers get back the exact Arrow types.
	kv := metadata.NewKeyValueMetadata()
	kv.Append("ARROW:schema", base64.StdEncoding.EncodeToString(serializeSchema(s)))
	out := &tellWriter{w: w}
	if _, err := out.Write(parquetMagic); err != nil {
		return nil, err
	}
	procs := runtime.GOMAXPROCS(0)
	return &columnSink{out: out, props: props, aprops: aprops, sc: s, pqs: pqs,
		meta: metadata.NewFileMetadataBuilder(pqs, props, kv), window: procs, encoders: make(chan struct{}, procs)}, nil
}

func (c *columnSink) Write(rec arrow.Record) error {
	n := rec.NumRows()
	step := c.props.MaxRowGroupLength()
	for off := int64(0); off < n || off == 0; off += step {
		part := rec.NewSlice(off, min(off+step, n))
		err := c.writeRowGroup(part, nil)
		part.Release()
		if err != nil || n == 0 {
			return err
		}
	}
	return nil
}

// WriteWith writes one row group of rec's columns and the rest's: the rest's
// column chunks are copied as they are when they are encoded as this file
// encodes its columns (same Parquet type and levels, same codec), decoded and
// encoded again otherwise. The kept rows of a rest (Rest.Keep) are written
// from its pages where the leaf codec takes the column (see plan), decoded
// and encoded otherwise.
func (c *columnSink) WriteWith(rec arrow.Record, rest *Rest) error {
	whole := !c.copies(rest)
	if rest.keep != nil {
		whole = rest.rows > c.props.MaxRowGroupLength()
	}
	if whole {
		full, err := mergeRest(c.sc, rec, rest)
		if err != nil {
			return err
		}
		defer full.Release()
		return c.Write(full)
	}
	if rest.keep != nil {
		// A slice, as Write writes, so the row group is Write's (see
		// chunkPlan.sliced).
		rec = rec.NewSlice(0, rec.NumRows())
		defer rec.Release()
	}
	return c.writeRowGroup(rec, rest)
}

// sameArray reports whether a and b hold the very same values: one array,
// or slices of one array over the same rows (Write cuts a record into row
// groups by slicing each column, so a column set to another's array is a
// slice of the same data), down to their children.
func sameArray(a, b arrow.Array) bool {
	if a == nil || b == nil {
		return false
	}
	return a == b || sameData(a.Data(), b.Data())
}

// sameData reports whether a and b are the same data: the same type, rows,
// offset, buffers and children.
func sameData(a, b arrow.ArrayData) bool {
	if a == b {
		return true
	}
	if a.Offset() != b.Offset() || a.Len() != b.Len() || !arrow.TypeEqual(a.DataType(), b.DataType()) {
		return false
	}
	ab, bb := a.Buffers(), b.Buffers()
	ac, bc := a.Children(), b.Children()
	if len(ab) != len(bb) || len(ac) != len(bc) {
		return false
	}
	for i := range ab {
		if ab[i] != bb[i] {
			return false
		}
	}
	for i := range ac {
		if !sameData(ac[i], bc[i]) {
			return false
		}
	}
	return true
}

// copies reports whether every chunk of rest can be copied into this file.
func (c *columnSink) copies(rest *Rest) bool {
	if rest.rows > c.props.MaxRowGroupLength() {
		return false
	}
	for i, f := range rest.sc.Fields() {
		k := c.sc.FieldIndices(f.Name)
		if len(k) != 1 {
			continue // not written
		}
		if !c.copiesChunk(&rest.chunks[i], k[0]) {
			return false
		}
	}
	return true
}

// keepsStats reports whether a copy of ch as column i keeps the statistics
// the file writes for it (the batch ids' min/max, which sharded reads skip
// row groups by): ch must have them, or the column needs none.
func (c *columnSink) keepsStats(ch *rawChunk, i int) bool {
	if !c.props.StatisticsEnabledFor(c.pqs.Column(i).Path()) {
		return true
	}
	ok, _ := ch.meta.StatsSet()
	return ok
}

// copiesChunk reports whether a raw chunk can be copied as column i of this
// file: the file stores that column alike (Parquet type, levels, codec).
func (c *columnSink) copiesChunk(ch *rawChunk, i int) bool {
	return sameLeaf(ch.descr, c.pqs.Column(i)) && ch.meta.Compression() == c.props.CompressionFor(c.pqs.Column(i).Path())
}

// sameLeaf reports whether two leaf columns store their values alike: same
// physical and logical type, same levels.
func sameLeaf(a, b *pqschema.Column) bool {
	flba := a.PhysicalType() == parquet.Types.FixedLenByteArray
	return a.PhysicalType() == b.PhysicalType() && (!flba || a.TypeLength() == b.TypeLength()) &&
		a.MaxDefinitionLevel() == b.MaxDefinitionLevel() && a.MaxRepetitionLevel() == b.MaxRepetitionLevel() &&
		a.ConvertedType() == b.ConvertedType() && a.LogicalType().Equals(b.LogicalType())
}

// mergeRest returns the record of schema sc with its columns from rec or,
// decoded, from rest (by name).
func mergeRest(sc *arrow.Schema, rec arrow.Record, rest *Rest) (arrow.Record, error) {
	all, err := rest.Join(rec)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	if rest.check != nil {
		if err := rest.check(all); err != nil {
			return nil, err
		}
	}
	cols := make([]arrow.Array, sc.NumFields())
	for i, f := range sc.Fields() {
		k := all.Schema().FieldIndices(f.Name)
		if len(k) == 0 {
			return nil, fmt.Errorf("no column %s to write", f.Name)
		}
		cols[i] = all.Column(k[0])
	}
	return array.NewRecord(sc, cols, rest.rows), nil
}

// chunkWriter is a column chunk being encoded: by the leaf codec or by
// arrow-go's column writer.
type chunkWriter interface {
	Close() error
	TotalBytesWritten() int64
}

// chunkPlan says where a column chunk of a row group comes from.
type chunkPlan struct {
	col  arrow.Array // encoded from this array (retained until laid out)
	same int         // else a copy of the chunk of this earlier column (-1: not)
	// sliced: same's column is a slice of the earlier one's data (Write
	// cuts row groups so), not the very array. The row group's byte count
	// then takes the copy's compressed size, as encoding it again did; the
	// very array's copy counts its uncompressed size. Both as files so
	// far were written.
	sliced bool
	raw    *rawChunk  // else copied from an input file
	cp     *chunkCopy // raw's (holding a reference to its file until copied)
	// kept: else the kept rows of this input chunk, written from its pages
	// (leafcodec.Transcode) from shape to shape.
	kept     *rawChunk
	from, to leafcodec.Shape
}

// writeRowGroup plans the row group of rec and rest's columns, starts
// encoding it and queues it to be laid out (or lays it out, with no window).
func (c *columnSink) writeRowGroup(rec arrow.Record, rest *Rest) error {
	if err := c.failure(); err != nil {
		return err
	}
	rg, err := c.plan(rec, rest)
	if err != nil {
		return err
	}
	c.encode(rg)
	if c.window == 0 {
		c.layOut(rg)
		return c.failure()
	}
	if c.queue == nil {
		c.queue, c.laid = make(chan *rowGroup, c.window), make(chan struct{})
		go func() {
			defer close(c.laid)
			for rg := range c.queue {
				c.layOut(rg)
			}
		}()
	}
	c.queue <- rg
	return nil
}

// plan says where each column chunk of the row group of rec and rest's
// columns comes from, retaining the arrays to encode and the input files to
// copy from, and adds the row group to the footer.
func (c *columnSink) plan(rec arrow.Record, rest *Rest) (*rowGroup, error) {
	n := rec.NumRows()
	plans := make([]chunkPlan, c.sc.NumFields())
	reused := make([]bool, len(plans))
	for i, f := range c.sc.Fields() {
		plans[i].same = -1
		if k := rec.Schema().FieldIndices(f.Name); len(k) > 0 {
			plans[i].col = rec.Column(k[0])
			for j := 0; j < i; j++ {
				if sameArray(plans[j].col, plans[i].col) && arrow.TypeEqual(c.sc.Field(j).Type, f.Type) {
					plans[i].sliced = plans[j].col != plans[i].col
					plans[i].col, plans[i].same, reused[j] = nil, j, true
					break
				}
			}
			// A column the reader decoded and the job passes on unchanged
			// (the very array read) is copied as its input chunk too.
			if plans[i].col != nil && rest != nil && rest.keep == nil && rest.rows == n {
				if ch := rest.sourceChunk(f.Name, plans[i].col); ch != nil && c.copiesChunk(ch, i) && c.keepsStats(ch, i) {
					plans[i].col, plans[i].raw = nil, ch
				}
			}
			continue
		}
		if rest != nil {
			if k := rest.sc.FieldIndices(f.Name); len(k) > 0 {
				n = rest.rows
				if rest.keep == nil {
					plans[i].raw = &rest.chunks[k[0]]
				} else {
					plans[i].kept = &rest.chunks[k[0]]
				}
				continue
			}
		}
		return nil, fmt.Errorf("no column %s to write", f.Name)
	}
	if rest != nil && rest.keep != nil {
		dec, err := c.planKept(plans, rest)
		if err != nil {
			return nil, err
		}
		if dec != nil {
			defer dec.Release() // its arrays retained by the plans below
		}
	}
	for i := range plans {
		if plans[i].raw == nil {
			continue
		}
		cp, err := rawCopy(plans[i].raw)
		if err != nil {
			for _, p := range plans[:i] {
				if p.cp != nil {
					p.cp.in.Close()
				}
			}
			return nil, err
		}
		cp.in.retain()
		plans[i].cp = cp
	}
	for _, p := range plans {
		if p.col != nil {
			p.col.Retain()
		}
	}
	rg := &rowGroup{rows: n, ordinal: c.ordinal, rgb: c.meta.AppendRowGroup(), ccs: make([]*metadata.ColumnChunkMetaDataBuilder, len(plans)),
		plans: plans, reused: reused, cws: make([]chunkWriter, len(plans)), errs: make([]error, len(plans)), encoded: make(chan struct{})}
	if rest != nil && rest.keep != nil {
		own := *rest
		own.in, own.dec = rest.in.retain(), nil
		rg.rest, rg.written = &own, make([]leafcodec.Transcoded, len(plans))
	}
	for i := range rg.ccs {
		rg.ccs[i] = rg.rgb.NextColumnChunk()
	}
	c.ordinal++
	return rg, nil
}

// planKept plans the columns of a kept rest: those the leaf codec writes
// from their pages keep their chunk, the others are decoded for the kept
// rows (returned, nil when none: the caller releases the record).
func (c *columnSink) planKept(plans []chunkPlan, rest *Rest) (arrow.Record, error) {
	var fields []arrow.Field
	var at []int
	for i := range plans {
		p := &plans[i]
		if p.kept == nil {
			continue
		}
		f := c.sc.Field(i)
		var ok bool
		if p.from, p.to, ok = leafcodec.Transcodes(c.props, p.kept.descr, c.pqs.Column(i), f.Type); ok && leafcodec.Decodes(p.kept.meta.Encodings()) {
			continue
		}
		p.kept = nil
		fields, at = append(fields, rest.sc.Field(rest.sc.FieldIndices(f.Name)[0])), append(at, i)
	}
	if len(fields) == 0 {
		return nil, nil
	}
	dec, err := rest.read(arrow.NewSchema(fields, nil), rest.keep)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		plans[i].col = dec.Column(k)
	}
	return dec, nil
}

// encode encodes the row group's new columns, each on its own goroutine
// into its own buffer (up to GOMAXPROCS columns at once, in whatever order
// the goroutines get a slot: the bytes do not depend on it), and closes
// rg.encoded when they are done.
func (c *columnSink) encode(rg *rowGroup) {
	var wg sync.WaitGroup
	for i, p := range rg.plans {
		if p.col == nil && p.kept == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.encoders <- struct{}{}
			defer func() { <-c.encoders }()
			if !c.stop.Load() {
				rg.errs[i] = c.encodeChunk(rg, i)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(rg.encoded)
	}()
}

// levelsPool holds the level buffers of the columns being encoded.
var levelsPool = sync.Pool{New: func() any { return new(levels) }}

// chunkBuffers allocates the buffer a column chunk is encoded into before
// it is laid out (arrow's buffered page writer grows one from nothing for
// every chunk, copying and clearing it at each doubling): the buffer of a
// chunk laid out goes back to a pool, the next chunk starts in it, and a
// buffer grows in place while its capacity allows. Its bytes are not
// cleared: the page writer reads none it has not written.
type chunkBuffers struct{}

// chunkBufferPool holds the buffers of the chunks laid out.
var chunkBufferPool sync.Pool // *[]byte

func (chunkBuffers) Allocate(n int) []byte {
	if b, ok := chunkBufferPool.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

func (a chunkBuffers) Reallocate(n int, b []byte) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	grown := a.Allocate(max(n, 2*cap(b)))[:n]
	copy(grown, b)
	a.Free(b)
	return grown
}

func (chunkBuffers) Free(b []byte) {
	b = b[:0]
	chunkBufferPool.Put(&b)
}

// encodeChunk encodes column i of the row group: kept rows from their
// input pages or, when the leaf codec cannot write them so, decoded
// first (transcode); a list of primitives with the leaf codec, another
// column with pqarrow.
func (c *columnSink) encodeChunk(rg *rowGroup, i int) error {
	cc := rg.ccs[i]
	path := cc.Descr().Path()
	pager, err := file.NewPageWriter(c.out, c.props.CompressionFor(path), c.props.CompressionLevelFor(path),
		cc, rg.ordinal, int16(i), chunkBuffers{}, true, nil, nil)
	if err != nil {
		return err
	}
	f := c.sc.Field(i)
	if rg.plans[i].kept != nil {
		err := c.transcode(rg, i, pager)
		if !errors.Is(err, leafcodec.ErrNotTranscodable) {
			return err
		}
		// Start the chunk again, from the kept rows decoded.
		if rg.plans[i].col, err = rg.rest.column(f.Name); err != nil {
			return err
		}
		rg.plans[i].kept = nil
		if pager, err = file.NewPageWriter(c.out, c.props.CompressionFor(path), c.props.CompressionLevelFor(path),
			cc, rg.ordinal, int16(i), chunkBuffers{}, true, nil, nil); err != nil {
			return err
		}
	}
	col := rg.plans[i].col
	if s, ok := leafcodec.Encodes(c.props, cc.Descr(), f.Type, col); ok {
		enc := leafcodec.NewEncoder(pager)
		rg.cws[i] = enc
		return enc.Write(s, col.(*array.List), int(c.props.DataPageSize()))
	}
	cw := file.NewColumnChunkWriter(cc, pager, c.props)
	rg.cws[i] = cw
	lv := levelsPool.Get().(*levels)
	defer levelsPool.Put(lv)
	return c.writeColumn(cw, col, f, lv)
}

// transcode writes the kept rows of column i's input chunk from its pages.
func (c *columnSink) transcode(rg *rowGroup, i int, pager file.PageWriter) (err error) {
	r, p := rg.rest, &rg.plans[i]
	defer func() {
		if e := recover(); e != nil {
			err = fmt.Errorf("%v", e)
		}
		if err != nil && !errors.Is(err, leafcodec.ErrNotTranscodable) {
			err = fileError(r.path, flattenEOF(err), "row group %d: column %q: unreadable data (file cut, overwritten or corrupt)", r.rg, c.sc.Field(i).Name)
		}
	}()
	pr, err := pagesAt(&chunkReader{in: r.in, chunks: r.chunks, size: r.size}, p.kept.meta)
	if err != nil {
		return err
	}
	d := leafcodec.NewDecoder(p.from, pr, r.groupRows(), p.kept.meta.NumValues())
	defer func() {
		d.Close()
		pageReaders.Put(pr)
	}()
	enc := leafcodec.NewEncoder(pager)
	rg.cws[i] = enc
	rg.written[i], err = enc.Transcode(p.to, d, r.keep, int(c.props.DataPageSize()))
	return err
}

// column decodes the kept rows of the rest's column name.
func (r *Rest) column(name string) (arrow.Array, error) {
	rec, err := r.read(arrow.NewSchema([]arrow.Field{r.sc.Field(r.sc.FieldIndices(name)[0])}, nil), r.keep)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	col := rec.Column(0)
	col.Retain()
	return col, nil
}

// checkKept gives the kept rest's check the record of the row group's
// columns: rec's and the rest's, decoded, or the layout of a column written
// from its pages (decoded when a value is NaN or +Inf).
func (c *columnSink) checkKept(rg *rowGroup) error {
	var fields []arrow.Field
	var cols []arrow.Array
	for i, p := range rg.plans {
		f := c.sc.Field(i)
		a := p.col
		if p.same >= 0 {
			a = rg.plans[p.same].col
		}
		if a == nil {
			if a = rg.written[i].Layout; rg.written[i].NonFinite {
				dec, err := rg.rest.column(f.Name)
				if err != nil {
					return err
				}
				defer dec.Release()
				a = dec
			}
		}
		f.Type = a.DataType()
		fields, cols = append(fields, f), append(cols, a)
	}
	rec := array.NewRecord(arrow.NewSchema(fields, nil), cols, rg.rows)
	defer rec.Release()
	return rg.rest.check(rec)
}

// layOut writes the row group's chunks in column order once they are
// encoded, and releases what it holds; an error stops the writing.
func (c *columnSink) layOut(rg *rowGroup) {
	<-rg.encoded
	defer rg.release()
	if c.stop.Load() {
		return
	}
	for _, err := range rg.errs {
		if err != nil {
			c.fail(err)
			return
		}
	}
	if rg.rest != nil && rg.rest.check != nil {
		if err := c.checkKept(rg); err != nil {
			c.fail(err)
			return
		}
	}
	if err := c.writeChunks(rg); err != nil {
		c.fail(err)
	}
}

// release releases the arrays the row group encoded and the input files
// of the copies it did not make.
func (rg *rowGroup) release() {
	for i := range rg.plans {
		p := &rg.plans[i]
		if p.col != nil {
			p.col.Release()
		}
		if p.cp != nil && p.cp.in != nil {
			p.cp.in.Close()
			p.cp.in = nil
		}
	}
	for _, w := range rg.written {
		if w.Layout != nil {
			w.Layout.Release()
		}
	}
	if rg.rest != nil {
		rg.rest.in.Close()
	}
}

// writeChunks writes the row group's chunks in column order and finishes
// its metadata.
func (c *columnSink) writeChunks(rg *rowGroup) error {
	var written int64
	copies := make([]*chunkCopy, len(rg.plans))
	for i, p := range rg.plans {
		cc := rg.ccs[i]
		switch {
		case p.col != nil || p.kept != nil:
			start := c.out.Tell()
			var buf []byte
			if rg.reused[i] {
				c.out.capture = &buf
			}
			err := rg.cws[i].Close()
			c.out.capture = nil
			if err != nil {
				return err
			}
			written += rg.cws[i].TotalBytesWritten()
			if rg.reused[i] {
				copies[i] = encodedCopy(cc, start, buf)
			}
		case p.same >= 0:
			if p.sliced {
				written += copies[p.same].size
			} else {
				written += copies[p.same].uncompressed
			}
			if err := c.writeCopy(cc, copies[p.same]); err != nil {
				return err
			}
			contents, from := cc.Contents().MetaData, rg.ccs[p.same].Contents().MetaData
			contents.Encodings, contents.EncodingStats = from.Encodings, from.EncodingStats
			if from.Statistics != nil {
				contents.Statistics = from.Statistics
			}
		default:
			written += p.cp.uncompressed
			if err := c.writeCopy(cc, p.cp); err != nil {
				return err
			}
			contents := cc.Contents().MetaData
			setEncodings(&contents.Encodings, p.raw.meta.Encodings())
			contents.EncodingStats = contents.EncodingStats[:0] // the input's page counts are not known
			if p.cp.stats != nil {
				cc.SetStats(*p.cp.stats)
			}
		}
	}
	rg.rgb.SetNumRows(int(rg.rows))
	return rg.rgb.Finish(written, rg.ordinal)
}

func (c *columnSink) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// fail records the first error and stops the work left.
func (c *columnSink) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	c.stop.Store(true)
}

// drain waits for the row groups written to be laid out (or skipped) and
// for the copies in flight.
func (c *columnSink) drain() {
	if c.queue != nil {
		close(c.queue)
		<-c.laid
		c.queue = nil
	}
	if fb, ok := c.out.w.(*fileBuffer); ok {
		if err := fb.wait(); err != nil {
			c.fail(err)
		}
	}
}

// abort stops the work left and waits for the goroutines at work.
func (c *columnSink) abort() {
	c.stop.Store(true)
	c.drain()
}

// chunkCopy is a column chunk's pages, to be written as they are: bytes,
// or size bytes of an input file from off.
type chunkCopy struct {
	bytes        []byte
	in           *inputFile // a reference of the copy's own, closed once copied
	off, size    int64
	dict, data   int64 // offsets of the dictionary (-1: none) and first data page in bytes
	values       int64
	uncompressed int64
	stats        *metadata.EncodedStatistics
}

// encodedCopy describes the chunk just written from start, its bytes in buf
// (the pages, then its metadata).
func encodedCopy(cc *metadata.ColumnChunkMetaDataBuilder, start int64, buf []byte) *chunkCopy {
	md := cc.Contents().MetaData
	cp := &chunkCopy{bytes: buf[:md.TotalCompressedSize], size: md.TotalCompressedSize, dict: -1, data: md.DataPageOffset - start,
		values: md.NumValues, uncompressed: md.TotalUncompressedSize}
	if md.DictionaryPageOffset != nil {
		cp.dict = *md.DictionaryPageOffset - start
	}
	return cp
}

// rawCopy describes a Rest's column chunk (in: the Rest's file, not retained).
func rawCopy(r *rawChunk) (*chunkCopy, error) {
	cp := &chunkCopy{in: r.in, off: r.start, size: r.size, dict: -1, data: r.meta.DataPageOffset() - r.start,
		values: r.meta.NumValues(), uncompressed: r.meta.TotalUncompressedSize()}
	if r.meta.HasDictionaryPage() && r.meta.DictionaryPageOffset() > 0 {
		cp.dict = r.meta.DictionaryPageOffset() - r.start
	}
	if ok, _ := r.meta.StatsSet(); ok {
		st, err := r.meta.Statistics()
		if err != nil {
			return nil, err
		}
		enc, err := st.Encode()
		if err != nil {
			return nil, err
		}
		cp.stats = &enc
	}
	return cp, nil
}

// writeCopy writes a chunk's bytes at the current offset (an input file's,
// in the background) and finishes its
// metadata there (pages, then the chunk's metadata, as arrow-go lays a
// chunk out).
func (c *columnSink) writeCopy(cc *metadata.ColumnChunkMetaDataBuilder, cp *chunkCopy) error {
	if cp.in != nil && cp.size >= alignMin {
		// Zeros up to the offset congruent with the chunk's in the input,
		// so that its whole blocks can be shared (see alignBlock).
		if pad := (cp.off - c.out.Tell()) & (alignBlock - 1); pad > 0 {
			if _, err := c.out.Write(zeroBlock[:pad]); err != nil {
				return err
			}
		}
	}
	start := c.out.Tell()
	info := metadata.ChunkMetaInfo{NumValues: cp.values, IndexPageOffset: -1, DataPageOffset: start + cp.data,
		CompressedSize: cp.size, UncompressedSize: cp.uncompressed}
	if cp.dict >= 0 {
		info.DictPageOffset = start + cp.dict
	}
	var err error
	if in := cp.in; in != nil {
		cp.in = nil // copyFrom closes it
		err = c.out.copyFrom(in, cp.off, cp.size)
	} else {
		_, err = c.out.Write(cp.bytes)
	}
	if err != nil {
		return err
	}
	if err := cc.Finish(info, cp.dict >= 0, false, metadata.EncodingStats{}, nil); err != nil {
		return err
	}
	_, err = cc.WriteTo(c.out)
	return err
}

// setEncodings sets a chunk's encodings list (of the footer's Thrift type).
func setEncodings[E ~int64](dst *[]E, src []parquet.Encoding) {
	out := (*dst)[:0]
	for _, e := range src {
		out = append(out, E(e))
	}
	*dst = out
}

// writeColumn encodes one flat column into its column chunk.
func (c *columnSink) writeColumn(cw file.ColumnChunkWriter, col arrow.Array, f arrow.Field, lv *levels) error {
	// Each column gets its own write context: its scratch buffer is not shared.
	ctx := pqarrow.NewArrowWriteContext(context.Background(), &c.aprops)
	maxDef := cw.Descr().MaxDefinitionLevel()
	list, ok := col.(*array.List)
	if !ok {
		var def []int16 // none for a required column (nil: an empty slice would say no values)
		if maxDef > 0 {
			lv.def = lv.def[:0]
			for i := 0; i < col.Len(); i++ {
				lv.def = append(lv.def, b2i(col.IsValid(i)))
			}
			def = lv.def
		}
		return pqarrow.WriteArrowToColumn(ctx, cw, col, def, nil, f.Nullable)
	}
	// A list column: a group, optional or required, holding a repeated group
	// of elements, optional or required (pqarrow decides; the levels say
	// which). An empty list sits one level below the repeated group's, a null
	// list two below; a null element one below a present one.
	info := cw.LevelInfo()
	empty := info.RepeatedAncestorDefLevel - 1
	elemOptional := maxDef > info.RepeatedAncestorDefLevel
	values := list.ListValues()
	nulls := elemOptional && values.NullN() > 0
	n := list.Len()
	var first, end int64
	if n > 0 {
		first, _ = list.ValueOffsets(0)
		_, end = list.ValueOffsets(n - 1)
	}
	// One level per value, plus one per empty or null list.
	size := int(end - first)
	for i := 0; i < n; i++ {
		if lo, hi := list.ValueOffsets(i); lo == hi {
			size++
		}
	}
	lv.def, lv.rep = grow(lv.def, size), grow(lv.rep, size)
	k := 0
	for i := 0; i < n; i++ {
		lo, hi := list.ValueOffsets(i) // Offsets() ignores a slice's offset
		switch {
		case list.IsNull(i):
			if hi != lo {
				return errors.New("a null list with values is not supported")
			}
			lv.def[k], lv.rep[k] = empty-1, 0
			k++
		case hi == lo:
			lv.def[k], lv.rep[k] = empty, 0
			k++
		default:
			def, rep := lv.def[k:k+int(hi-lo)], lv.rep[k:k+int(hi-lo)]
			for j := range def {
				def[j], rep[j] = maxDef, 1
			}
			rep[0] = 0
			if nulls {
				for j := range def {
					if values.IsNull(int(lo) + j) {
						def[j]--
					}
				}
			}
			k += len(def)
		}
	}
	leaf := array.NewSlice(values, first, end)
	defer leaf.Release()
	return pqarrow.WriteArrowToColumn(ctx, cw, leaf, lv.def, lv.rep, elemOptional)
}

// grow returns s resized to n, reallocating only when it is too small.
func grow(s []int16, n int) []int16 {
	if cap(s) < n {
		return make([]int16, n)
	}
	return s[:n]
}

func b2i(b bool) int16 {
	if b {
		return 1
	}
	return 0
}

// Close waits for the row groups written and writes the footer.
func (c *columnSink) Close() error {
	c.drain()
	if err := c.failure(); err != nil {
		return err
	}
	md, err := c.meta.Finish()
	if err != nil {
		return err
	}
	n, err := md.WriteTo(c.out, nil)
	if err != nil {
		return err
	}
	var size [4]byte
	binary.LittleEndian.PutUint32(size[:], uint32(n))
	if _, err := c.out.Write(size[:]); err != nil {
		return err
	}
	_, err = c.out.Write(parquetMagic)
	return err
}

// serializeSchema returns the Arrow schema as Parquet's ARROW:schema holds
// it: an IPC stream of the schema and no batches (what pqarrow writes).
func serializeSchema(s *arrow.Schema) []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s), ipc.WithAllocator(memory.DefaultAllocator))
	w.Close()
	return buf.Bytes()
}
