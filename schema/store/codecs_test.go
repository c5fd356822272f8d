package store

import (
	"bytes"
	"testing"

	"github.com/apache/arrow/go/v17/parquet/compress"
)

// TestCodecsDecodeCorruptInput: every registered codec decodes its own
// output, and answers corrupt input with a short result instead of a panic.
func TestCodecsDecodeCorruptInput(t *testing.T) {
	page := bytes.Repeat([]byte("rftpipe page "), 100)
	for _, typ := range []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Gzip, compress.Codecs.Brotli, compress.Codecs.Zstd} {
		t.Run(typ.String(), func(t *testing.T) {
			c, err := compress.GetCodec(typ)
			if err != nil {
				t.Fatal(err)
			}
			enc := c.EncodeLevel(nil, page, 3)
			if got := c.Decode(make([]byte, len(page)), enc); !bytes.Equal(got, page) {
				t.Fatalf("round trip: got %d bytes, want the %d bytes encoded", len(got), len(page))
			}
			corrupt := bytes.Clone(enc)
			for i := len(corrupt) / 3; i < len(corrupt); i += 7 {
				corrupt[i] ^= 0x5A
			}
			if got := c.Decode(make([]byte, len(page)), corrupt); len(got) == len(page) && bytes.Equal(got, page) {
				t.Fatal("corrupt input decoded to the original page")
			}
		})
	}
}
