package store

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/pierrec/lz4/v4"
)

// arrow-go decodes no LZ4 Parquet pages, and DuckDB, polars and arrow-rs
// write them (LZ4_RAW, and the deprecated LZ4). Both are registered here
// for reading (and LZ4_RAW for writing): LZ4_RAW pages are one raw LZ4
// block; LZ4 pages are Hadoop-framed blocks (big-endian uncompressed and
// compressed sizes before each block) or, from older writers, one raw
// block, tried in that order as Arrow C++ does.

// Parquet's codec numbers (parquet.thrift CompressionCodec).
const (
	codecLZ4    = compress.Compression(5)
	codecLZ4Raw = compress.Compression(7)
)

type lz4Codec struct{ hadoop bool }

var errLZ4Stream = errors.New("lz4: Parquet pages are blocks; no streaming codec")

func (lz4Codec) NewReader(io.Reader) io.ReadCloser  { return errStream{} }
func (lz4Codec) NewWriter(io.Writer) io.WriteCloser { return errStream{} }
func (lz4Codec) NewWriterLevel(io.Writer, int) (io.WriteCloser, error) {
	return nil, errLZ4Stream
}

func (c lz4Codec) Encode(dst, src []byte) []byte { return c.EncodeLevel(dst, src, 0) }

// EncodeLevel writes one raw block (the level is ignored).
func (lz4Codec) EncodeLevel(dst, src []byte, _ int) []byte {
	if n := lz4.CompressBlockBound(len(src)); cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:cap(dst)]
	n, err := lz4.CompressBlock(src, dst, nil)
	if err != nil || (n == 0 && len(src) > 0) {
		return nil
	}
	return dst[:n]
}

func (lz4Codec) CompressBound(n int64) int64 { return int64(lz4.CompressBlockBound(int(n))) }

// Decode decodes into dst, whose length is the page's uncompressed size; a
// short result is reported by arrow's page reader as a corrupt page.
func (c lz4Codec) Decode(dst, src []byte) []byte {
	if c.hadoop {
		if out, ok := decodeHadoop(dst, src); ok {
			return out
		}
	}
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return dst[:0]
	}
	return dst[:n]
}

// decodeHadoop decodes Hadoop-framed LZ4 blocks.
func decodeHadoop(dst, src []byte) ([]byte, bool) {
	out := 0
	for len(src) > 0 {
		if len(src) < 8 {
			return nil, false
		}
		raw, comp := int(binary.BigEndian.Uint32(src)), int(binary.BigEndian.Uint32(src[4:]))
		src = src[8:]
		if comp > len(src) || raw > len(dst)-out {
			return nil, false
		}
		n, err := lz4.UncompressBlock(src[:comp], dst[out:out+raw])
		if err != nil || n != raw {
			return nil, false
		}
		out += n
		src = src[comp:]
	}
	return dst[:out], out == len(dst)
}

type errStream struct{}

func (errStream) Read([]byte) (int, error)  { return 0, errLZ4Stream }
func (errStream) Write([]byte) (int, error) { return 0, errLZ4Stream }
func (errStream) Close() error              { return nil }
