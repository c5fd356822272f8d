package leafcodec

import (
	"bytes"
	"encoding/binary"
	"runtime"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/rftpipe/rftpipe/schema/store/hugepage"
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
	s, ok := encodesShape(props, descr, t)
	if !ok {
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

// encodesShape returns the shape of list column descr of type t when the
// codec writes it under props as pqarrow would, whatever the values.
func encodesShape(props *parquet.WriterProperties, descr *pqschema.Column, t arrow.DataType) (Shape, bool) {
	s, ok := ShapeOf(descr, t)
	path := descr.Path()
	return s, ok && s.list && props.DataPageVersion() == parquet.DataPageV1 && props.EncodingFor(path) == parquet.Encodings.Plain &&
		!(props.DictionaryEnabledFor(path) && s.width > 0) && !props.StatisticsEnabledFor(path) && props.FileEncryptionProperties() == nil
}

// Close writes the chunk's pages and metadata to the pager's sink.
func (e *Encoder) Close() error { return e.pager.Close(false, false) }

// TotalBytesWritten returns the bytes of the chunk's pages, headers included.
func (e *Encoder) TotalBytesWritten() int64 { return e.written }

// Write encodes the rows of l in pages of about pageSize bytes of values.
// Up to pagesInFlight pages are encoded and compressed at once, each on a
// goroutine of its own, and written to the pager in order: the chunk's
// bytes do not depend on how many are.
func (e *Encoder) Write(s Shape, l *array.List, pageSize int) error {
	cuts := pageCuts(s, l, pageSize)
	n := len(cuts) - 1
	w := min(pagesInFlight(), n)
	// Page i is encoded into slot i%w, which page i+w reuses once page i is
	// written.
	slots := make([]*pageSlot, w)
	for i := range slots {
		slots[i] = takeSlot()
	}
	defer func() {
		for _, sl := range slots {
			giveSlot(sl)
		}
	}()
	done := make([]chan struct{}, n)
	start := func(i int) {
		done[i] = make(chan struct{})
		go func() {
			slots[i%w].encode(e.pager, s, l, cuts[i], cuts[i+1])
			close(done[i])
		}()
	}
	for i := 0; i < w && w > 1; i++ {
		start(i)
	}
	for i := 0; i < n; i++ {
		sl := slots[i%w]
		if w > 1 {
			<-done[i]
		} else {
			sl.encode(e.pager, s, l, cuts[i], cuts[i+1])
		}
		if err := e.writePage(sl); err != nil {
			for j := i + 1; j < min(i+w, n); j++ {
				<-done[j] // the pages in flight: none outlives Write
			}
			return err
		}
		if w > 1 && i+w < n {
			start(i + w)
		}
	}
	return nil
}

// writePage writes the page slot sl holds through the pager.
func (e *Encoder) writePage(sl *pageSlot) error {
	dp := file.NewDataPageV1(memory.NewBufferBytes(sl.data), int32(sl.levels), parquet.Encodings.Plain,
		parquet.Encodings.RLE, parquet.Encodings.RLE, int32(len(sl.raw)))
	written, err := e.pager.WriteDataPage(dp)
	dp.Release()
	e.written += written
	return err
}

// pagesInFlight is how many pages of one column chunk the Encoder
// compresses, and the Decoder reads ahead, at once: up to 4, and no more
// than GOMAXPROCS (1: none in parallel). Columns are encoded and decoded
// concurrently too, so a few pages a column keep every core busy on the
// big columns while memory stays a few pages a column.
func pagesInFlight() int { return min(runtime.GOMAXPROCS(0), 4) }

// pageCuts returns the rows at which the pages of l start, and l.Len():
// a page takes whole rows, at least one, up to about pageSize bytes of
// values.
func pageCuts(s Shape, l *array.List, pageSize int) []int {
	bitsPerValue := max(s.width*8, 1)
	cuts := []int{0}
	for r0 := 0; r0 < l.Len(); {
		first, _ := l.ValueOffsets(r0)
		r1 := r0 + 1
		for r1 < l.Len() {
			if _, hi := l.ValueOffsets(r1); int(hi-first)*bitsPerValue > pageSize*8 {
				break
			}
			r1++
		}
		cuts = append(cuts, r1)
		r0 = r1
	}
	return cuts
}

// pageSlot holds one page being encoded: its bytes as encoded (page) and
// as written (data: compressed into packed, or page's). Slots go back to
// pageSlots when a chunk is written, their buffers grown to a page's size,
// for the next chunk.
type pageSlot struct {
	page, packed bytes.Buffer
	// the mappings page and packed were given (package hugepage), nil
	// while their buffers are the heap's
	pageMem, packedMem []byte
	rep, def           runWriter
	raw, data          []byte // the page's bytes, and as written
	levels             int
	vals               []byte // a Transcode's page (see transcoder), kept for the next
}

// pageSlots keeps the slots of the chunks written, as many as the chunks
// encoded at once use (a column a core, pagesInFlight slots a column): a
// free list the garbage collector does not empty, as it does a sync.Pool
// at every cycle, so that a slot's page-sized buffers are grown (cleared
// and faulted in) once a process, not again after each collection.
var pageSlots = make(chan *pageSlot, 4*runtime.GOMAXPROCS(0))

// takeSlot returns a slot of pageSlots', or a new one.
func takeSlot() *pageSlot {
	select {
	case sl := <-pageSlots:
		return sl
	default:
		return new(pageSlot)
	}
}

// giveSlot puts sl back in pageSlots, or frees it when enough are kept.
func giveSlot(sl *pageSlot) {
	select {
	case pageSlots <- sl:
	default:
		sl.free()
	}
}

// encode encodes rows [r0, r1) of l as a page's levels and values, and
// compresses them with pager's codec.
func (p *pageSlot) encode(pager file.PageWriter, s Shape, l *array.List, r0, r1 int) {
	p.levels = 0
	for r := r0; r < r1; r++ {
		lo, hi := l.ValueOffsets(r)
		p.row(s, l.IsNull(r), int(hi-lo))
	}
	first, _ := l.ValueOffsets(r0)
	_, end := l.ValueOffsets(r1 - 1)
	p.seal(pager, p.rep.size()+p.def.size()+plainSize(s, int(end-first)), func(page *bytes.Buffer) { appendPlain(page, s, l.ListValues().Data(), int(first), int(end)) })
}

// row adds the levels of one row: a null list (holding no values), or a
// list of n values.
func (p *pageSlot) row(s Shape, null bool, n int) {
	switch {
	case null:
		p.rep.run(0, 1)
		p.def.run(s.nullDef, 1)
	case n == 0:
		p.rep.run(0, 1)
		p.def.run(s.emptyDef, 1)
	default:
		p.rep.run(0, 1)
		p.rep.run(1, n-1)
		p.def.run(s.maxDef, n)
	}
	p.levels += max(n, 1)
}

// seal lays out the page of size bytes: the levels of its rows, then its
// values (written by values), compressed with pager's codec.
func (p *pageSlot) seal(pager file.PageWriter, size int, values func(page *bytes.Buffer)) {
	p.page.Reset()
	p.pageMem = reserve(&p.page, p.pageMem, size)
	p.rep.flushTo(&p.page)
	p.def.flushTo(&p.page)
	values(&p.page)
	p.compress(pager, p.page.Bytes())
}

// compress takes raw as the page's bytes, and compresses them with pager's
// codec.
func (p *pageSlot) compress(pager file.PageWriter, raw []byte) {
	p.raw, p.data = raw, raw
	if pager.HasCompressor() {
		p.packed.Reset()
		p.packedMem = reserve(&p.packed, p.packedMem, len(raw)+len(raw)/4) // room for what does not compress
		p.data = pager.Compress(&p.packed, raw)
	}
}

// reserve gives buf, empty, room for n bytes at once, not by doublings from
// nothing (each a buffer cleared afresh): from an eighth of a huge page up
// in a mapping of package hugepage's (mem, the one buf had, given back),
// below from the heap. It returns buf's mapping.
func reserve(buf *bytes.Buffer, mem []byte, n int) []byte {
	switch {
	case buf.Cap() >= n:
	case n < hugepage.Size/8:
		buf.Grow(n)
	default:
		hugepage.Free(mem)
		mem = hugepage.Alloc(n)
		*buf = *bytes.NewBuffer(mem[:0])
	}
	return mem
}

// free gives the slot's mappings back; nothing may use the slot after.
func (p *pageSlot) free() {
	hugepage.Free(p.pageMem)
	hugepage.Free(p.packedMem)
}

// plainSize returns the bytes of n values PLAIN-encoded.
func plainSize(s Shape, n int) int {
	if s.width > 0 {
		return n * s.width
	}
	return int(bitutil.BytesForBits(int64(n)))
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

// size returns at least the bytes flushTo writes.
func (w *runWriter) size() int {
	return 4 + len(w.out) + binary.MaxVarintLen64 + 1
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
