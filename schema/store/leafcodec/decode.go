package leafcodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
)

// ByteStreamSplit is Parquet's BYTE_STREAM_SPLIT encoding, which arrow-go
// v17 neither names nor decodes (the Decoder does).
const ByteStreamSplit = parquet.Encoding(9)

// Decoder reads one column chunk of a Shape column, record batch by
// record batch, from its pages: levels decoded run by run, values copied as
// bytes (PLAIN), gathered (dictionary) or de-interleaved (BYTE_STREAM_SPLIT).
type Decoder struct {
	s    Shape
	pr   file.PageReader
	dict []byte // the dictionary page's values, PLAIN
	// The current data page: its levels, read a window at a time from
	// repR and defR (rep and def: the window, pos: the next level of it to
	// use), and its values as PLAIN bytes (or bits, for booleans) from vpos
	// on.
	repR, defR hybridReader[int16]
	win        *levelWindow
	rep, def   []int16
	pos        int
	vals       []byte
	vpos       int     // in values, or in bits for booleans
	open       bool    // the last row read may take more elements
	skipping   bool    // the last row read is not kept (ReadRows)
	perRow     float64 // bytes of values per row in the chunk: a batch's capacity
	left       int64   // values (levels) of the chunk not yet loaded
	// The pages read ahead (nil until the first is wanted, or when they are
	// read as they are wanted), and closing stop stops reading ahead.
	ahead chan fetched
	stop  chan struct{}
}

// Decodes reports whether the Decoder decodes a column chunk that lists the
// given encodings (the footer's).
func Decodes(encs []parquet.Encoding) bool {
	for _, e := range encs {
		switch e {
		case parquet.Encodings.Plain, parquet.Encodings.PlainDict, parquet.Encodings.RLE, parquet.Encodings.RLEDict, ByteStreamSplit:
		default:
			return false
		}
	}
	return true
}

// NewDecoder reads a chunk of the given rows and values (levels) from
// its pages.
func NewDecoder(s Shape, pr file.PageReader, rows, values int64) *Decoder {
	d := &Decoder{s: s, pr: pr, left: min(values, maxChunkValues), win: levelWindows.Get().(*levelWindow)}
	if rows > 0 {
		d.perRow = float64(values) * max(float64(s.width), 0.125) / float64(rows)
	}
	return d
}

// The leaf decoder takes a footer's or a page header's word for the values
// they hold only up to these counts: a corrupt count must not size an
// allocation. Writers cut pages at about a megabyte (arrow-go, arrow-rs,
// DuckDB, parquet-mr): 1<<24 levels is a page of 16M values.
const (
	maxChunkValues = 1 << 31
	maxPageValues  = 1 << 24
)

// errLevels reports levels no writer of the shape writes.
var errLevels = errors.New("definition or repetition levels out of the column's range")

// next decodes the next window of levels, from the next data page when the
// current one has none left; false at the end of the chunk.
func (d *Decoder) next() (bool, error) {
	for d.defR.left == 0 {
		ok, err := d.nextPage()
		if !ok || err != nil {
			return false, err
		}
	}
	k := min(d.defR.left, len(d.win.def))
	d.pos, d.def = 0, d.win.def[:k]
	if err := d.defR.read(d.def); err != nil {
		return false, err
	}
	if d.s.list {
		d.rep = d.win.rep[:k]
		if err := d.repR.read(d.rep); err != nil {
			return false, err
		}
	}
	return true, nil
}

// nextPage loads the next data page; false at the end of the chunk.
func (d *Decoder) nextPage() (bool, error) {
	for {
		p, ok, err := d.fetch()
		if !ok || err != nil {
			return false, err
		}
		if !p.dict {
			return true, d.load(p.data, p.n, p.repLen, p.defLen, p.enc)
		}
		if d.s.width == 0 || (p.enc != parquet.Encodings.Plain && p.enc != parquet.Encodings.PlainDict) {
			return false, fmt.Errorf("unsupported dictionary page encoding %v", p.enc)
		}
		if p.n < 0 || len(p.data) < p.n*d.s.width {
			return false, errors.New("dictionary page shorter than its values")
		}
		d.dict = append(d.dict[:0], p.data[:p.n*d.s.width]...)
	}
}

