package store

import (
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/rftpipe/rftpipe/schema"
)

// A job that changes a few columns of a store need not decode the others: a
// Parquet row group whose rows all pass through, in order, can have its
// unchanged column chunks copied into the output as they are, page bytes and
// all, with only their offsets in the footer rewritten. Deferred reading
// gives each batch those columns as a Rest: the reader decodes only the
// columns named by Columns, one batch per row group, and notes where every
// column chunk lies in the file; the Parquet Writer copies the other
// columns' chunks, and those of decoded columns passed on as read, from the
// input file (WriteWith), and a row group whose rows do not all pass through
// decodes them on demand (Rest.Decode).

// Deferred makes the reader of a Parquet store decode only the columns named
// by Columns, one record batch per row group, each with the store's other
// columns as a Rest (Reader.Rest). Use it only on a store Deferrable accepts.
func Deferred() ReadOption { return func(c *readConfig) { c.deferred = true } }

// maxDeferredRows caps the rows of a row group read as one batch, in batches
// of batchRows: a larger row group makes the store not deferrable.
func maxDeferredRows(batchRows int) int64 { return 4 * int64(max(batchRows, DefaultBatchRows)) }

// Deferrable reports whether the store's files can be read with Deferred,
// decoding only the columns decode (store names): every file is Parquet,
// unencrypted, holds at least one of those columns, its other columns are
// flat, of the canonical types (nothing to normalise) and one column chunk
// each, and no row group holds more than a few batches of rows.
func Deferrable(files []string, decode []string, batchRows int) bool {
	for _, path := range files {
		if f, err := FormatOf(path); err != nil || f != Parquet {
			return false
		}
		if !deferrableFile(path, decode, maxDeferredRows(batchRows)) {
			return false
		}
	}
	return len(files) > 0
}

// RowGroupsWithin reports whether no row group of the Parquet files holds
// more than rows rows: a deferred read then gives the batches, one per row
// group, that a read in batches of rows gives.
func RowGroupsWithin(files []string, rows int64) bool {
	for _, path := range files {
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
			return false
		}
		md := pf.MetaData()
		for i := 0; i < pf.NumRowGroups(); i++ {
			if md.RowGroup(i).NumRows() > rows {
				pf.Close()
				return false
			}
		}
		pf.Close()
	}
	return true
}

func deferrableFile(path string, decode []string, maxRows int64) bool {
	fh, _, err := openHandle(objectContext, path)
	if err != nil {
		return false
	}
	defer fh.Close()
	pf, err := file.NewParquetReader(fh)
	if err != nil {
		return false
	}
	md := pf.MetaData()
	if md.WriterVersion().LessThan(metadata.Parquet816FixedVersion) {
		return false
	}
	for i := 0; i < pf.NumRowGroups(); i++ {
		if md.RowGroup(i).NumRows() > maxRows {
			return false
		}
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return false
	}
	full, err := fr.Schema()
	if err != nil {
		return false
	}
	decoded := 0
	for _, f := range full.Fields() {
		if slices.Contains(decode, f.Name) {
			decoded++
			continue
		}
		if !flatColumn(f.Type) || !arrow.TypeEqual(canonicalType(f.Name, f.Type), f.Type) || len(leavesOf(md.Schema, f.Name)) != 1 {
			return false
		}
	}
	return decoded > 0
}

// leavesOf returns the leaf columns of top-level field name.
func leavesOf(sc *pqschema.Schema, name string) []int {
	var out []int
	for j := 0; j < sc.NumColumns(); j++ {
		if sc.Column(j).ColumnPath()[0] == name {
			out = append(out, j)
		}
	}
	return out
}

// Rest holds the columns of one batch that a deferred reader did not decode:
// the column chunks of one whole row group, where they lie in the input
// file. A writer copies them from there (in the kernel where it can); their
// bytes are read only to decode them.
type Rest struct {
	path    string
	in      *inputFile // open until Release
	rg      int
	rows    int64
	md      *metadata.FileMetaData
	size    int64
	sc      *arrow.Schema // the rest's columns, in store order
	chunks  []rawChunk    // one per column of sc
	dec     arrow.Record
	decoded []decodedChunk // the columns the reader decoded (sourceChunk)
	// keep: the row group's rows the batch holds (Keep; nil: every one),
	// rows of them; check is given their columns before they are written.
	keep  []bool
	check func(arrow.Record) error
}

// Keep returns the rows of the batch where keep is true (one value a row)
// as a Rest of their own, for Writer.WriteWith (the rows of its record are
// those rows): a Parquet writer writes the list columns it can straight
// from the input's pages to the output's (leafcodec.Transcode), none of
// their values decoded into an array, and decodes the others for those
// rows alone. check, when not nil, is given the record of the batch's
// columns (the record's and the rest's the output holds, or all of the
// rest's) before they are written: decoded columns, or for a column
// written from its pages the list layout alone (a list of nulls,
// leafcodec.Transcoded) when none of its values is NaN or +Inf. An error
// of check is the write's. The caller releases both Rests.
func (r *Rest) Keep(keep []bool, check func(arrow.Record) error) (*Rest, error) {
	if int64(len(keep)) != r.rows || r.keep != nil {
		return nil, fmt.Errorf("rest of row group %d: %d rows to keep or not, of %d", r.rg, len(keep), r.rows)
	}
	k := &Rest{path: r.path, in: r.in.retain(), rg: r.rg, rows: int64(countTrue(keep)), md: r.md, size: r.size, sc: r.sc,
		chunks: r.chunks, keep: keep, check: check}
	return k, nil
}

