package store

import (
	"sync"

	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// zstdLevels replaces arrow's zstd codec for writing at a set level: arrow's
// builds a new encoder, tables and all, for every page it compresses at a
// level other than the default, which costs as much as the compression of a
// small page. This one keeps one encoder per level; EncodeAll is safe for
// concurrent use. Everything else is arrow's codec.
type zstdLevels struct{ compress.Codec }

var zstdEncoders sync.Map // level → *zstd.Encoder

func (z zstdLevels) EncodeLevel(dst, src []byte, level int) []byte {
	if level == compress.DefaultCompressionLevel {
		return z.Encode(dst, src)
	}
	e, ok := zstdEncoders.Load(level)
	if !ok {
		enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)))
		if err != nil {
			return z.Codec.EncodeLevel(dst, src, level)
		}
		e, _ = zstdEncoders.LoadOrStore(level, enc)
	}
	return e.(*zstd.Encoder).EncodeAll(src, dst[:0])
}

func init() {
	if c, err := compress.GetCodec(compress.Codecs.Zstd); err == nil {
		compress.RegisterCodec(compress.Codecs.Zstd, zstdLevels{c})
	}
}
