package store

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/apache/arrow/go/v17/parquet/compress"
)

// TestLZ4Codecs: LZ4_RAW blocks and Hadoop-framed LZ4 blocks (two frames)
// decode to the page; corrupt input gives a short result, not a panic.
func TestLZ4Codecs(t *testing.T) {
	page := bytes.Repeat([]byte("rftpipe lz4 page "), 500)
	raw, _ := compress.GetCodec(codecLZ4Raw)
	hadoop, _ := compress.GetCodec(codecLZ4)
	block := raw.Encode(nil, page)
	half := len(page) / 2
	var framed []byte
	for _, part := range [][]byte{page[:half], page[half:]} {
		b := raw.Encode(nil, part)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(part)))
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(b)))
		framed = append(framed, b...)
	}
	for _, tc := range []struct {
		name  string
		codec compress.Codec
		in    []byte
		ok    bool
	}{
		{"LZ4_RAW block", raw, block, true},
		{"LZ4 Hadoop frames", hadoop, framed, true},
		{"LZ4 raw block (old writers)", hadoop, block, true},
		{"LZ4_RAW corrupt", raw, block[:len(block)/2], false},
		{"LZ4 corrupt frames", hadoop, framed[:len(framed)-9], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.codec.Decode(make([]byte, len(page)), tc.in)
			if ok := bytes.Equal(out, page); ok != tc.ok {
				t.Fatalf("decoded %d bytes, equal %v, want %v", len(out), ok, tc.ok)
			}
		})
	}
}
