package duckdb

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	duck "github.com/marcboeker/go-duckdb"
)

// TestQueryColumns: a result of several record batches comes back whole by
// columns (integers of either width, doubles, NaN kept, booleans); a null, a column
// of another type or count is an error; a failing query's error is
// DuckDB's own, typed.
func TestQueryColumns(t *testing.T) {
	db, err := Open(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var a, b []int64
	var c, f []float64
	var o []bool
	q := `SELECT i, (i % 7)::INTEGER, CASE WHEN i = 4000 THEN 'NaN'::DOUBLE ELSE i / 4 END, (i / 3)::FLOAT, i % 3 = 1 FROM range(5000) t(i) ORDER BY i`
	if err := QueryColumns(ctx, db, q, &a, &b, &c, &f, &o); err != nil {
		t.Fatal(err)
	}
	if n := 5000; len(a) != n || len(b) != n || len(c) != n || len(f) != n || len(o) != n {
		t.Fatalf("columns of %d, %d, %d, %d, %d rows, want %d", len(a), len(b), len(c), len(f), len(o), n)
	}
	for i, v := range o {
		if v != (i%3 == 1) {
			t.Fatalf("row %d: boolean %v", i, v)
		}
	}
	for i := range a {
		want := float64(i) / 4
		if i == 4000 {
			want = math.NaN()
		}
		if a[i] != int64(i) || b[i] != int64(i%7) || !(c[i] == want || math.IsNaN(c[i]) && math.IsNaN(want)) || f[i] != float64(float32(float64(i)/3)) {
			t.Fatalf("row %d: %d %d %v %v", i, a[i], b[i], c[i], f[i])
		}
	}
	for _, tc := range []struct {
		q, want string
		dst     []any
	}{
		{`SELECT NULL::BIGINT`, "holds nulls", []any{new([]int64)}},
		{`SELECT 'x'`, "is utf8", []any{new([]int64)}},
		{`SELECT 1::BIGINT, 2::BIGINT`, "gives 2 columns, 1 wanted", []any{new([]int64)}},
		{`SELECT 1.5::DOUBLE`, "is float64, not what *[]int64 takes", []any{new([]int64)}},
	} {
		if err := QueryColumns(ctx, db, tc.q, tc.dst...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.q, err, tc.want)
		}
	}
	err = QueryColumns(ctx, db, `SELECT * FROM no_such_table`, new([]int64))
	var de *duck.Error
	if !errors.As(err, &de) || de.Type != duck.ErrorTypeCatalog {
		t.Errorf("a failing query: error %v (%T), want DuckDB's catalog error", err, err)
	}
	// A query that fails as it executes, on a damaged file: its error is
	// DuckDB's typed one, which ReadFailure tells.
	bad := filepath.Join(t.TempDir(), "bad.parquet")
	data, err := os.ReadFile("../../fixtures/stores/demo.parquet")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1500; i < 30000; i += 97 { // pages, not the footer: the query fails as it runs
		data[i] ^= 0x5a
	}
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err = QueryColumns(ctx, db, `SELECT sum(len(logprobs))::BIGINT FROM read_parquet(`+QuoteString(bad)+`)`, new([]int64))
	if !ReadFailure(err) {
		t.Errorf("a damaged file: error %v (%T), want one ReadFailure tells", err, err)
	}
}