// rawPage is a page of the chunk as the page reader returns it,
// decompressed: a dictionary page, or a data page of n levels whose levels
// are prefixed by their byte length (v1: repLen < 0) or of the given
// lengths (v2).
type rawPage struct {
	dict           bool
	data           []byte
	n              int
	repLen, defLen int
	enc            parquet.Encoding
}

// fetched is the page reader's answer for one page: ok false at the end of
// the chunk or on err.
type fetched struct {
	p   rawPage
	ok  bool
	err error
}

// readPage reads the next page of the chunk from pr. The page's bytes stay
// valid after the next call (the reader allocates each page anew). A panic
// of the reader over a corrupt page is its error: the pages read ahead are
// read on a goroutine where no caller's recover reaches.
func readPage(pr file.PageReader) (f fetched) {
	defer func() {
		if r := recover(); r != nil {
			f = fetched{err: fmt.Errorf("%v", r)}
		}
	}()
	for pr.Next() {
		switch p := pr.Page().(type) {
		case *file.DictionaryPage:
			return fetched{p: rawPage{dict: true, data: p.Data(), n: int(p.NumValues()), enc: parquet.Encoding(p.Encoding())}, ok: true}
		case *file.DataPageV1:
			return fetched{p: rawPage{data: p.Data(), n: int(p.NumValues()), repLen: -1, defLen: -1, enc: parquet.Encoding(p.Encoding())}, ok: true}
		case *file.DataPageV2:
			return fetched{p: rawPage{data: p.Data(), n: int(p.NumValues()), repLen: int(p.RepetitionLevelByteLen()),
				defLen: int(p.DefinitionLevelByteLen()), enc: parquet.Encoding(p.Encoding())}, ok: true}
		}
	}
	return fetched{err: pr.Err()}
}

// fetch returns the next page of the chunk. With more than one page in
// flight (pagesInFlight), a goroutine reads and decompresses the pages
// ahead of the decoder, up to that many, while the decoder decodes the
// current one and its caller uses the batches read.
func (d *Decoder) fetch() (rawPage, bool, error) {
	if d.ahead == nil {
		w := pagesInFlight()
		if w <= 1 {
			f := readPage(d.pr)
			return f.p, f.ok, f.err
		}
		ahead, stop, pr := make(chan fetched, w-1), make(chan struct{}), d.pr
		d.ahead, d.stop = ahead, stop
		go func() {
			defer close(ahead)
			for {
				f := readPage(pr)
				select {
				case ahead <- f:
				case <-stop:
					return
				}
				if !f.ok {
					return
				}
			}
		}()
	}
	f := <-d.ahead // the zero fetched once the chunk has ended
	return f.p, f.ok, f.err
}

// Close stops reading ahead, returns once the pages in flight are dropped,
// and hands the level window on to the next Decoder: the Decoder reads no
// more after it.
func (d *Decoder) Close() {
	if d.stop != nil {
		close(d.stop)
		for range d.ahead {
		}
		d.stop = nil // d.ahead, closed, reads as the end of the chunk
	}
	if d.win != nil {
		levelWindows.Put(d.win)
		d.win, d.rep, d.def, d.pos = nil, nil, nil, 0
		d.repR.left, d.defR.left = 0, 0
	}
}

// levelWindow holds the levels of a window of a page: a page's levels are
// decoded a window at a time, into buffers that stay in the CPU's cache
// and go from Decoder to Decoder, rather than a page's (up to millions of
// levels) at once.
type levelWindow struct{ rep, def [4096]int16 }

var levelWindows = sync.Pool{New: func() any { return new(levelWindow) }}

