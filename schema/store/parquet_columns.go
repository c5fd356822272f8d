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

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"
	"golang.org/x/sync/errgroup"

	"github.com/rftpipe/rftpipe/schema/store/leafcodec"
)

// columnSink writes each record batch as one row group (or several, past
// RowGroupRows) and encodes and compresses the columns of a batch
// concurrently, one goroutine per column, each into its own buffered column
// chunk; the row group is then written in column order, so the file's bytes
// do not depend on the scheduling. pqarrow's FileWriter encodes one column
// after another, which leaves all but one core idle while a store is written.
//
// It lays out the file itself (magic, row groups, footer built with
// arrow-go's metadata builders), so that a row group may also take column
// chunks as they lie in an input file: those of a deferred read's Rest and
// of the columns it decoded that the batch passes on as read (WriteWith);
// and a column that is the very array of an earlier column of the batch
// (returns written as advantages) is encoded once and its bytes written
// twice.
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
	scratch []levels // per column, reused across batches
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
// from it.
func (t *tellWriter) copyFrom(in *inputFile, off, n int64) error {
	var err error
	if fb, ok := t.w.(*fileBuffer); ok {
		err = fb.copyRange(in.File, off, n)
	} else {
		err = copyThrough(t.w, in.File, off, n)
	}
	if err != nil {
		return err
	}
	in.n.Add(n)
	t.n += n
	return nil
}

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
	return &columnSink{out: out, props: props, aprops: aprops, sc: s, pqs: pqs,
		meta: metadata.NewFileMetadataBuilder(pqs, props, kv), scratch: make([]levels, s.NumFields())}, nil
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
// encoded again otherwise.
func (c *columnSink) WriteWith(rec arrow.Record, rest *Rest) error {
	if !c.copies(rest) {
		full, err := mergeRest(c.sc, rec, rest)
		if err != nil {
			return err
		}
		defer full.Release()
		return c.Write(full)
	}
	return c.writeRowGroup(rec, rest)
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
	col  arrow.Array // encoded from this array
	same int         // else a copy of the chunk of this earlier column (-1: not)
	raw  *rawChunk   // else copied from a Rest
}

