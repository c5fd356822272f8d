//go:build !linux

package duckdb

// Trim hands the memory DuckDB has freed back to the OS (a no-op where the
// C library has no malloc_trim).
func Trim() {}