// load sets up a data page of n levels (see rawPage): its level readers,
// then its values.
func (d *Decoder) load(data []byte, n, repLen, defLen int, enc parquet.Encoding) error {
	// A page holds at most the chunk's values; a header that claims more is
	// corrupt, and must not size an allocation.
	if n < 0 || int64(n) > d.left || n > maxPageValues {
		return fmt.Errorf("data page of %d values, more than the %d left in its column chunk (or than %d)", n, d.left, maxPageValues)
	}
	d.left -= int64(n)
	d.pos, d.rep, d.def = 0, nil, nil
	var err error
	if d.s.repBits > 0 {
		if d.repR, data, err = levels(data, n, d.s.repBits, repLen); err != nil {
			return err
		}
	}
	present := n
	if d.s.defBits > 0 {
		if d.defR, data, err = levels(data, n, d.s.defBits, defLen); err != nil {
			return err
		}
		if present, err = countLevels(d.defR, d.s.maxDef, d.win.def[:]); err != nil {
			return err
		}
	} else {
		d.defR = hybridReader[int16]{left: n, run: n, g: 8} // all present: level 0
	}
	return d.values(data, present, enc)
}

// levels returns a reader of the n levels data starts with, in size bytes
// (v1: size < 0, a 4-byte length first), and the bytes after them.
func levels(data []byte, n, width, size int) (hybridReader[int16], []byte, error) {
	if size < 0 {
		if len(data) < 4 {
			return hybridReader[int16]{}, nil, errors.New("data page shorter than its levels")
		}
		size = int(binary.LittleEndian.Uint32(data))
		data = data[4:]
	}
	if size > len(data) {
		return hybridReader[int16]{}, nil, errors.New("data page shorter than its levels")
	}
	return newHybridReader[int16](data[:size], width, n), data[size:], nil
}

// values makes the page's n present values available as PLAIN bytes.
func (d *Decoder) values(data []byte, n int, enc parquet.Encoding) error {
	d.vpos = 0
	w := d.s.width
	switch {
	case enc == parquet.Encodings.Plain:
		if (w == 0 && len(data)*8 < n) || (w > 0 && len(data) < n*w) {
			return errors.New("data page shorter than its values")
		}
		d.vals = data
	case w == 0 && enc == parquet.Encodings.RLE: // booleans, v2 pages
		if len(data) < 4 || int(binary.LittleEndian.Uint32(data)) > len(data)-4 {
			return errors.New("data page shorter than its values")
		}
		h := newHybridReader[int16](data[4:4+binary.LittleEndian.Uint32(data)], 1, n)
		d.vals = make([]byte, bitutil.BytesForBits(int64(n)))
		for i := 0; i < n; {
			lv := d.win.def[:min(n-i, len(d.win.def))] // free until the levels are read
			if err := h.read(lv); err != nil {
				return err
			}
			for _, v := range lv {
				if v != 0 {
					bitutil.SetBit(d.vals, i)
				}
				i++
			}
		}
	case w > 0 && (enc == parquet.Encodings.RLEDict || enc == parquet.Encodings.PlainDict):
		if len(data) < 1 || data[0] > 32 {
			return errors.New("dictionary indices: bad bit width")
		}
		idx := make([]int32, n)
		if err := decodeHybrid(idx, data[1:], int(data[0])); err != nil {
			return err
		}
		size := len(d.dict) / w
		out := make([]byte, n*w)
		for i, k := range idx {
			if k < 0 || int(k) >= size {
				return errors.New("dictionary index out of the dictionary")
			}
			copy(out[i*w:(i+1)*w], d.dict[int(k)*w:int(k+1)*w])
		}
		d.vals = out
	case w > 0 && enc == ByteStreamSplit:
		if len(data) < n*w {
			return errors.New("data page shorter than its values")
		}
		out := make([]byte, n*w)
		for b := 0; b < w; b++ {
			stream := data[b*n : (b+1)*n]
			for i, v := range stream {
				out[i*w+b] = v
			}
		}
		d.vals = out
	default:
		return fmt.Errorf("unsupported value encoding %v", enc)
	}
	return nil
}