func (c *columnSink) writeRowGroup(rec arrow.Record, rest *Rest) error {
	n := rec.NumRows()
	plans := make([]chunkPlan, c.sc.NumFields())
	reused := make([]bool, len(plans))
	for i, f := range c.sc.Fields() {
		plans[i].same = -1
		if k := rec.Schema().FieldIndices(f.Name); len(k) > 0 {
			plans[i].col = rec.Column(k[0])
			for j := 0; j < i; j++ {
				if plans[j].col == plans[i].col && arrow.TypeEqual(c.sc.Field(j).Type, f.Type) {
					plans[i].col, plans[i].same, reused[j] = nil, j, true
					break
				}
			}
			// A column the reader decoded and the job passes on unchanged
			// (the very array read) is copied as its input chunk too.
			if plans[i].col != nil && rest != nil && rest.rows == n {
				if ch := rest.sourceChunk(f.Name, plans[i].col); ch != nil && c.copiesChunk(ch, i) && c.keepsStats(ch, i) {
					plans[i].col, plans[i].raw = nil, ch
				}
			}
			continue
		}
		if rest != nil {
			if k := rest.sc.FieldIndices(f.Name); len(k) > 0 {
				plans[i].raw = &rest.chunks[k[0]]
				n = rest.rows
				continue
			}
		}
		return fmt.Errorf("no column %s to write", f.Name)
	}
	rgb := c.meta.AppendRowGroup()
	ccs := make([]*metadata.ColumnChunkMetaDataBuilder, len(plans))
	for i := range ccs {
		ccs[i] = rgb.NextColumnChunk()
	}
	// Encode the new columns concurrently, each into its own buffer: lists
	// of primitives with the leaf codec, other columns with pqarrow.
	cws := make([]chunkWriter, len(plans))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range plans {
		if p.col == nil {
			continue
		}
		g.Go(func() error {
			path := ccs[i].Descr().Path()
			pager, err := file.NewPageWriter(c.out, c.props.CompressionFor(path), c.props.CompressionLevelFor(path),
				ccs[i], c.ordinal, int16(i), c.props.Allocator(), true, nil, nil)
			if err != nil {
				return err
			}
			f := c.sc.Field(i)
			if s, ok := leafcodec.Encodes(c.props, ccs[i].Descr(), f.Type, p.col); ok {
				enc := leafcodec.NewEncoder(pager)
				cws[i] = enc
				return enc.Write(s, p.col.(*array.List), int(c.props.DataPageSize()))
			}
			cw := file.NewColumnChunkWriter(ccs[i], pager, c.props)
			cws[i] = cw
			return c.writeColumn(cw, p.col, f, &c.scratch[i])
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// Then write the chunks in column order.
	var written int64
	copies := make([]*chunkCopy, len(plans))
	for i, p := range plans {
		switch {
		case p.col != nil:
			start := c.out.Tell()
			var buf []byte
			if reused[i] {
				c.out.capture = &buf
			}
			err := cws[i].Close()
			c.out.capture = nil
			if err != nil {
				return err
			}
			written += cws[i].TotalBytesWritten()
			if reused[i] {
				copies[i] = encodedCopy(ccs[i], start, buf)
			}
		case p.same >= 0:
			written += copies[p.same].uncompressed
			if err := c.writeCopy(ccs[i], copies[p.same]); err != nil {
				return err
			}
			contents, from := ccs[i].Contents().MetaData, ccs[p.same].Contents().MetaData
			contents.Encodings, contents.EncodingStats = from.Encodings, from.EncodingStats
			if from.Statistics != nil {
				contents.Statistics = from.Statistics
			}
		default:
			cp, err := rawCopy(p.raw)
			if err != nil {
				return err
			}
			written += cp.uncompressed
			if err := c.writeCopy(ccs[i], cp); err != nil {
				return err
			}
			contents := ccs[i].Contents().MetaData
			setEncodings(&contents.Encodings, p.raw.meta.Encodings())
			contents.EncodingStats = contents.EncodingStats[:0] // the input's page counts are not known
			if cp.stats != nil {
				ccs[i].SetStats(*cp.stats)
			}
		}
	}
	rgb.SetNumRows(int(n))
	if err := rgb.Finish(written, c.ordinal); err != nil {
		return err
	}
	c.ordinal++
	return nil
}

// chunkCopy is a column chunk's pages, to be written as they are: bytes,
// or size bytes of an input file from off.
type chunkCopy struct {
	bytes        []byte
	in           *inputFile
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

// rawCopy describes a Rest's column chunk.
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

// writeCopy writes a chunk's bytes at the current offset and finishes its
// metadata there (pages, then the chunk's metadata, as arrow-go lays a
// chunk out).
func (c *columnSink) writeCopy(cc *metadata.ColumnChunkMetaDataBuilder, cp *chunkCopy) error {
	start := c.out.Tell()
	info := metadata.ChunkMetaInfo{NumValues: cp.values, IndexPageOffset: -1, DataPageOffset: start + cp.data,
		CompressedSize: cp.size, UncompressedSize: cp.uncompressed}
	if cp.dict >= 0 {
		info.DictPageOffset = start + cp.dict
	}
	var err error
	if cp.in != nil {
		err = c.out.copyFrom(cp.in, cp.off, cp.size)
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
		lv.def = lv.def[:0]
		if maxDef > 0 {
			for i := 0; i < col.Len(); i++ {
				lv.def = append(lv.def, b2i(col.IsValid(i)))
			}
		}
		return pqarrow.WriteArrowToColumn(ctx, cw, col, lv.def, nil, f.Nullable)
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

// Close writes the footer.
func (c *columnSink) Close() error {
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
