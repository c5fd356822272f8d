package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow/go/v17/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
)

// arrow's IPC decoder trusts the vector lengths of a schema flatbuffer: it
// sizes slices by them before reading a single element, and follows child
// fields without a depth limit. A corrupt length asks the runtime for
// terabytes, and a child that points back at its parent recurses until the
// stack overflows; both are fatal errors, not panics, so no recover can turn
// them into bad input. The checks below walk every schema flatbuffer the
// readers hand to arrow (Parquet's ARROW:schema metadata, an IPC stream's
// first message, an IPC file's footer) and refuse one whose vectors do not
// fit in its bytes or whose fields nest deeper than maxFieldDepth. messageAt
// does the same for the length prefix of each stream message, and
// boundedAllocator, at the end, for the lengths of message bodies.

const maxFieldDepth = 64

// errCorruptSchema is wrapped by every failed check of a schema flatbuffer.
var errCorruptSchema = errors.New("corrupt Arrow schema")

// Field offsets (vtable slots) of the Arrow flatbuffer tables walked here,
// from the Arrow format's Message.fbs, Schema.fbs and File.fbs.
const (
	messageHeaderType = 6  // Message.header_type
	messageHeader     = 8  // Message.header
	messageBodyLength = 10 // Message.bodyLength
	schemaFields      = 6  // Schema.fields
	schemaMetadata    = 8  // Schema.custom_metadata
	fieldTypeType     = 8  // Field.type_type
	fieldType         = 10
	fieldChildren     = 14
	fieldMetadata     = 16
	unionTypeIDs      = 6  // Union.typeIds
	footerSchema      = 6  // Footer.schema
	footerDicts       = 8  // Footer.dictionaries, of 24-byte Blocks
	footerBatches     = 10 // Footer.recordBatches, of 24-byte Blocks

	headerSchema = 1 // MessageHeader.Schema
	typeUnion    = 14
	blockSize    = 24
)

// checkParquetArrowSchema checks the base64 ARROW:schema value that pqarrow
// decodes when it opens a Parquet file, decoding it the way pqarrow does.
func checkParquetArrowSchema(v string) error {
	var b []byte
	err := errors.New("not base64")
	if len(v)%4 == 0 {
		b, err = base64.StdEncoding.DecodeString(v)
	}
	if len(b) == 0 || err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(v); err != nil {
			return nil // pqarrow fails on it the same way, with an error
		}
	}
	// It holds an IPC stream, as an Arrow Flight schema does.
	return checkIPCStream(bytes.NewReader(b), int64(len(b)))
}

// checkIPC checks the schema of an Arrow IPC file or stream before arrow
// decodes it.
func checkIPC(f io.ReaderAt, format Format, size int64) error {
	if format == ArrowFile {
		return checkIPCFooter(f, size)
	}
	return checkIPCStream(f, size)
}

// checkIPCStream checks the schema message an Arrow IPC stream starts with.
func checkIPCStream(f io.ReaderAt, size int64) error {
	off, n, err := messageAt(f, 0, size)
	if err != nil || n == 0 {
		return err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return nil
	}
	if err := checkSchemaMessage(b); err != nil {
		return err
	}
	// arrow makes the body's buffer before it reads a byte of it too.
	if body := bodyLength(b); body < 0 || body > size-off-n {
		return fmt.Errorf("%w: a %d-byte message body at byte %d of %d", errCorruptSchema, body, off+n, size)
	}
	return nil
}

// bodyLength returns the body length a message's metadata gives (-1: a
// corrupt one).
func bodyLength(b []byte) (n int64) {
	if len(b) < 4 {
		return 0
	}
	if guard(func(w *walker) {
		t := w.root()
		if o := t.Offset(messageBodyLength); o != 0 {
			if int(t.Pos)+int(o)+8 > len(b) {
				panic("body length past the end")
			}
			n = t.GetInt64(t.Pos + flatbuffers.UOffsetT(o))
		}
	}, b) != nil {
		return -1
	}
	return n
}

// messageAt reads the length prefix of the stream message at offset at and
// returns where its metadata starts and how long it is (0: none there, or a
// length arrow refuses itself). arrow makes the metadata's buffer before it
// reads a byte of it, so a length past the end of the file is an error here.
func messageAt(f io.ReaderAt, at, size int64) (off, n int64, err error) {
	var head [8]byte
	got, _ := f.ReadAt(head[:], at)
	if got < 4 {
		return 0, 0, nil // too short for a length: arrow reports it
	}
	off, n = at+4, int64(int32(binary.LittleEndian.Uint32(head[:4])))
	if n == -1 { // continuation marker, then the length
		off, n = at+8, int64(int32(binary.LittleEndian.Uint32(head[4:])))
	}
	if n <= 0 {
		return 0, 0, nil // end of stream, or a negative length
	}
	if off+n > size {
		return 0, 0, fmt.Errorf("corrupt stream: a %d-byte message at byte %d of %d", n, at, size)
	}
	return off, n, nil
}

// offsetReader counts the bytes read through it: where the next stream
// message starts.
type offsetReader struct {
	r io.Reader
	n int64
}

func (o *offsetReader) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	o.n += int64(n)
	return n, err
}

// checkIPCFooter checks the footer (and the schema in it) of an Arrow IPC
// file.
func checkIPCFooter(f io.ReaderAt, size int64) error {
	var tail [10]byte // footer length, then the "ARROW1" magic
	if size < int64(len(tail)) {
		return nil
	}
	if _, err := f.ReadAt(tail[:], size-int64(len(tail))); err != nil {
		return nil
	}
	n := int64(int32(binary.LittleEndian.Uint32(tail[:4])))
	if n <= 0 || n > size-int64(len(tail)) {
		return nil // arrow rejects the length itself
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, size-int64(len(tail))-n); err != nil {
		return nil
	}
	return guard(func(w *walker) {
		t := w.root()
		w.vector(t, footerDicts, blockSize)
		w.vector(t, footerBatches, blockSize)
		if o := t.Offset(footerSchema); o != 0 {
			w.schema(w.indirect(t, o))
		}
	}, b)
}

