package leafcodec

import (
	"bytes"
	"encoding/binary"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"
)

// Encoder writes the column chunk of a list column the leaf codec
// takes: data pages v1 of whole rows, values PLAIN, levels RLE runs (a
// row's repetition levels are two runs, a page's definition levels
// usually one).
type Encoder struct {
	pager   file.PageWriter
	written int64
}

// NewEncoder returns an encoder of one column chunk through pager.
func NewEncoder(pager file.PageWriter) *Encoder { return &Encoder{pager: pager} }

// Encodes returns the leaf codec's shape for column descr of type t when
// the codec writes it under props as pqarrow would (PLAIN values, data pages
// v1, no dictionary, statistics or encryption) and col, a list, has no null
// elements.
func Encodes(props *parquet.WriterProperties, descr *pqschema.Column, t arrow.DataType, col arrow.Array) (Shape, bool) {
	s, ok := ShapeOf(descr, t)
	path := descr.Path()
	if !ok || !s.list || props.DataPageVersion() != parquet.DataPageV1 || props.EncodingFor(path) != parquet.Encodings.Plain ||
		(props.DictionaryEnabledFor(path) && s.width > 0) || props.StatisticsEnabledFor(path) || props.FileEncryptionProperties() != nil {
		return s, false
	}
	l, ok := col.(*array.List)
	if !ok || l.ListValues().NullN() > 0 || (s.nullDef < 0 && l.NullN() > 0) {
		return s, false
	}
	// A null list holds no values in Parquet; Arrow lets it span some.
	for i := 0; l.NullN() > 0 && i < l.Len(); i++ {
		if lo, hi := l.ValueOffsets(i); l.IsNull(i) && hi != lo {
			return s, false
		}
	}
	return s, true
}

// Close writes the chunk's pages and metadata to the pager's sink.
func (e *Encoder) Close() error { return e.pager.Close(false, false) }

// TotalBytesWritten returns the bytes of the chunk's pages, headers included.
func (e *Encoder) TotalBytesWritten() int64 { return e.written }

// Write encodes the rows of l in pages of about pageSize bytes of values.
func (e *Encoder) Write(s Shape, l *array.List, pageSize int) error {
	values := l.ListValues().Data()
	bitsPerValue := max(s.width*8, 1)
	var page, packed bytes.Buffer
	var rep, def runWriter
	for r0 := 0; r0 < l.Len(); {
		first, _ := l.ValueOffsets(r0)
		r1, levels := r0, 0
		for r1 < l.Len() {
			lo, hi := l.ValueOffsets(r1)
			if r1 > r0 && int(hi-first)*bitsPerValue > pageSize*8 {
				break
			}
			switch {
			case l.IsNull(r1):
				rep.run(0, 1)
				def.run(s.nullDef, 1)
			case lo == hi:
				rep.run(0, 1)
				def.run(s.emptyDef, 1)
			default:
				rep.run(0, 1)
				rep.run(1, int(hi-lo-1))
				def.run(s.maxDef, int(hi-lo))
			}
			levels += max(int(hi-lo), 1)
			r1++
		}
		_, end := l.ValueOffsets(r1 - 1)
		page.Reset()
		rep.flushTo(&page)
		def.flushTo(&page)
		appendPlain(&page, s, values, int(first), int(end))
		data := page.Bytes()
		if e.pager.HasCompressor() {
			packed.Reset()
			data = e.pager.Compress(&packed, data)
		}
		dp := file.NewDataPageV1(memory.NewBufferBytes(data), int32(levels), parquet.Encodings.Plain,
			parquet.Encodings.RLE, parquet.Encodings.RLE, int32(page.Len()))
		n, err := e.pager.WriteDataPage(dp)
		dp.Release()
		if err != nil {
			return err
		}
		e.written += n
		r0 = r1
	}
	return nil
}

// appendPlain appends values [lo, hi) of a values array PLAIN-encoded.
func appendPlain(buf *bytes.Buffer, s Shape, values arrow.ArrayData, lo, hi int) {
	if hi <= lo {
		return
	}
	raw := values.Buffers()[1].Bytes()
	off := values.Offset()
	if s.width > 0 {
		buf.Write(raw[(off+lo)*s.width : (off+hi)*s.width])
		return
	}
	n := buf.Len()
	buf.Write(make([]byte, bitutil.BytesForBits(int64(hi-lo))))
	bitutil.CopyBitmap(raw, off+lo, hi-lo, buf.Bytes()[n:], 0)
}

// runWriter collects levels as runs of one value, merging neighbours, and
// writes them as RLE runs of the hybrid encoding (levels of at most 8 bits).
type runWriter struct {
	out   []byte
	value int16
	count int
}

func (w *runWriter) run(v int16, n int) {
	if n == 0 {
		return
	}
	if w.count > 0 && v != w.value {
		w.emit()
	}
	w.value = v
	w.count += n
}

func (w *runWriter) emit() {
	w.out = binary.AppendUvarint(w.out, uint64(w.count)<<1)
	w.out = append(w.out, byte(w.value))
	w.count = 0
}

// flushTo writes the runs to buf behind their 4-byte length, as data pages
// v1 hold levels, and starts over.
func (w *runWriter) flushTo(buf *bytes.Buffer) {
	if w.count > 0 {
		w.emit()
	}
	var size [4]byte
	binary.LittleEndian.PutUint32(size[:], uint32(len(w.out)))
	buf.Write(size[:])
	buf.Write(w.out)
	w.out = w.out[:0]
}
