package duckdb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

// TestAttachDifferingFiles checks that a directory whose Parquet files
// differ in columns is refused with one line naming both files and the
// column.
func TestAttachDifferingFiles(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{"a.parquet": "demo.parquet", "b.parquet": "dpo.parquet"} {
		data, err := os.ReadFile(filepath.Join("../../fixtures/stores", src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, err := Open(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = Attach(context.Background(), db, []Store{{Path: dir}}, t.TempDir())
	want := filepath.Join(dir, "b.parquet") + `: column "chosen": schema differs from ` + filepath.Join(dir, "a.parquet") + ": the column is only in this file"
	if err == nil || err.Error() != want || !errors.Is(err, schema.ErrBadInput) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestCheckWrites(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	if err := os.WriteFile(in, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	stores := []Store{{Path: in}}
	for q, bad := range map[string]bool{
		"COPY (SELECT * FROM experiences) TO '" + in + "' (FORMAT parquet)": true,
		"copy experiences to\n'" + in + "'":                                 true,
		"COPY (SELECT 1) TO '" + filepath.Join(dir, "other.parquet") + "'":  false,
		"SELECT 'COPY' AS a, 'TO' AS b FROM experiences":                    false,
	} {
		err := CheckWrites(q, stores)
		if (err != nil) != bad || bad && !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("%q: err %v, want refused %v", q, err, bad)
		}
	}
}
