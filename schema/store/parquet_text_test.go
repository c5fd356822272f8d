package store_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// duckdbParquet writes the result of query to a Parquet file in a fresh
// directory with DuckDB's COPY, as `rftpipe sql --format parquet` does.
func duckdbParquet(t *testing.T, query string) string {
	t.Helper()
	db, err := duckdb.Open(duckdb.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := filepath.Join(t.TempDir(), "duck.parquet")
	if _, err := duckdb.CopyParquet(t.Context(), db, query, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// firstRow reads every batch of path and returns the first row's values by
// column (as arrow's ValueStr gives them) and the schema.
func firstRow(t *testing.T, path string) (map[string]string, *arrow.Schema) {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	vals := map[string]string{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(vals) == 0 {
			for i, f := range rec.Schema().Fields() {
				vals[f.Name] = rec.Column(i).ValueStr(0)
			}
		}
	}
	return vals, r.Schema()
}

// TestDuckDBTypes: a Parquet file DuckDB writes with its JSON, UUID, ENUM,
// HUGEINT and TIMESTAMPTZ types reads with each column's canonical type and
// value (JSON text, a UUID's text, the enum's label, an int64, a UTC
// timestamp), passes the store's type check (info as JSON is utf8), and so
// does every file rftpipe writes from it.
func TestDuckDBTypes(t *testing.T) {
	in := duckdbParquet(t, `SELECT 3::HUGEINT AS batch, 'a' AS task, 0 AS run, 1.0::DOUBLE AS reward, 2 AS prompt_length,
		[1, 2, 3] AS tokens, json_object('model_version', 7, 'ok', true) AS info,
		'{"k": [1, 2.5]}'::JSON AS extra, '6ba7b810-9dad-11d1-80b4-00c04fd430c8'::UUID AS trace,
		'mid'::ENUM('low', 'mid', 'high') AS level, 5::HUGEINT AS big,
		TIMESTAMPTZ '2024-03-01 12:30:00+02' AS at`)
	want := map[string]struct {
		typ arrow.DataType
		val string
	}{
		schema.Batch: {arrow.PrimitiveTypes.Int64, "3"},
		schema.Info:  {arrow.BinaryTypes.String, `{"model_version":7,"ok":true}`},
		"extra":      {arrow.BinaryTypes.String, `{"k": [1, 2.5]}`},
		"trace":      {arrow.BinaryTypes.String, "6ba7b810-9dad-11d1-80b4-00c04fd430c8"},
		"level":      {arrow.BinaryTypes.String, "mid"},
		"big":        {arrow.PrimitiveTypes.Float64, "5"}, // DuckDB writes HUGEINT as DOUBLE
		"at":         {&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC).Format("2006-01-02 15:04:05Z")},
	}
	dir := t.TempDir()
	for _, path := range []string{in, filepath.Join(dir, "copy.parquet"), filepath.Join(dir, "copy.jsonl")} {
		if path != in {
			r, err := store.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Copy(t.Context(), r, path, nil); err != nil {
				t.Fatal(err)
			}
			r.Close()
		}
		vals, sc := firstRow(t, path)
		if err := schema.CheckKnown(path, sc); err != nil {
			t.Errorf("%s: %v", filepath.Base(path), err)
		}
		for name, w := range want {
			f, ok := sc.FieldsByName(name)
			switch {
			case !ok:
				t.Errorf("%s: no column %s", filepath.Base(path), name)
			case strings.HasSuffix(path, ".jsonl") && (name == "at" || name == "big"):
				// JSONL has no timestamp type, and writes 5.0 as 5.
			case !arrow.TypeEqual(f[0].Type, w.typ):
				t.Errorf("%s: %s is %s, want %s", filepath.Base(path), name, f[0].Type, w.typ)
			case vals[name] != w.val:
				t.Errorf("%s: %s = %s, want %s", filepath.Base(path), name, vals[name], w.val)
			}
		}
	}
}

// TestDuckDBHugeintPastInt64: a HUGEINT id past int64's range (DuckDB
// writes it as a DOUBLE) is refused naming the file, row and column.
func TestDuckDBHugeintPastInt64(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{"18446744073709551621", `row 1: column "task": 1.8446744073709552e+19 is outside int64's range`},
		{"-170141183460469231731687303715884105727", `row 1: column "task": -1.7014118346046923e+38 is outside int64's range`},
		{"1152921504606846977", `row 1: column "task": 1.152921504606847e+18 is an integer past 2^53 in a float column`},
	} {
		in := duckdbParquet(t, `SELECT * FROM (VALUES (0, 1::HUGEINT), (1, `+tc.value+`::HUGEINT)) v(batch, task) ORDER BY batch`)
		r, err := store.Open(in)
		if err == nil {
			_, err = r.Next()
			r.Close()
		}
		if err == nil || !strings.Contains(err.Error(), in+": "+tc.want) {
			t.Errorf("task %s: %v, want %s", tc.value, err, tc.want)
		}
	}
}

// TestJSONColumnNotJSON: a column annotated JSON whose value is not JSON
// text (not what DuckDB writes, but what another writer may) is refused
// naming the file, row and column, so JSONL is never written from it.
func TestJSONColumnNotJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.parquet")
	node, err := pqschema.NewPrimitiveNodeLogical("extra", parquet.Repetitions.Optional, pqschema.JSONLogicalType{}, parquet.Types.ByteArray, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	root, err := pqschema.NewGroupNode("schema", parquet.Repetitions.Required, pqschema.FieldList{node}, -1)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := file.NewParquetWriter(fh, root)
	cw, err := w.AppendRowGroup().NextColumn()
	if err != nil {
		t.Fatal(err)
	}
	vals := []parquet.ByteArray{parquet.ByteArray(`{"a": 1}`), parquet.ByteArray(`{"a": `)}
	if _, err := cw.(*file.ByteArrayColumnChunkWriter).WriteBatch(vals, []int16{1, 1, 0}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Next()
	if want := path + `: row 1: column "extra": a JSON value that is not valid UTF-8 JSON text`; err == nil || err.Error() != want || !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("got %v, want %s", err, want)
	}
}
