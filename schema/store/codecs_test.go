package store

import (
	"bytes"
	"github.com/klauspost/compress/zstd"
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

// TestZstdWindowKeepsPageBytes: a page of up to 2 MiB compresses to the same
// bytes under the encoders' smaller window as under the library's default
// one, and decodes back.
func TestZstdWindowKeepsPageBytes(t *testing.T) {
	def, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(1)))
	if err != nil {
		t.Fatal(err)
	}
	seed := uint32(7)
	for _, n := range []int{100, 4 << 10, 1 << 20, 2 << 20} {
		page := make([]byte, n)
		for i := range page { // half repetitive, half noise: matches near and far
			seed = seed*1664525 + 1013904223
			page[i] = byte(i % 251)
			if seed>>31 == 1 {
				page[i] = byte(seed >> 16)
			}
		}
		got := zstdLevels{}.EncodeLevel(nil, page, 1)
		if want := def.EncodeAll(page, nil); !bytes.Equal(got, want) {
			t.Errorf("%d bytes: %d compressed bytes, the default window's %d differ", n, len(got), len(want))
		}
		if back := (zstdLevels{}).Decode(make([]byte, n), got); !bytes.Equal(back, page) {
			t.Errorf("%d bytes: decodes back differently", n)
		}
	}
}