// groupRows returns the rows of the rest's row group.
func (r *Rest) groupRows() int64 {
	if r.keep != nil {
		return int64(len(r.keep))
	}
	return r.rows
}

// decodedChunk is a column the reader decoded: the array it read and the
// chunk it read it from.
type decodedChunk struct {
	name  string
	col   arrow.Array
	chunk rawChunk
}

// sourceChunk returns the input chunk of column name when col is the very
// array the reader decoded from it (nil otherwise).
func (r *Rest) sourceChunk(name string, col arrow.Array) *rawChunk {
	for i := range r.decoded {
		if d := &r.decoded[i]; d.name == name && d.col == col {
			return &d.chunk
		}
	}
	return nil
}

// Join returns rec's columns followed by the rest's, decoded: the record of
// every column of the batch's rows (rec holds the columns the reader
// decoded).
func (r *Rest) Join(rec arrow.Record) (arrow.Record, error) {
	dec, err := r.Decode()
	if err != nil {
		return nil, err
	}
	fields := append(append([]arrow.Field(nil), rec.Schema().Fields()...), dec.Schema().Fields()...)
	cols := append(append([]arrow.Array(nil), rec.Columns()...), dec.Columns()...)
	return array.NewRecord(arrow.NewSchema(fields, nil), cols, rec.NumRows()), nil
}

// rawChunk is one column chunk's pages, bytes [start, start+size) of the
// input, with its metadata.
type rawChunk struct {
	leaf  int
	meta  *metadata.ColumnChunkMetaData
	descr *pqschema.Column
	in    *inputFile // the Rest's
	start int64
	size  int64
}

// Schema returns the rest's columns.
func (r *Rest) Schema() *arrow.Schema { return r.sc }

// Rows returns the number of rows of the batch.
func (r *Rest) Rows() int64 { return r.rows }

// Levels returns the number of values (Parquet levels: one per list element,
// one per empty or null list) the footer gives column name of the rest, and
// whether the rest holds it.
func (r *Rest) Levels(name string) (int64, bool) {
	if i := r.sc.FieldIndices(name); len(i) > 0 {
		return r.chunks[i[0]].meta.NumValues(), true
	}
	return 0, false
}

// Decode returns the rest's columns decoded (once; the record is the
// Rest's until Release).
func (r *Rest) Decode() (arrow.Record, error) {
	if r.dec != nil {
		return r.dec, nil
	}
	rec, err := r.read(r.sc, r.keep)
	if err != nil {
		return nil, err
	}
	r.dec = rec
	return rec, nil
}

// Release releases the decoded columns, if any, and the input file.
func (r *Rest) Release() {
	if r.dec != nil {
		r.dec.Release()
		r.dec = nil
	}
	if r.in != nil {
		r.in.Close()
		r.in = nil
	}
}

// read decodes the rest's columns of schema sc: the rows where keep is
// true, every row when keep is nil.
func (r *Rest) read(sc *arrow.Schema, keep []bool) (rec arrow.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fileError(r.path, fmt.Errorf("%v", p), "row group %d: unreadable data (file cut, overwritten or corrupt)", r.rg)
		}
	}()
	// Pages are read as they are decoded, as the reader reads them (Open).
	src := &chunkReader{in: r.in, chunks: r.chunks, size: r.size}
	pf, err := file.NewParquetReader(src, file.WithMetadata(r.md), file.WithReadProps(readProperties()))
	if err != nil {
		return nil, fileError(r.path, err, "not a readable Parquet file")
	}
	rows := r.groupRows()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: rows}, memory.DefaultAllocator)
	if err != nil {
		return nil, fileError(r.path, err, "not a readable Parquet file")
	}
	readers, err := fieldReaders(pf, src, fr, planFields(pf, sc), r.rg)
	if err != nil {
		return nil, fileError(r.path, flattenEOF(err), "row group %d: unreadable (file cut, overwritten or corrupt)", r.rg)
	}
	defer releaseReaders(readers)
	want := rows
	if keep != nil {
		want = int64(countTrue(keep))
	}
	cols, errs := readColumns(readers, rows, keep)
	defer releaseAll(cols)
	for i, err := range errs {
		if err == nil && cols[i].Len() != int(want) {
			err = io.EOF
		}
		if err == io.EOF {
			return nil, schema.Errorf(r.path, -1, sc.Field(i).Name, "row group %d: data ends before the %d rows the footer promises (file cut, overwritten or corrupt)", r.rg, rows)
		}
		if err != nil {
			return nil, fileError(r.path, err, "row group %d: column %q: unreadable data (file cut, overwritten or corrupt)", r.rg, sc.Field(i).Name)
		}
	}
	return array.NewRecord(sc, cols, want), nil
}

