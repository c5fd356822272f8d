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
	_, err = Attach(context.Background(), db, []Store{{Path: dir}}, t.TempDir())
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

// TestAttachPartitioned: SQL over a Hive-partitioned store (batch=B
// directories, the files without the column) sees the partition key as the
// column the store reader gives, with every row; so does a store whose
// pages use the legacy LZ4 codec, which DuckDB does not read itself.
func TestAttachPartitioned(t *testing.T) {
	db, err := Open(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	base := QuoteString("../../fixtures/foreign/base.parquet")
	dir := t.TempDir()
	for _, b := range []string{"0", "1"} {
		sub := filepath.Join(dir, "batch="+b)
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("COPY (SELECT * EXCLUDE (batch) FROM read_parquet(" + base + ") WHERE batch = " + b + ") TO " + QuoteString(filepath.Join(sub, "part-0.parquet"))); err != nil {
			t.Fatal(err)
		}
	}
	const q = "SELECT any_value(typeof(batch)) || ' ' || count(*) || ' ' || sum(batch) || ' ' || count(DISTINCT task) FROM experiences"
	var want string
	if _, err := Attach(t.Context(), db, []Store{{Path: "../../fixtures/foreign/base.parquet"}}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(q).Scan(&want); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, filepath.Join(dir, "*", "*.parquet"), "../../fixtures/foreign/npm/arrowrs_lz4.parquet"} {
		if _, err := Attach(t.Context(), db, []Store{{Path: path}}, t.TempDir()); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.QueryRow(q).Scan(&got); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", path, got, err, want)
		}
	}
}