// batch accumulates the Arrow buffers of one record batch of the column.
type batch struct {
	rows      int
	offsets   []int32 // lists: rows+1
	listValid []byte  // nil until a null list (flat: a null value)
	listNulls int
	vals      []byte
	nvals     int    // values, the pending ones among them
	elemValid []byte // nil until a null element
	elemNulls int
	// The last pend values taken, not yet in vals: values from..from+pend
	// of src (a page's), copied at once when the run of them ends.
	src        []byte
	from, pend int
}

// Read decodes the next n rows (fewer only at the end of the chunk).
func (d *Decoder) Read(n int64) (arrow.Array, error) { return d.ReadRows(n, nil) }

// ReadRows decodes the next n rows (fewer only at the end of the chunk)
// and returns those i where keep[i] is true, every one when keep is nil: a
// row not kept has its levels checked and its values skipped, not copied.
func (d *Decoder) ReadRows(n int64, keep []bool) (arrow.Array, error) {
	// The footer's counts size the values buffer, but they are not trusted
	// with more than 64 MiB before the values are there.
	b := &batch{vals: make([]byte, 0, int(min(float64(n)*d.perRow, 64<<20))+8)}
	if d.s.list {
		b.offsets = make([]int32, 1, n+1)
	}
	row := 0 // rows of the chunk read by this call, kept or not
	for int64(row) < n || d.s.list {
		if d.pos == len(d.def) {
			ok, err := d.next()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			continue
		}
		if d.s.list {
			if d.rep[d.pos] == 0 {
				if int64(row) == n {
					break // the next row starts
				}
				d.skipping = keep != nil && !keep[row]
				row++
			}
			if err := d.listRun(b); err != nil {
				return nil, err
			}
			continue
		}
		want := int(n) - row
		if keep != nil {
			want = sameRun(keep[row:n])
		}
		before := d.pos
		if err := d.flatRun(b, want, keep != nil && !keep[row]); err != nil {
			return nil, err
		}
		row += d.pos - before
	}
	if d.s.list && len(b.offsets) > 0 {
		b.offsets = b.offsets[:b.rows+1]
	}
	return b.array(d.s), nil
}

// sameRun returns the length of the run of equal values keep starts with.
func sameRun(keep []bool) int {
	k := 1
	for k < len(keep) && keep[k] == keep[0] {
		k++
	}
	return k
}

// listRun takes the levels from pos up to the start of the next row, or the
// end of the page (a row may go on in the next page); a row not kept
// (skipping) has its values skipped.
func (d *Decoder) listRun(b *batch) error {
	s, i := d.s, d.pos
	if d.rep[i] == 0 {
		if !d.skipping {
			b.rows++
			b.offsets = append(b.offsets, int32(b.nvals))
		}
		switch l := d.def[i]; {
		case l > s.emptyDef:
			d.open = true
		case l == s.emptyDef || l == s.nullDef:
			if l == s.nullDef && !d.skipping {
				b.setNull(b.rows - 1)
			}
			d.open = false
			d.pos++
			return nil
		default:
			return errLevels
		}
	} else if !d.open {
		return errLevels
	}
	end := runEnd(d.rep, i+1, len(d.rep), 1)
	// The row's elements: a run of present values is copied at once.
	for i < end {
		j := runEnd(d.def, i, end, s.maxDef)
		if j > i {
			if err := d.take(b, j-i, d.skipping); err != nil {
				return err
			}
			i = j
			continue
		}
		if d.def[i] != s.elemNull || s.elemNull < 0 {
			return errLevels
		}
		if !d.skipping {
			b.addElemNull(s)
		}
		i++
	}
	d.pos = end
	if !d.skipping {
		b.offsets[b.rows] = int32(b.nvals)
	}
	return nil
}

