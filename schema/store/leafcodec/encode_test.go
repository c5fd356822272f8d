package leafcodec

import (
	"bufio"
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/rftpipe/rftpipe/schema/store/internal/leaftest"
)

// sink collects a column chunk's bytes (a page writer's WriterTell).
type sink struct{ bytes.Buffer }

func (s *sink) Tell() int64 { return int64(s.Len()) }

// chunk is one list column encoded by the Encoder.
type chunk struct {
	data   []byte
	values int64 // levels
	pages  int
}

// encodeChunk encodes list column col (leaf descr) at the given GOMAXPROCS
// with the Encoder, in pages of about pageSize bytes of values.
func encodeChunk(t *testing.T, props *parquet.WriterProperties, descr *pqschema.Column, col arrow.Array, pageSize, procs int) chunk {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	s, ok := Encodes(props, descr, col.DataType(), col)
	if !ok {
		t.Fatalf("%s: not taken by the Encoder", descr.Path())
	}
	var out sink
	cc := metadata.NewColumnChunkMetaDataBuilder(props, descr)
	pager, err := file.NewPageWriter(&out, props.CompressionFor(descr.Path()), props.CompressionLevelFor(descr.Path()), cc, 0, 0, memory.DefaultAllocator, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEncoder(pager)
	if err := e.Write(s, col.(*array.List), pageSize); err != nil {
		t.Fatal(err)
	}
	n := e.TotalBytesWritten()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return chunk{data: out.Bytes()[:n], values: pager.(interface{ NumValues() int64 }).NumValues(), pages: len(pageCuts(s, col.(*array.List), pageSize)) - 1}
}

// decodeChunk reads a chunk of rows rows back at the given GOMAXPROCS, in
// batches of batch rows, checks the pages it holds, and returns the column.
func decodeChunk(t *testing.T, descr *pqschema.Column, typ arrow.DataType, c chunk, codec compress.Compression, rows, batch int64, procs int) (arrow.Array, error) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	s, ok := ShapeOf(descr, typ)
	if !ok {
		t.Fatalf("%s: no shape", descr.Path())
	}
	pr, err := file.NewPageReader(chunkReader(c.data), c.values, codec, memory.DefaultAllocator, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(s, pr, rows, c.values)
	defer d.Close()
	var got []arrow.Array
	for left := rows; left > 0; left -= int64(got[len(got)-1].Len()) {
		a, err := d.Read(min(batch, left))
		if err != nil {
			return nil, err
		}
		if a.Len() == 0 {
			return nil, fmt.Errorf("a batch of no rows, %d left", left)
		}
		got = append(got, a)
	}
	if len(got) == 0 {
		return array.MakeArrayOfNull(memory.DefaultAllocator, typ, 0), nil
	}
	return array.Concatenate(got, memory.DefaultAllocator)
}

// chunkReader is a page reader's stream over a chunk's bytes; it peeks past
// the end, as a page header may.
func chunkReader(data []byte) parquet.BufferedReader {
	return bufio.NewReaderSize(bytes.NewReader(data), len(data)+1<<20)
}

// TestEncoderPages: a chunk encoded with its pages compressed concurrently
// is byte for byte the chunk encoded one page after another, holds the
// pages the page size asks for, and reads back as the column, read ahead
// or not: many pages, one page, a chunk of no rows, and pages of rows
// without values (empty and null lists).
func TestEncoderPages(t *testing.T) {
	const rows = 600
	empty := func() arrow.Array { // rows empty or null lists
		b := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
		defer b.Release()
		for i := 0; i < rows; i++ {
			if i%3 == 0 {
				b.AppendNull()
			} else {
				b.Append(true)
			}
		}
		return b.NewArray()
	}
	rec := leaftest.Record(rows, false, 5) // no null elements: the Encoder takes none
	for _, tc := range []struct {
		name     string
		col      func() (arrow.Field, arrow.Array)
		pageSize int
		pages    func(int) bool
	}{
		{"many pages", func() (arrow.Field, arrow.Array) { return rec.Schema().Field(0), rec.Column(0) }, 256, func(n int) bool { return n > 20 }},
		{"many pages, booleans", func() (arrow.Field, arrow.Array) { return rec.Schema().Field(4), rec.Column(4) }, 64, func(n int) bool { return n > 20 }},
		{"many pages, not nullable", func() (arrow.Field, arrow.Array) { return rec.Schema().Field(3), rec.Column(3) }, 1000, func(n int) bool { return n > 20 }},
		{"one page", func() (arrow.Field, arrow.Array) { return rec.Schema().Field(1), rec.Column(1) }, 1 << 20, func(n int) bool { return n == 1 }},
		{"no rows", func() (arrow.Field, arrow.Array) { return rec.Schema().Field(2), array.NewSlice(rec.Column(2), 0, 0) }, 256, func(n int) bool { return n == 0 }},
		{"rows without values", func() (arrow.Field, arrow.Array) {
			return arrow.Field{Name: "e", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}, empty()
		}, 16, func(n int) bool { return n == 1 }},
	} {
		for _, codec := range []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Zstd, compress.Codecs.Snappy} {
			t.Run(fmt.Sprintf("%s %v", tc.name, codec), func(t *testing.T) {
				f, col := tc.col()
				props := parquet.NewWriterProperties(parquet.WithCompression(codec), parquet.WithCompressionLevel(1),
					parquet.WithDictionaryDefault(false), parquet.WithStats(false), parquet.WithRootRepetition(parquet.Repetitions.Required))
				sc, err := pqarrow.ToParquet(arrow.NewSchema([]arrow.Field{f}, nil), props, pqarrow.DefaultWriterProps())
				if err != nil {
					t.Fatal(err)
				}
				descr := sc.Column(0)
				serial := encodeChunk(t, props, descr, col, tc.pageSize, 1)
				if !tc.pages(serial.pages) {
					t.Fatalf("%d pages", serial.pages)
				}
				for _, procs := range []int{2, 4, 8} {
					if got := encodeChunk(t, props, descr, col, tc.pageSize, procs); !bytes.Equal(got.data, serial.data) {
						t.Fatalf("GOMAXPROCS %d: a chunk of %d bytes unlike the %d bytes of the pages encoded one after another", procs, len(got.data), len(serial.data))
					}
				}
				for _, procs := range []int{1, 4} {
					for _, batch := range []int64{7, 1000} {
						got, err := decodeChunk(t, descr, f.Type, serial, codec, int64(col.Len()), batch, procs)
						if err != nil {
							t.Fatalf("GOMAXPROCS %d, batches of %d: %v", procs, batch, err)
						}
						if !array.Equal(got, col) {
							t.Fatalf("GOMAXPROCS %d, batches of %d: read back\n%v\nwrote\n%v", procs, batch, got, col)
						}
					}
				}
			})
		}
	}
}

