package leafcodec

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/bitutil"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"
)

// A job that drops rows writes the kept rows of the columns it does not
// change. Transcode writes them straight from the input chunk's pages into
// the output chunk's: each kept row's levels and values go from the
// decoded input page into the page being encoded, with no Arrow array
// between them, and the pages are cut, levelled and compressed as Write
// cuts, levels and compresses the same rows read into an array, so the
// chunk's bytes are the same.

// ErrNotTranscodable reports a kept row Transcode cannot write as Write
// would write it (a null element, or a null list where the output holds
// none): the caller writes the column through an Arrow array.
var ErrNotTranscodable = errors.New("leafcodec: a kept row the encoder does not take")

// Transcodes returns the shapes of a list column written straight from the
// pages of input leaf in, read as Arrow type t, into output leaf out under
// props: both have a shape of fixed-width values the codec takes, and the
// codec writes the output as pqarrow would.
func Transcodes(props *parquet.WriterProperties, in, out *pqschema.Column, t arrow.DataType) (from, to Shape, ok bool) {
	from, ok = ShapeOf(in, t)
	if !ok || !from.list || from.width == 0 {
		return from, to, false
	}
	to, ok = encodesShape(props, out, t)
	return from, to, ok
}

// Transcoded is what Transcode wrote: the layout of the kept rows (a list
// of nulls with their offsets and validity, for checks that need no values)
// and whether a kept value of a float column is NaN or +Inf.
type Transcoded struct {
	Layout    arrow.Array
	NonFinite bool
}

// transcoder holds the output page being filled: its rows (value counts,
// -1 for a null list) and their values, PLAIN, in buf from head on (the
// bytes before them left for the page's levels, so that the values are
// copied once, from the input page); and the layout of the rows kept so
// far.
type transcoder struct {
	e        *Encoder
	s        Shape
	slot     *pageSlot
	pageSize int
	rows     []int32
	buf      []byte
	head     int
	offsets  []int32
	valid    []byte // nil until a null row
	nulls    int
	floats   bool // float32 values: NonFinite is tracked
	nonFin   bool
}

// Transcode writes the rows i of the chunk d reads where keep[i] is true
// (d reads len(keep) rows) as column chunk of shape s, in pages of about
// pageSize bytes of values, through e's pager. The chunk's bytes are those
// Write writes for the same rows decoded (d.ReadRows). On
// ErrNotTranscodable nothing usable has been written: the caller starts
// the chunk again with another pager.
func (e *Encoder) Transcode(s Shape, d *Decoder, keep []bool, pageSize int) (Transcoded, error) {
	t := &transcoder{e: e, s: s, pageSize: pageSize, floats: s.elem.ID() == arrow.FLOAT32}
	t.slot = takeSlot()
	defer giveSlot(t.slot)
	t.head = levelRoom
	t.buf = slices.Grow(t.slot.vals[:0], t.head)[:t.head]
	defer func() { t.slot.vals = t.buf[:0] }()
	t.offsets = make([]int32, 1, len(keep)+1)
	in := d.s
	w := in.width
	row := -1 // the input row being read
	kept, open, null := false, false, false
	n := 0 // values of the kept row so far
	for {
		if d.pos == len(d.def) {
			ok, err := d.next()
			if err != nil {
				return Transcoded{}, err
			}
			if !ok {
				break
			}
			continue
		}
		i := d.pos
		if d.rep[i] == 0 {
			if row >= 0 && kept {
				if err := t.endRow(n, null); err != nil {
					return Transcoded{}, err
				}
			}
			row++
			if row == len(keep) {
				return Transcoded{}, errors.New("more rows in the column chunk than its row group holds")
			}
			kept, n, null = keep[row], 0, false
			switch l := d.def[i]; {
			case l > in.emptyDef:
				open = true
			case l == in.emptyDef || l == in.nullDef:
				null = l == in.nullDef
				if null && kept && s.nullDef < 0 {
					return Transcoded{}, ErrNotTranscodable
				}
				open = false
				d.pos++
				continue
			default:
				return Transcoded{}, errLevels
			}
		} else if !open {
			return Transcoded{}, errLevels
		}
		end := runEnd(d.rep, i+1, len(d.rep), 1)
		for i < end {
			j := runEnd(d.def, i, end, in.maxDef)
			if j == i {
				if d.def[i] != in.elemNull || in.elemNull < 0 {
					return Transcoded{}, errLevels
				}
				if kept {
					return Transcoded{}, ErrNotTranscodable
				}
				i++
				continue
			}
			k := j - i
			if (d.vpos+k)*w > len(d.vals) {
				return Transcoded{}, errors.New("data page shorter than its values")
			}
			if kept {
				t.add(d.vals[d.vpos*w : (d.vpos+k)*w])
				n += k
			}
			d.vpos += k
			i = j
		}
		d.pos = end
	}
	if row >= 0 && kept {
		if err := t.endRow(n, null); err != nil {
			return Transcoded{}, err
		}
	}
	if row+1 != len(keep) {
		return Transcoded{}, errors.New("column chunk ends before the rows of its row group")
	}
	if len(t.rows) > 0 {
		if err := t.flush(len(t.buf) - t.head); err != nil {
			return Transcoded{}, err
		}
	}
	return Transcoded{Layout: t.layout(), NonFinite: t.nonFin}, nil
}

