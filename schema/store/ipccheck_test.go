package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/rftpipe/rftpipe/schema"
)

// nestedSchema has metadata on the schema and on a field, and a field two
// lists deep, so every path of the walk is taken.
var nestedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "run", Type: arrow.PrimitiveTypes.Int32},
	{Name: "nested", Type: arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int32)),
		Metadata: arrow.NewMetadata([]string{"k"}, []string{"v"})},
}, func() *arrow.Metadata { m := arrow.NewMetadata([]string{"a"}, []string{"b"}); return &m }())

// schemaStream is nestedSchema as an IPC stream (what ARROW:schema holds) and
// the position of its message flatbuffer in it.
func schemaStream(t *testing.T) ([]byte, int) {
	t.Helper()
	b := serializeSchema(nestedSchema)
	if binary.LittleEndian.Uint32(b) != 0xFFFFFFFF {
		t.Fatal("no continuation marker")
	}
	return b, 8
}

// locate walks msg (a Message flatbuffer) to the tables the corruptions
// below write into.
func locate(msg []byte) (schemaT, nested, inner *flatbuffers.Table) {
	w := &walker{buf: msg}
	m := w.root()
	schemaT = w.indirect(m, m.Offset(messageHeader))
	fields := w.tables(schemaT, schemaFields)
	nested = fields[1]
	inner = w.tables(nested, fieldChildren)[0]
	return
}

// vectorLenAt is the position of the length of the vector in slot of t.
func vectorLenAt(t *flatbuffers.Table, slot flatbuffers.VOffsetT) int {
	o := t.Pos + flatbuffers.UOffsetT(t.Offset(slot))
	return int(o + t.GetUOffsetT(o))
}

func TestCheckSchemaFlatbuffers(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(msg []byte)
	}{
		{"valid", func([]byte) {}},
		{"fields length past the end", func(msg []byte) {
			s, _, _ := locate(msg)
			binary.LittleEndian.PutUint32(msg[vectorLenAt(s, schemaFields):], 0x0B000000)
		}},
		{"schema metadata length past the end", func(msg []byte) {
			s, _, _ := locate(msg)
			binary.LittleEndian.PutUint32(msg[vectorLenAt(s, schemaMetadata):], 1<<30)
		}},
		{"field metadata length past the end", func(msg []byte) {
			_, f, _ := locate(msg)
			binary.LittleEndian.PutUint32(msg[vectorLenAt(f, fieldMetadata):], 1<<30)
		}},
		{"child that is its own parent", func(msg []byte) {
			// Point the inner list's child at the inner list itself: the
			// offset wraps around 2^32 to go backwards.
			_, _, inner := locate(msg)
			at := vectorLenAt(inner, fieldChildren) + 4
			binary.LittleEndian.PutUint32(msg[at:], uint32(inner.Pos)-uint32(at))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, off := schemaStream(t)
			tc.corrupt(b[off:])
			wantErr := tc.name != "valid"
			for _, check := range []struct {
				how string
				err error
			}{
				{"parquet ARROW:schema", checkParquetArrowSchema(base64.StdEncoding.EncodeToString(b))},
				{"ipc stream", checkIPCStream(bytes.NewReader(b), int64(len(b)))},
			} {
				if got := check.err != nil; got != wantErr {
					t.Fatalf("%s: err = %v, want error %v", check.how, check.err, wantErr)
				}
				if wantErr && !errors.Is(check.err, errCorruptSchema) {
					t.Fatalf("%s: err = %v, want errCorruptSchema", check.how, check.err)
				}
			}
			if !wantErr {
				if _, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(memory.DefaultAllocator)); err != nil {
					t.Fatalf("arrow cannot read the valid schema: %v", err)
				}
			}
		})
	}
}

// TestCorruptIPCFooterIsBadInput writes an Arrow IPC file whose footer claims
// a schema of 2^30 fields, and opens it.
func TestCorruptIPCFooterIsBadInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corrupt.arrow")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(fh, ipc.WithSchema(nestedSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err != nil {
		t.Fatalf("the file before the corruption: %v", err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-10:]))
	footer := b[len(b)-10-n : len(b)-10]
	fw := &walker{buf: footer}
	root := fw.root()
	s := fw.indirect(root, root.Offset(footerSchema))
	binary.LittleEndian.PutUint32(footer[vectorLenAt(s, schemaFields):], 1<<30)

	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path)
	if !errors.Is(err, schema.ErrBadInput) || !errors.Is(err, errCorruptSchema) {
		t.Fatalf("Open: %v, want bad input naming the corrupt schema", err)
	}
}

// TestCorruptIPCLengthsAreBadInput writes an Arrow IPC stream whose record
// batch claims a 1 TiB body, or 2 GB of metadata, and reads it.
func TestCorruptIPCLengthsAreBadInput(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "run", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewInt32Builder(memory.DefaultAllocator)
	b.AppendValues([]int32{1, 2, 3}, nil)
	col := b.NewArray()
	rec := array.NewRecord(sc, []arrow.Array{col}, 3)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sc))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rec.Release()
	col.Release()
	// The record batch follows the schema message (continuation, length,
	// metadata, no body).
	at := 8 + int(binary.LittleEndian.Uint32(buf.Bytes()[4:]))

	for _, tc := range []struct {
		name, want string
		corrupt    func(data []byte)
	}{
		{"body length", "corrupt length", func(data []byte) {
			batch := data[at+8 : at+8+int(binary.LittleEndian.Uint32(data[at+4:]))]
			m := (&walker{buf: batch}).root()
			o := m.Offset(messageBodyLength)
			if o == 0 {
				t.Fatal("record batch message without a bodyLength")
			}
			binary.LittleEndian.PutUint64(batch[m.Pos+flatbuffers.UOffsetT(o):], 1<<40)
		}},
		{"metadata length", "corrupt stream", func(data []byte) {
			binary.LittleEndian.PutUint32(data[at+4:], 0x7FFF0000)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Clone(buf.Bytes())
			tc.corrupt(data)
			path := filepath.Join(t.TempDir(), "corrupt.arrows")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := Open(path)
			if err == nil {
				defer r.Close()
				_, err = r.Next()
			}
			if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("read: %v, want bad input saying %q", err, tc.want)
			}
		})
	}
}

// TestSchemaMessageBodyPastTheEnd: a schema message (as Parquet's
// ARROW:schema holds one) claiming a body larger than the bytes left is
// refused before arrow makes a buffer of that size.
func TestSchemaMessageBodyPastTheEnd(t *testing.T) {
	for _, body := range []int64{0, 1 << 35} {
		fb := flatbuffers.NewBuilder(64)
		fb.StartObject(5)
		fb.PrependInt64Slot(3, body, 0) // bodyLength
		fb.Finish(fb.EndObject())
		msg := fb.FinishedBytes()
		stream := binary.LittleEndian.AppendUint32(nil, 0xFFFFFFFF)
		stream = binary.LittleEndian.AppendUint32(stream, uint32(len(msg)))
		stream = append(stream, msg...)
		err := checkIPCStream(bytes.NewReader(stream), int64(len(stream)))
		if got := err != nil && errors.Is(err, errCorruptSchema); got != (body > 0) {
			t.Errorf("body %d: err = %v", body, err)
		}
	}
}
