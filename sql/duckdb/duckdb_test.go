package duckdb

import "testing"

func TestOpenReadsParquet(t *testing.T) {
	db, err := Open(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, tasks int64
	q := "SELECT count(*), count(DISTINCT (batch, task)) FROM read_parquet(" + QuoteString("../../fixtures/stores/demo.parquet") + ")"
	if err := db.QueryRow(q).Scan(&rows, &tasks); err != nil {
		t.Fatal(err)
	}
	if rows != 384 || tasks != 48 {
		t.Fatalf("rows, tasks = %d, %d; want 384, 48", rows, tasks)
	}
}

func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, str, ident string }{
		{"a", "'a'", `"a"`},
		{"it's", "'it''s'", `"it's"`},
		{`x"y`, `'x"y'`, `"x""y"`},
	} {
		if got := QuoteString(c.in); got != c.str {
			t.Errorf("QuoteString(%q) = %s, want %s", c.in, got, c.str)
		}
		if got := QuoteIdent(c.in); got != c.ident {
			t.Errorf("QuoteIdent(%q) = %s, want %s", c.in, got, c.ident)
		}
	}
}