// checkSchemaMessage checks a Message flatbuffer whose header is a Schema.
// Bytes too short or of another message type are left to arrow, which
// reports them as errors.
func checkSchemaMessage(b []byte) error {
	if len(b) < 4 {
		return nil
	}
	return guard(func(w *walker) {
		t := w.root()
		if o := t.Offset(messageHeaderType); o == 0 || t.GetByte(t.Pos+flatbuffers.UOffsetT(o)) != headerSchema {
			return
		}
		if o := t.Offset(messageHeader); o != 0 {
			w.schema(w.indirect(t, o))
		}
	}, b)
}

// walker reads a flatbuffer, panicking on the first length that does not fit;
// guard turns that (and the flatbuffers package's own out-of-range panics)
// into an error. fields counts the fields visited: a schema that shares child
// tables could make arrow's walk exponential, and no writer shares them.
type walker struct {
	buf    []byte
	fields int
}

func guard(walk func(*walker), b []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errCorruptSchema, p)
		}
	}()
	walk(&walker{buf: b})
	return nil
}

func (w *walker) root() *flatbuffers.Table {
	return w.table(flatbuffers.GetUOffsetT(w.buf))
}

func (w *walker) table(pos flatbuffers.UOffsetT) *flatbuffers.Table {
	if int64(pos)+4 > int64(len(w.buf)) {
		panic(fmt.Sprintf("table at %d past the end (%d bytes)", pos, len(w.buf)))
	}
	t := &flatbuffers.Table{Bytes: w.buf, Pos: pos}
	t.Offset(0) // reads the vtable: panics if it lies outside
	return t
}

// indirect follows the offset stored at field o of t.
func (w *walker) indirect(t *flatbuffers.Table, o flatbuffers.VOffsetT) *flatbuffers.Table {
	return w.table(t.Indirect(t.Pos + flatbuffers.UOffsetT(o)))
}

// vector checks that the vector in field slot of t fits in the buffer and
// returns its length and the position of its first element.
func (w *walker) vector(t *flatbuffers.Table, slot flatbuffers.VOffsetT, elem int64) (int, flatbuffers.UOffsetT) {
	o := t.Offset(slot)
	if o == 0 {
		return 0, 0
	}
	n, start := int64(t.VectorLen(flatbuffers.UOffsetT(o))), t.Vector(flatbuffers.UOffsetT(o))
	if int64(start)+n*elem > int64(len(w.buf)) {
		panic(fmt.Sprintf("vector of %d elements at %d past the end (%d bytes)", n, start, len(w.buf)))
	}
	return int(n), start
}

// tables returns the tables a vector of offsets in field slot of t points at.
func (w *walker) tables(t *flatbuffers.Table, slot flatbuffers.VOffsetT) []*flatbuffers.Table {
	n, start := w.vector(t, slot, flatbuffers.SizeUOffsetT)
	out := make([]*flatbuffers.Table, n)
	for i := range out {
		x := start + flatbuffers.UOffsetT(i)*flatbuffers.SizeUOffsetT
		out[i] = w.table(x + flatbuffers.GetUOffsetT(w.buf[x:]))
	}
	return out
}

func (w *walker) schema(s *flatbuffers.Table) {
	w.tables(s, schemaMetadata)
	for _, f := range w.tables(s, schemaFields) {
		w.field(f, 1)
	}
}

func (w *walker) field(f *flatbuffers.Table, depth int) {
	if depth > maxFieldDepth {
		panic(fmt.Sprintf("fields nested deeper than %d", maxFieldDepth))
	}
	if w.fields++; w.fields > len(w.buf)/4 {
		panic("more fields than the schema has bytes for")
	}
	w.tables(f, fieldMetadata)
	if o := f.Offset(fieldTypeType); o != 0 && f.GetByte(f.Pos+flatbuffers.UOffsetT(o)) == typeUnion {
		if o := f.Offset(fieldType); o != 0 {
			w.vector(w.indirect(f, o), unionTypeIDs, 4)
		}
	}
	for _, c := range w.tables(f, fieldChildren) {
		w.field(c, depth+1)
	}
}

// boundedAllocator refuses a buffer larger than limit. arrow's IPC readers
// size a message's body by the length the message claims, before reading it:
// a corrupt length asks for terabytes, which is fatal, not a panic. The
// refusal is a panic, which the store reader recovers as bad input.
type boundedAllocator struct {
	memory.Allocator
	limit int
}

// ipcAllocator bounds alloc for reading an IPC store of size bytes: no buffer
// is larger than 64 times the file (room for compressed bodies), or 1 GiB.
func ipcAllocator(alloc memory.Allocator, size int64) memory.Allocator {
	return boundedAllocator{alloc, int(max(64*size, 1<<30))}
}

func (a boundedAllocator) Allocate(n int) []byte {
	a.check(n)
	return a.Allocator.Allocate(n)
}

func (a boundedAllocator) Reallocate(n int, b []byte) []byte {
	a.check(n)
	return a.Allocator.Reallocate(n, b)
}

func (a boundedAllocator) check(n int) {
	if n > a.limit {
		panic(fmt.Sprintf("corrupt length: a %d-byte buffer asked for, more than the store could hold", n))
	}
}
