package trinity_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// patchPayload replaces the first occurrence of old in row id's payload
// with new (of the same length), keeping the payload's framing.
func patchPayload(t *testing.T, path string, id int, old, new string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var blob []byte
	if err := db.QueryRow("SELECT experience_bytes FROM experience_buffer WHERE id = ?", id).Scan(&blob); err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(blob, []byte(old))
	if at < 0 || len(old) != len(new) {
		t.Fatalf("no %q in the payload of id %d", old, id)
	}
	copy(blob[at:], new)
	if _, err := db.Exec("UPDATE experience_buffer SET experience_bytes = ? WHERE id = ?", blob, id); err != nil {
		t.Fatal(err)
	}
}

// TestTextFromBuffers: a buffer's text that is not UTF-8, or that holds a
// UTF-16 surrogate (what pickle writes for Python's "Q\ud800tion"), is
// refused naming the table, the row id and the field, whatever the
// output — JSONL, Parquet or another buffer — and no output is left.
func TestTextFromBuffers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
		field string
		msg   string
	}{
		{"surrogate in prompt_text", func(t *testing.T, path string) {
			patchPayload(t, path, 3, "Question 2:", "Q\xed\xa0\x80tion 2:")
		}, "prompt_text", "a str holds the UTF-16 surrogate U+D800 at byte 1"},
		{"invalid UTF-8 in an info key", func(t *testing.T, path string) {
			patchPayload(t, path, 3, "task_desc", "\xffask_desc")
		}, "info", "a str is not UTF-8 (byte 0xff at 0)"},
		{"surrogate in msg_id", func(t *testing.T, path string) {
			sqliteExec(t, path, "UPDATE experience_buffer SET msg_id = CAST(X'76EDB080' AS TEXT) WHERE id = 3")
		}, "msg_id", "text holds the UTF-16 surrogate U+DC00 at byte 1"},
		{"invalid UTF-8 in task_id", func(t *testing.T, path string) {
			sqliteExec(t, path, "UPDATE experience_buffer SET task_id = CAST(X'3180' AS TEXT) WHERE id = 3")
		}, "task_id", "text is not UTF-8 (byte 0x80 at 1)"},
	} {
		for _, out := range []string{"out.jsonl", "out.parquet", "out.db"} {
			t.Run(tc.name+" to "+out, func(t *testing.T) {
				path := sqliteCopy(t, "experience.db")
				tc.setup(t, path)
				dst := filepath.Join(t.TempDir(), out)
				if out == "out.db" {
					dst = sqliteURL(dst, "copy")
				}
				r := openStore(t, sqliteURL(path, "experience_buffer"))
				defer r.Close()
				_, err := copyErr(r, dst)
				var ie *schema.InputError
				if !errors.Is(err, schema.ErrBadInput) || !errors.As(err, &ie) || ie.Column != tc.field {
					t.Fatalf("got %v, want bad input in column %s", err, tc.field)
				}
				for _, w := range []string{"table experience_buffer, id 3:", tc.msg} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if left, _ := filepath.Glob(filepath.Join(filepath.Dir(strings.TrimPrefix(strings.Split(dst, "?")[0], "sqlite:///")), "*")); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
			})
		}
	}
}

func sqliteExec(t *testing.T, path, q string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// TestTextIntoBuffers: a store row whose text is not UTF-8, or whose JSON
// text escapes a lone surrogate, is refused when written into a buffer
// (never pickled raw, never replaced by U+FFFD), naming the row and the
// column; the buffer gets nothing.
func TestTextIntoBuffers(t *testing.T) {
	for _, tc := range []struct {
		column, value string
		msg           string
	}{
		{trinity.ColPromptText, "v\xed\xa0\x80", "text holds the UTF-16 surrogate U+D800 at byte 1"},
		{trinity.ColResponseText, "\xc3(", "text is not UTF-8 (byte 0xc3 at 0)"},
		{schema.Suffix, "ab\xff", "text is not UTF-8 (byte 0xff at 2)"},
		{schema.Info, `{"k": "v\ud800"}`, `JSON at byte 8: \ud800: a lone UTF-16 surrogate`},
		{schema.Info, `{"k": "\udc00\ud800"}`, `JSON at byte 7: \udc00: a lone UTF-16 surrogate`},
		{schema.Metrics, "{\"k\xed\xa0\x80\": 1}", "JSON text holds the UTF-16 surrogate U+D800 at byte 3"},
	} {
		t.Run(strconv.Quote(tc.column+" "+tc.value), func(t *testing.T) {
			in := openStore(t, filepath.Join(fixtures, "overrides.jsonl"))
			defer in.Close()
			rec, err := in.Next()
			if err != nil {
				t.Fatal(err)
			}
			rec = withText(t, rec, tc.column, 2, tc.value)
			defer rec.Release()
			path := filepath.Join(t.TempDir(), "b.db")
			w, err := trinity.Create(context.Background(), sqliteURL(path, "T"), rec.Schema(), trinity.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = w.Write(rec)
			w.Abort()
			var ie *schema.InputError
			if !errors.Is(err, schema.ErrBadInput) || !errors.As(err, &ie) || ie.Column != tc.column || ie.Row != 2 {
				t.Fatalf("got %v, want bad input in row 2, column %s", err, tc.column)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the buffer file is left: %v", err)
			}
		})
	}
}

// withText returns rec with row i of string column name set to s (the
// column added when rec lacks it).
func withText(t *testing.T, rec arrow.Record, name string, i int, s string) arrow.Record {
	t.Helper()
	var old arrow.Array
	if idx := rec.Schema().FieldIndices(name); len(idx) > 0 {
		old = rec.Column(idx[0])
	}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for k := 0; k < int(rec.NumRows()); k++ {
		switch {
		case k == i:
			b.Append(s)
		case old == nil || old.IsNull(k):
			b.AppendNull()
		default:
			b.Append(old.(*array.String).Value(k))
		}
	}
	col := b.NewArray()
	defer col.Release()
	fields, cols := rec.Schema().Fields(), rec.Columns()
	if idx := rec.Schema().FieldIndices(name); len(idx) > 0 {
		cols = append([]arrow.Array(nil), cols...)
		cols[idx[0]] = col
	} else {
		fields = append(fields, arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true})
		cols = append(cols, col)
	}
	md := rec.Schema().Metadata()
	return array.NewRecord(arrow.NewSchema(fields, &md), cols, rec.NumRows())
}
