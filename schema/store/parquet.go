package store

import (
	"context"
	"io"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema"
)

type parquetSource struct {
	pf *file.Reader
	rr pqarrow.RecordReader
}

func openParquet(path string, cfg readConfig) (source, error) {
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, fileError(path, err, "not a readable Parquet file")
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{Parallel: true, BatchSize: int64(cfg.batchRows)}, cfg.mem)
	if err != nil {
		pf.Close()
		return nil, fileError(path, err, "not a readable Parquet file")
	}
	full, err := fr.Schema()
	if err != nil {
		pf.Close()
		return nil, fileError(path, err, "unsupported Parquet schema")
	}
	// Map wanted top-level fields to their leaf columns.
	var leaves []int
	fields := project(full, cfg.columns)
	if len(fields) == 0 {
		pf.Close()
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
	rr, err := fr.GetRecordReader(context.Background(), leaves, nil)
	if err != nil {
		pf.Close()
		return nil, fileError(path, err, "not a readable Parquet file")
	}
	return &parquetSource{pf: pf, rr: rr}, nil
}

func (p *parquetSource) Schema() *arrow.Schema { return p.rr.Schema() }

func (p *parquetSource) Next() (arrow.Record, error) {
	if p.rr.Next() {
		return p.rr.Record(), nil
	}
	if err := p.rr.Err(); err != nil && err != io.EOF {
		return nil, err
	}
	return nil, io.EOF
}

func (p *parquetSource) Close() error {
	p.rr.Release()
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

type parquetSink struct {
	fw *pqarrow.FileWriter
}

func newParquetSink(w io.Writer, s *arrow.Schema, o ParquetOptions) (sink, error) {
	props, err := o.writerProperties(s)
	if err != nil {
		return nil, err
	}
	fw, err := pqarrow.NewFileWriter(s, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	return &parquetSink{fw: fw}, nil
}

func (p *parquetSink) Write(rec arrow.Record) error { return p.fw.Write(rec) }
func (p *parquetSink) Close() error                 { return p.fw.Close() }
