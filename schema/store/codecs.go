package store

import (
	"sync"

	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// arrow's Parquet codecs are replaced at init by wrapped ones, for two
// reasons.
//
// Decoding: arrow's decoders panic on corrupt input (a failed CRC, a bad
// snappy block), and for nested columns pqarrow decodes on goroutines of its
// own, where no recover of ours can reach: one flipped byte in a store would
// kill the process. recovering turns the panic into a short result, which
// arrow's page reader reports as an error ("metadata said N bytes
// uncompressed data page, got 0 bytes").
//
// Encoding: arrow's zstd codec builds a new encoder, tables and all, for every
// page it compresses at a level other than the default, which costs as much
// as compressing a small page. zstdLevels keeps one encoder per level
// (EncodeAll is safe for concurrent use).
//
// Decoding zstd: arrow's codec shares one decoder that runs at most 4
// decodes at once (klauspost's default), whatever the cores: zstdLevels
// decodes with a pool of single-stream decoders, as many as the columns,
// pages and row groups decoded concurrently use.

type recovering struct{ compress.Codec }

func (c recovering) Decode(dst, src []byte) (out []byte) {
	defer func() {
		if recover() != nil {
			out = dst[:0]
		}
	}()
	return c.Codec.Decode(dst, src)
}

type zstdLevels struct{ compress.Codec }

var zstdEncoders sync.Map // level → *zstd.Encoder

// zstdWindow is the encoders' window: twice the 1 MiB data page, so that a
// page up to 2 MiB compresses to the same bytes as under the library's
// default window (4 MiB at level 1, the default; 8 MiB from level 3), while
// each of an Encoder's GOMAXPROCS block encoders holds half the history (a
// quarter from level 3): `convert` of 100k × 256 rows, peak RSS at
// GOMAXPROCS 2 516–530 → 490–502 MB, at 16 870–948 → 852–874 MB.
const zstdWindow = 2 << 20

func (z zstdLevels) EncodeLevel(dst, src []byte, level int) []byte {
	if level == compress.DefaultCompressionLevel {
		return z.Encode(dst, src)
	}
	e, ok := zstdEncoders.Load(level)
	if !ok {
		enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
			zstd.WithWindowSize(zstdWindow))
		if err != nil {
			return z.Codec.EncodeLevel(dst, src, level)
		}
		e, _ = zstdEncoders.LoadOrStore(level, enc)
	}
	return e.(*zstd.Encoder).EncodeAll(src, dst[:0])
}

// zstdDecoders holds the decoders not in use.
var zstdDecoders = sync.Pool{New: func() any {
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	return d // nil for options it does not take: arrow's decodes
}}

// Decode decodes src into dst, whose length is the page's uncompressed
// size; corrupt input gives a short result, which arrow's page reader
// reports.
func (z zstdLevels) Decode(dst, src []byte) []byte {
	d, _ := zstdDecoders.Get().(*zstd.Decoder)
	if d == nil {
		return z.Codec.Decode(dst, src)
	}
	defer zstdDecoders.Put(d)
	out, err := d.DecodeAll(src, dst[:0])
	if err != nil {
		return dst[:0]
	}
	return out
}

func init() {
	for _, typ := range []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Gzip, compress.Codecs.Brotli, compress.Codecs.Zstd} {
		c, err := compress.GetCodec(typ)
		if err != nil {
			continue // not built into this arrow
		}
		if typ == compress.Codecs.Zstd {
			c = zstdLevels{c}
		}
		compress.RegisterCodec(typ, recovering{c})
	}
	compress.RegisterCodec(codecLZ4Raw, recovering{lz4Codec{}})
	compress.RegisterCodec(codecLZ4, recovering{lz4Codec{hadoop: true}})
}
