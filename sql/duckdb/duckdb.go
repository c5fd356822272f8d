// Package duckdb is the one package that links DuckDB. It opens in-process
// DuckDB databases configured through the DSN; DuckDB reads Parquet stores
// itself (read_parquet) and hands back small results, or a few numeric
// columns of one value per experience by columns (QueryColumns), so the
// stores' bulk data does not cross between DuckDB and Go.
package duckdb

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"runtime"

	_ "github.com/marcboeker/go-duckdb" // registers the "duckdb" driver
)

// Options configures a DuckDB instance.
type Options struct {
	Threads     int    // worker threads (0: GOMAXPROCS)
	MemoryLimit string // e.g. "1GB" (DuckDB's buffer manager; it does not cap RSS)
	TempDir     string // spill directory (default: the OS temp dir)
}

// Open starts an in-memory DuckDB database.
func Open(o Options) (*sql.DB, error) {
	q := url.Values{}
	threads := o.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	q.Set("threads", fmt.Sprint(threads))
	if o.MemoryLimit != "" {
		q.Set("memory_limit", o.MemoryLimit)
	}
	tmp := o.TempDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	q.Set("temp_directory", tmp)
	db, err := sql.Open("duckdb", "?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("duckdb: %w", err)
	}
	// One connection: an in-memory database is private to its connection's
	// instance, and views created on it must stay visible.
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("duckdb: %w", err)
	}
	return db, nil
}

// QuoteString renders s as a SQL string literal.
func QuoteString(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// QuoteIdent renders s as a SQL identifier.
func QuoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}