// levelRoom is the room left for a page's levels before its values at
// first: a few bytes a row (two runs of repetition levels, about one of
// definition levels).
const levelRoom = 16 << 10

// add appends values of the row being read to the page's.
func (t *transcoder) add(v []byte) {
	t.buf = append(t.buf, v...)
	if t.floats && !t.nonFin {
		for k := 0; k+4 <= len(v); k += 4 {
			// NaN or +Inf: what a check of finite log-probs refuses.
			if x := binary.LittleEndian.Uint32(v[k:]); x&0x7fffffff > 0x7f800000 || x == 0x7f800000 {
				t.nonFin = true
				break
			}
		}
	}
}

// endRow ends a kept row of n values (null: a null list): the page takes
// it, or is written first when the row's values would take it past
// pageSize (a page holds at least one row), as pageCuts cuts pages.
func (t *transcoder) endRow(n int, null bool) error {
	size := n * t.s.width
	if vals := len(t.buf) - t.head; len(t.rows) > 0 && vals > t.pageSize {
		if err := t.flush(vals - size); err != nil {
			return err
		}
	}
	r := int32(n)
	if null {
		r = -1
		if t.valid == nil {
			t.valid = make([]byte, bitutil.BytesForBits(int64(cap(t.offsets))))
			bitutil.SetBitsTo(t.valid, 0, int64(len(t.offsets)-1), true)
		}
		t.nulls++
	} else if t.valid != nil {
		bitutil.SetBit(t.valid, len(t.offsets)-1)
	}
	t.rows = append(t.rows, r)
	t.offsets = append(t.offsets, t.offsets[len(t.offsets)-1]+int32(n))
	return nil
}

// flush writes the page of the rows taken, whose values are the first
// size bytes of the page's, and starts the next page with the values after
// them (the row being read).
func (t *transcoder) flush(size int) error {
	p := t.slot
	p.levels = 0
	for _, r := range t.rows {
		p.row(t.s, r < 0, int(max(r, 0)))
	}
	p.page.Reset()
	p.rep.flushTo(&p.page)
	p.def.flushTo(&p.page)
	levels, head := p.page.Len(), t.head
	if levels <= head {
		copy(t.buf[head-levels:], p.page.Bytes())
		p.compress(t.e.pager, t.buf[head-levels:head+size])
	} else { // more levels than room: the values copied after them
		p.page.Write(t.buf[head : head+size])
		p.compress(t.e.pager, p.page.Bytes())
		t.head = 2 * levels
	}
	t.rows = t.rows[:0]
	if err := t.e.writePage(p); err != nil {
		return err
	}
	// The values after the page's (the row being read) start the next.
	tail := t.buf[head+size:]
	if need := t.head + len(tail); cap(t.buf) < need {
		grown := make([]byte, need, 2*need)
		copy(grown[t.head:], tail)
		t.buf = grown
	} else {
		t.buf = t.buf[:max(len(t.buf), need)]
		copy(t.buf[t.head:], tail)
		t.buf = t.buf[:need]
	}
	return nil
}

// layout returns the kept rows' list layout: a list of nulls.
func (t *transcoder) layout() arrow.Array {
	rows := len(t.offsets) - 1
	vals := int(t.offsets[rows])
	values := array.NewNull(vals)
	defer values.Release()
	var valid *memory.Buffer
	if t.valid != nil {
		valid = memory.NewBufferBytes(t.valid)
	}
	offsets := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(t.offsets))
	data := array.NewData(arrow.ListOf(arrow.Null), rows, []*memory.Buffer{valid, offsets}, []arrow.ArrayData{values.Data()}, t.nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}