// flatRun takes up to want rows of a flat column from the page, or skips
// them.
func (d *Decoder) flatRun(b *batch, want int, skip bool) error {
	end := min(len(d.def), d.pos+want)
	for i := d.pos; i < end; {
		j := i
		for j < end && d.def[j] == d.s.maxDef {
			j++
		}
		if j > i {
			if err := d.take(b, j-i, skip); err != nil {
				return err
			}
			if !skip {
				b.rows += j - i
			}
			i = j
			continue
		}
		if d.def[i] != d.s.nullDef {
			return errLevels
		}
		if !skip {
			b.setNull(b.rows)
			b.addZero(d.s)
			b.rows++
		}
		i++
	}
	d.pos = end
	return nil
}

// take copies k present values, or skips them.
func (d *Decoder) take(b *batch, k int, skip bool) error {
	w := d.s.width
	if (w == 0 && (d.vpos+k+7)/8 > len(d.vals)) || (w > 0 && (d.vpos+k)*w > len(d.vals)) {
		return errors.New("data page shorter than its values")
	}
	if skip {
		d.vpos += k
		return nil
	}
	if b.pend > 0 && (b.from+b.pend != d.vpos || unsafe.SliceData(b.src) != unsafe.SliceData(d.vals)) {
		b.flush(d.s)
	}
	if b.pend == 0 {
		b.src, b.from = d.vals, d.vpos
	}
	b.pend += k
	d.vpos += k
	if b.elemValid != nil {
		bitutil.SetBitsTo(b.growValid(&b.elemValid, b.nvals+k), int64(b.nvals), int64(k), true)
	}
	b.nvals += k
	return nil
}

// flush copies the pending values into vals.
func (b *batch) flush(s Shape) {
	if b.pend == 0 {
		return
	}
	if w := s.width; w == 0 {
		need := int(bitutil.BytesForBits(int64(b.nvals)))
		if need > len(b.vals) {
			b.vals = append(b.vals, make([]byte, need-len(b.vals)+len(b.vals)/2)...)
		}
		bitutil.CopyBitmap(b.src, b.from, b.pend, b.vals, b.nvals-b.pend)
	} else {
		b.vals = append(b.vals, b.src[b.from*w:(b.from+b.pend)*w]...)
	}
	b.src, b.pend = nil, 0
}

// addElemNull appends a null value (a zero in the values).
func (b *batch) addElemNull(s Shape) {
	if b.elemValid == nil {
		b.elemValid = allValid(b.nvals + 1)
	}
	b.growValid(&b.elemValid, b.nvals+1)
	bitutil.ClearBit(b.elemValid, b.nvals)
	b.elemNulls++
	b.addZero(s)
}

// addZero appends a zero value (under a null).
func (b *batch) addZero(s Shape) {
	b.flush(s)
	if s.width > 0 {
		b.vals = append(b.vals, make([]byte, s.width)...)
	} else if need := int(bitutil.BytesForBits(int64(b.nvals + 1))); need > len(b.vals) {
		b.vals = append(b.vals, 0)
	}
	b.nvals++
}

// setNull marks row i null (a list, or a flat value).
func (b *batch) setNull(i int) {
	if b.listValid == nil {
		b.listValid = allValid(i + 1)
	}
	b.listNulls++
	b.growValid(&b.listValid, i+1)
	bitutil.ClearBit(b.listValid, i)
}

// allValid returns a validity bitmap of at least n bits, all set.
func allValid(n int) []byte {
	v := make([]byte, bitutil.BytesForBits(int64(n)))
	bitutil.SetBitsTo(v, 0, int64(len(v)*8), true)
	return v
}

