package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema"
)

// parquetSource reads the wanted columns of one Parquet file batch by batch,
// each column on its own goroutine. It drives pqarrow's column readers itself
// (rather than pqarrow's record reader) so that a decoder panic on a corrupt
// file — which pqarrow raises on its own goroutines — is recovered and
// reported as bad input instead of killing the process.
type parquetSource struct {
	pf      *file.Reader
	readers []*pqarrow.ColumnReader
	sc      *arrow.Schema
	batch   int64
	cur     arrow.Record
}

func openParquet(path string, cfg readConfig) (source, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fileError(path, err, "cannot open")
	}
	kept := false
	defer closeUnless(&kept, fh)
	pf, err := file.NewParquetReader(fh)
	if err != nil {
		return nil, fileError(path, err, "not a readable Parquet file")
	}
	if v := pf.MetaData().KeyValueMetadata().FindValue("ARROW:schema"); v != nil {
		if err := checkParquetArrowSchema(*v); err != nil {
			return nil, fileError(path, err, "not a readable Parquet file")
		}
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
	rowGroups := make([]int, pf.NumRowGroups())
	for i := range rowGroups {
		rowGroups[i] = i
	}
	readers, rsc, err := fr.GetFieldReaders(context.Background(), leaves, rowGroups)
	if err != nil {
		return nil, fileError(path, err, "not a readable Parquet file")
	}
	kept = true
	return &parquetSource{pf: pf, readers: readers, sc: rsc, batch: int64(cfg.batchRows)}, nil
}

func (p *parquetSource) Schema() *arrow.Schema { return p.sc }

func (p *parquetSource) Next() (arrow.Record, error) {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	cols := make([]arrow.Array, len(p.readers))
	errs := make([]error, len(p.readers))
	var wg sync.WaitGroup
	for i, rd := range p.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("%v", r)
				}
			}()
			cols[i], errs[i] = readBatch(rd, p.batch)
		}()
	}
	wg.Wait()
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	ended := 0
	for i, err := range errs {
		switch {
		case err == io.EOF:
			ended++
		case err != nil:
			release()
			return nil, fmt.Errorf("column %q: %w", p.sc.Field(i).Name, err)
		}
	}
	if ended == len(cols) {
		return nil, io.EOF
	}
	if ended > 0 {
		release()
		return nil, errors.New("columns have different lengths")
	}
	p.cur = array.NewRecord(p.sc, cols, -1)
	release() // the record holds its own references
	return p.cur, nil
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

func (p *parquetSource) Close() error {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	for _, rd := range p.readers {
		rd.Release()
	}
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
		parquet.WithStats(false),
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
