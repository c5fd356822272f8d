package duckdb

import "testing"

// TestListColumnsReadIntact checks that DuckDB reads rftpipe's Parquet list
// columns as lists, with the lengths the store holds.
func TestListColumnsReadIntact(t *testing.T) {
	db, err := Open(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var bad, rows int64
	var firstLP float64
	q := `SELECT count(*) FILTER (WHERE len(logprobs) != len(action_mask) OR len(tokens) != prompt_length + len(logprobs)),
	             count(*), min(logprobs[1])
	      FROM read_parquet(` + QuoteString("../../fixtures/stores/demo.parquet") + `)`
	if err := db.QueryRow(q).Scan(&bad, &rows, &firstLP); err != nil {
		t.Fatal(err)
	}
	if bad != 0 || rows != 384 || firstLP >= 0 {
		t.Fatalf("bad rows %d, rows %d, min first logprob %v", bad, rows, firstLP)
	}
}