// growValid grows a validity bitmap to n bits, the new ones set.
func (b *batch) growValid(v *[]byte, n int) []byte {
	have := len(*v) * 8
	if need := int(bitutil.BytesForBits(int64(n))); need > len(*v) {
		*v = append(*v, make([]byte, need-len(*v)+len(*v)/2)...)
		bitutil.SetBitsTo(*v, int64(have), int64(len(*v)*8-have), true)
	}
	return *v
}

// array assembles the batch as an Arrow array of the shape's type.
func (b *batch) array(s Shape) arrow.Array {
	b.flush(s)
	if !s.list {
		if b.listValid != nil {
			b.growValid(&b.listValid, b.rows)
		}
		return array.MakeFromData(array.NewData(s.typ, b.rows, []*memory.Buffer{bufOf(b.listValid), memory.NewBufferBytes(b.vals)}, nil, b.listNulls, 0))
	}
	if b.elemValid != nil {
		b.growValid(&b.elemValid, b.nvals)
	}
	if b.listValid != nil {
		b.growValid(&b.listValid, b.rows)
	}
	values := array.NewData(s.elem, b.nvals, []*memory.Buffer{bufOf(b.elemValid), memory.NewBufferBytes(b.vals)}, nil, b.elemNulls, 0)
	defer values.Release()
	offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(b.offsets))
	return array.MakeFromData(array.NewData(s.typ, b.rows, []*memory.Buffer{bufOf(b.listValid), offsets}, []arrow.ArrayData{values}, b.listNulls, 0))
}

func bufOf(b []byte) *memory.Buffer {
	if b == nil {
		return nil
	}
	return memory.NewBufferBytes(b)
}

// decodeHybrid decodes len(dst) values of Parquet's RLE/bit-packed hybrid
// encoding of the given bit width (dictionary indices).
func decodeHybrid[T int16 | int32](dst []T, src []byte, width int) error {
	h := newHybridReader[T](src, width, len(dst))
	return h.read(dst)
}

// hybridReader decodes a stream of Parquet's RLE/bit-packed hybrid encoding
// (levels, dictionary indices, booleans) a part at a time, into the
// caller's buffers.
type hybridReader[T int16 | int32] struct {
	src   []byte // the stream from the next run's header on
	width int
	left  int // values not yet read
	// The current run: an RLE run's values left, of value val; a bit-packed
	// run's whole groups left, in packed; a group read in part, from g on
	// (8 when none).
	run    int
	val    T
	groups int
	packed []byte
	group  [8]T
	g      int
}

// newHybridReader reads n values of the given bit width from src.
func newHybridReader[T int16 | int32](src []byte, width, n int) hybridReader[T] {
	return hybridReader[T]{src: src, width: width, left: n, g: 8}
}

// read decodes the next len(dst) values (at most left).
func (h *hybridReader[T]) read(dst []T) error {
	if len(dst) > h.left {
		return errEarly
	}
	h.left -= len(dst)
	for i := 0; i < len(dst); {
		switch {
		case h.g < 8:
			k := copy(dst[i:], h.group[h.g:])
			h.g += k
			i += k
		case h.run > 0:
			k := min(h.run, len(dst)-i)
			fill(dst[i:i+k], h.val)
			h.run -= k
			i += k
		case h.groups > 0 && len(dst)-i >= 8:
			k := min(h.groups, (len(dst)-i)/8)
			unpack(dst[i:i+8*k], h.packed[:k*h.width], h.width)
			h.groups -= k
			h.packed = h.packed[k*h.width:]
			i += 8 * k
		case h.groups > 0:
			unpack(h.group[:], h.packed[:h.width], h.width)
			h.groups--
			h.packed = h.packed[h.width:]
			h.g = 0
		default:
			if err := h.header(); err != nil {
				return err
			}
		}
	}
	return nil
}

