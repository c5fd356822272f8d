package store

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema/store/leafcodec"
)

// tellBuffer collects a column chunk's bytes (a page writer's sink).
type tellBuffer struct{ bytes.Buffer }

func (t *tellBuffer) Tell() int64 { return int64(t.Len()) }

// benchColumn is a tokens-like column: rows lists of 256 int32 values.
func benchColumn(rows int) (arrow.Field, arrow.Array) {
	b := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Int32Builder)
	x := uint32(1)
	for i := 0; i < rows; i++ {
		b.Append(true)
		for j := 0; j < 256; j++ {
			x = x*1664525 + 1013904223
			vb.Append(int32(x>>17) % 32000)
		}
	}
	return arrow.Field{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}, b.NewArray()
}

// BenchmarkLeafChunk encodes and decodes with the leaf codec the zstd
// (level 1, as stores are written) chunk of a
// tokens-like column of 8,192 rows (8 MiB of values, 8 pages of 1 MiB):
// run with -cpu 1,2,4 to see the pages compressed and read ahead in
// parallel.
func BenchmarkLeafChunk(b *testing.B) {
	f, col := benchColumn(8192)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithCompressionLevel(1),
		parquet.WithDictionaryDefault(false), parquet.WithStats(false), parquet.WithRootRepetition(parquet.Repetitions.Required))
	sc, err := pqarrow.ToParquet(arrow.NewSchema([]arrow.Field{f}, nil), props, pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	descr := sc.Column(0)
	s, _ := leafcodec.Encodes(props, descr, f.Type, col)
	encode := func() ([]byte, int64) {
		var out tellBuffer
		pager, err := file.NewPageWriter(&out, compress.Codecs.Zstd, 1, metadata.NewColumnChunkMetaDataBuilder(props, descr), 0, 0, memory.DefaultAllocator, false, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		e := leafcodec.NewEncoder(pager)
		if err := e.Write(s, col.(*array.List), 1<<20); err != nil {
			b.Fatal(err)
		}
		return out.Bytes(), pager.(interface{ NumValues() int64 }).NumValues()
	}
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(col.(*array.List).ListValues().Len() * 4))
		for b.Loop() {
			encode()
		}
	})
	data, values := encode()
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(col.(*array.List).ListValues().Len() * 4))
		for b.Loop() {
			pr, err := file.NewPageReader(bufio.NewReaderSize(bytes.NewReader(data), len(data)+1<<20), values, compress.Codecs.Zstd, memory.DefaultAllocator, nil)
			if err != nil {
				b.Fatal(err)
			}
			d := leafcodec.NewDecoder(s, pr, int64(col.Len()), values)
			for left := col.Len(); left > 0; {
				a, err := d.Read(1024)
				if err != nil {
					b.Fatal(err)
				}
				left -= a.Len()
			}
			d.Close()
		}
	})
}