// TestDecoderCorruptPage: a corrupt compressed page (arrow's zstd codec
// panics over it) stops the chunk with the same error whether the pages
// are read ahead, on a goroutine of their own, or not; Close stops the
// reading ahead of a decoder left before the end of its chunk.
func TestDecoderCorruptPage(t *testing.T) {
	rec := leaftest.Record(600, false, 7)
	f, col := rec.Schema().Field(0), rec.Column(0)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithDictionaryDefault(false), parquet.WithStats(false), parquet.WithRootRepetition(parquet.Repetitions.Required))
	sc, err := pqarrow.ToParquet(arrow.NewSchema([]arrow.Field{f}, nil), props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	descr := sc.Column(0)
	c := encodeChunk(t, props, descr, col, 512, 1)
	// The end of the last page's payload (its checksum) made garbage: its
	// header stays readable.
	bad := bytes.Clone(c.data)
	for i := len(bad) - 40; i < len(bad); i++ {
		bad[i] = 0xff
	}
	var errs []string
	for _, procs := range []int{1, 4} {
		_, err := decodeChunk(t, descr, f.Type, chunk{data: bad, values: c.values}, compress.Codecs.Zstd, int64(col.Len()), 50, procs)
		if err == nil {
			t.Fatalf("GOMAXPROCS %d: a corrupt page read", procs)
		}
		errs = append(errs, err.Error())
	}
	if errs[0] != errs[1] || !strings.Contains(errs[0], "CRC check failed") {
		t.Fatalf("errors %q, want the zstd decoder's, the same read ahead or not", errs)
	}
	// A decoder closed after its first batch, pages read ahead: Close
	// returns (twice too).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	s, _ := ShapeOf(descr, f.Type)
	pr, err := file.NewPageReader(chunkReader(c.data), c.values, compress.Codecs.Zstd, memory.DefaultAllocator, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(s, pr, int64(col.Len()), c.values)
	if a, err := d.Read(10); err != nil || a.Len() != 10 {
		t.Fatalf("first batch: %v", err)
	}
	d.Close()
	d.Close()
}

// TestEncoderKeepsSlots: the page slots a chunk was encoded in are kept
// for the next chunk through garbage collections (a sync.Pool drops them,
// and a slot made anew grows its page-sized buffers again): the chunk after
// two collections is encoded in the same slots.
func TestEncoderKeepsSlots(t *testing.T) {
	rec := leaftest.Record(600, false, 5)
	f, col := rec.Schema().Field(0), rec.Column(0)
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithDictionaryDefault(false), parquet.WithStats(false), parquet.WithRootRepetition(parquet.Repetitions.Required))
	sc, err := pqarrow.ToParquet(arrow.NewSchema([]arrow.Field{f}, nil), props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	// kept empties pageSlots and returns the slots it held.
	kept := func() map[*pageSlot]bool {
		slots := map[*pageSlot]bool{}
		for len(pageSlots) > 0 {
			slots[<-pageSlots] = true
		}
		return slots
	}
	kept()
	first := encodeChunk(t, props, sc.Column(0), col, 256, 4)
	slots := kept()
	if len(slots) != 4 {
		t.Fatalf("%d slots kept after a chunk of %d pages at GOMAXPROCS 4, want 4", len(slots), first.pages)
	}
	for sl := range slots {
		pageSlots <- sl
	}
	runtime.GC()
	runtime.GC()
	if again := encodeChunk(t, props, sc.Column(0), col, 256, 4); !bytes.Equal(again.data, first.data) {
		t.Fatal("the chunk encoded again differs")
	}
	after := kept()
	for sl := range slots {
		if !after[sl] {
			t.Fatalf("a chunk after two collections was encoded in new slots: %d kept of the %d before", len(after), len(slots))
		}
	}
	if len(after) != len(slots) {
		t.Fatalf("%d slots kept after the chunk, want the %d before", len(after), len(slots))
	}
	for sl := range after {
		pageSlots <- sl
	}
}