// header starts the next run.
func (h *hybridReader[T]) header() error {
	v, k := binary.Uvarint(h.src)
	if k <= 0 {
		return errEarly
	}
	h.src = h.src[k:]
	if v&1 == 0 { // a run of one value
		nb := (h.width + 7) / 8
		if len(h.src) < nb {
			return errEarly
		}
		h.val = 0
		for b := 0; b < nb; b++ {
			h.val |= T(h.src[b]) << (8 * b)
		}
		h.src = h.src[nb:]
		h.run = int(v >> 1)
		return nil
	}
	// Groups of 8 values bit-packed, least significant bit first.
	groups := v >> 1
	if groups == 0 || groups > uint64(len(h.src)/max(h.width, 1)) {
		return errEarly
	}
	h.groups = int(groups)
	h.packed = h.src[:h.groups*h.width]
	h.src = h.src[len(h.packed):]
	return nil
}

// unpack decodes len(dst)/8 bit-packed groups of 8 values from packed.
func unpack[T int16 | int32](dst []T, packed []byte, width int) {
	mask := uint64(1)<<width - 1
	p := 0
	if width <= 8 {
		// A group's 8 values are its width bytes, one little-endian word.
		for i := 0; i < len(dst); i += 8 {
			var acc uint64
			if p+8 <= len(packed) {
				acc = binary.LittleEndian.Uint64(packed[p:])
			} else {
				for b, x := range packed[p : p+width] {
					acc |= uint64(x) << (8 * b)
				}
			}
			p += width
			out := dst[i : i+8 : i+8]
			for j := range out {
				out[j] = T(acc >> (j * width) & mask)
			}
		}
		return
	}
	var acc uint64
	have := 0
	for i := range dst {
		for have < width {
			acc |= uint64(packed[p]) << have
			p++
			have += 8
		}
		dst[i] = T(acc & mask)
		acc >>= width
		have -= width
	}
}

// countLevels returns how many of the levels h reads equal v, reading a
// copy of h: an RLE run counted whole, the rest decoded into buf.
func countLevels(h hybridReader[int16], v int16, buf []int16) (int, error) {
	n := 0
	for h.left > 0 {
		if h.run > 0 && h.g == 8 {
			k := min(h.run, h.left)
			if h.val == v {
				n += k
			}
			h.run -= k
			h.left -= k
			continue
		}
		part := buf[:min(len(buf), h.left)]
		if err := h.read(part); err != nil {
			return 0, err
		}
		n += countEqual(part, v)
	}
	return n, nil
}

// runEnd returns the first index from i on, before end, where levels
// differ from v (end if none): levels compared four at once, as one word,
// four words at a time.
func runEnd(levels []int16, i, end int, v int16) int {
	if i >= end {
		return i
	}
	words := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(levels))), 2*end)
	four := uint64(uint16(v)) * 0x0001_0001_0001_0001
	for i+16 <= end {
		w := words[2*i : 2*i+32]
		if (binary.LittleEndian.Uint64(w)^four)|(binary.LittleEndian.Uint64(w[8:])^four)|
			(binary.LittleEndian.Uint64(w[16:])^four)|(binary.LittleEndian.Uint64(w[24:])^four) != 0 {
			break
		}
		i += 16
	}
	for i+4 <= end && binary.LittleEndian.Uint64(words[2*i:]) == four {
		i += 4
	}
	for i < end && levels[i] == v {
		i++
	}
	return i
}

// countEqual returns how many levels equal v.
func countEqual(levels []int16, v int16) int {
	n := 0
	for i := 0; i < len(levels); i++ {
		j := runEnd(levels, i, len(levels), v)
		n += j - i
		i = j // levels[j] differs (or j is the end)
	}
	return n
}

// fill sets every element of run to v: a long run by doubling copies
// (memmove), far faster than a store per element.
func fill[T int16 | int32](run []T, v T) {
	if len(run) < 16 {
		for j := range run {
			run[j] = v
		}
		return
	}
	run[0] = v
	for k := 1; k < len(run); k *= 2 {
		copy(run[k:], run[:k])
	}
}

var errEarly = errors.New("levels or indices end before the page's values")