func countTrue(keep []bool) int {
	n := 0
	for _, k := range keep {
		if k {
			n++
		}
	}
	return n
}

// chunkReader serves a file's reads from the input file within its
// column chunks: the bytes of any other range are not read.
type chunkReader struct {
	in     *inputFile
	chunks []rawChunk
	size   int64
	pos    int64
}

func (c *chunkReader) ReadAt(p []byte, off int64) (int, error) {
	for _, ch := range c.chunks {
		if off >= ch.start && off < ch.start+ch.size {
			short := off+int64(len(p)) > ch.start+ch.size
			if short {
				p = p[:ch.start+ch.size-off]
			}
			n, err := c.in.ReadAt(p, off)
			if err == nil && short {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return 0, fmt.Errorf("no column chunk holds offset %d", off)
}

func (c *chunkReader) Read(p []byte) (int, error) {
	n, err := c.ReadAt(p, c.pos)
	c.pos += int64(n)
	return n, err
}

func (c *chunkReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		c.pos = off
	case io.SeekCurrent:
		c.pos += off
	case io.SeekEnd:
		c.pos = c.size + off
	}
	return c.pos, nil
}

// chunkRange returns the byte range of a column chunk's pages, checked to
// lie between the file's magic bytes and its footer.
func chunkRange(cc *metadata.ColumnChunkMetaData, dataEnd int64) (start, length int64, ok bool) {
	start, length = cc.DataPageOffset(), cc.TotalCompressedSize()
	if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
		start = cc.DictionaryPageOffset()
	}
	ok = start >= 4 && length > 0 && start+length <= dataEnd && cc.DataPageOffset() < start+length
	return start, length, ok
}

// readRest reads where the column chunks of row group rg lie: those of the
// rest columns, and of the decoded ones (cols, as read).
func (p *parquetSource) readRest(rg int, rows int64, cols []arrow.Array) (*Rest, error) {
	rgm := p.pf.MetaData().RowGroup(rg)
	rest := &Rest{path: p.path, rg: rg, rows: rows, md: p.pf.MetaData(), size: p.size, sc: p.restSc}
	dataEnd := p.size - int64(p.pf.MetaData().Size()) - 8
	for i, leaf := range p.restLeaves {
		name := p.restSc.Field(i).Name
		cc, err := rgm.ColumnChunk(leaf)
		if err != nil {
			return nil, fileError(p.path, err, "row group %d: column %q: unreadable metadata", rg, name)
		}
		start, length, ok := chunkRange(cc, dataEnd)
		if !ok || cc.NumValues() < rows || cc.CryptoMetadata() != nil {
			return nil, schema.Errorf(p.path, -1, name, "row group %d: column chunk metadata out of the file's range or short of its %d rows (file cut, overwritten or corrupt)", rg, rows)
		}
		rest.chunks = append(rest.chunks, rawChunk{leaf: leaf, meta: cc, descr: p.pf.MetaData().Schema.Column(leaf), in: p.in, start: start, size: length})
	}
	// The decoded columns' chunks, for a writer that passes them on as read.
	for i, plan := range p.plans {
		if len(plan.leaves) != 1 {
			continue
		}
		cc, err := rgm.ColumnChunk(plan.leaves[0])
		if err != nil {
			continue
		}
		if start, length, ok := chunkRange(cc, dataEnd); ok && cc.CryptoMetadata() == nil {
			rest.decoded = append(rest.decoded, decodedChunk{name: p.sc.Field(i).Name, col: cols[i],
				chunk: rawChunk{leaf: plan.leaves[0], meta: cc, descr: p.pf.MetaData().Schema.Column(plan.leaves[0]), in: p.in, start: start, size: length}})
		}
	}
	rest.in = p.in.retain()
	return rest, nil
}

// restColumns plans the rest of a deferred read: the leaves not in leaves,
// one per top-level field (Deferrable checked it), and their Arrow schema.
func restColumns(path string, fr *pqarrow.FileReader, full *arrow.Schema, leaves []int) ([]int, *arrow.Schema, error) {
	sc := fr.ParquetReader().MetaData().Schema
	var rest []int
	var fields []arrow.Field
	for _, f := range full.Fields() {
		ls := leavesOf(sc, f.Name)
		if len(ls) == 0 || slices.Contains(leaves, ls[0]) {
			continue
		}
		if len(ls) != 1 {
			return nil, nil, schema.Errorf(path, -1, f.Name, "a nested column cannot be deferred")
		}
		rest = append(rest, ls[0])
		fields = append(fields, arrow.Field{Name: f.Name, Type: f.Type, Nullable: true, Metadata: f.Metadata})
	}
	return rest, arrow.NewSchema(fields, nil), nil
}

func releaseAll(cols []arrow.Array) {
	for _, c := range cols {
		if c != nil {
			c.Release()
		}
	}
}
