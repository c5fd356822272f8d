package trinity_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

// onlyRow copies edge/bad.db keeping row id alone.
func onlyRow(t *testing.T, id int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, "edge/bad.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bad.db")
	writeFile(t, path, b)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DELETE FROM experience_buffer WHERE id <> ?", id); err != nil {
		t.Fatal(err)
	}
	return sqliteURL(path, "experience_buffer")
}

// TestBadBlobs: each defective row of edge/bad.db stops the read with a bad
// input error (exit 2) naming the table, the row id and the field.
func TestBadBlobs(t *testing.T) {
	for _, tc := range []struct {
		id          int
		what, field string
		msg         string
	}{
		{1, "wrong magic", "experience_bytes", `magic "TRXQ", want "TRXP"`},
		{2, "unknown version", "experience_bytes", "unknown payload version 2"},
		{3, "truncated tensor block", "experience_bytes", "tensor block truncated"},
		{4, "metadata length past the blob", "experience_bytes", "metadata length 999 runs past the end of the 999-byte payload"},
		{5, "numpy scalar in metrics", "metrics", "pickle opcode STACK_GLOBAL"},
		{6, "two experiences in one payload", "experience_bytes", "payload holds 2 experiences"},
		{7, "gap between two tensors", "experience_bytes", "not contiguous"},
		{8, "NULL payload", "experience_bytes", "NULL payload"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			err := readErr(onlyRow(t, tc.id))
			if err == nil {
				t.Fatal("read without error")
			}
			if !errors.Is(err, schema.ErrBadInput) {
				t.Errorf("not bad input (exit 2): %v", err)
			}
			var ie *schema.InputError
			if !errors.As(err, &ie) || ie.Column != tc.field {
				t.Errorf("error %q: want column %q", err, tc.field)
			}
			for _, w := range []string{"table experience_buffer, id " + string(rune('0'+tc.id)), tc.msg, "?table=experience_buffer: row 0: "} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// TestBadMaskLength: row 9's action_mask is one longer than the response;
// upstream reads it, and the store's validation refuses it.
func TestBadMaskLength(t *testing.T) {
	r, err := store.Open(onlyRow(t, 9))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	file, row, _ := r.Pos()
	err = schema.Validate(file, row, rec, schema.ValidateOptions{})
	if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "row 0") {
		t.Fatalf("got %v, want a row 0 validation error", err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the only row: %v", err)
	}
}

// TestBadBufferValidRows: rows 10-12 of bad.db are valid.
func TestBadBufferValidRows(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(fixtures, "edge/bad.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bad.db")
	writeFile(t, path, b)
	db, _ := sql.Open("sqlite", path)
	if _, err := db.Exec("DELETE FROM experience_buffer WHERE id < 10"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r, err := store.Open(sqliteURL(path, "experience_buffer"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := int64(0)
	if err := r.ForEach(context.Background(), func(rec arrow.Record) error {
		n += rec.NumRows()
		return schema.Validate("bad.db", 0, rec, schema.ValidateOptions{})
	}); err != nil || n != 3 {
		t.Fatalf("%d rows, %v; want 3 valid rows", n, err)
	}
}

func TestNotABuffer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, _ := sql.Open("sqlite", path)
	if _, err := db.Exec("CREATE TABLE t (a INTEGER)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for table, want := range map[string]string{"t": "not a Trinity-RFT buffer table", "u": "no such table"} {
		err := readErr(sqliteURL(path, table))
		if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("table %s: got %v, want %q", table, err, want)
		}
	}
	err := readErr(sqliteURL(filepath.Join(t.TempDir(), "none.db"), "t"))
	if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "no such database file") {
		t.Errorf("missing file: got %v", err)
	}
}
