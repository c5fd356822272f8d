package duckdb

// #include <malloc.h>
import "C"

// Trim hands the memory DuckDB has freed back to the OS. glibc keeps freed
// memory in its arenas, so without it the peak of a group pass stays in the
// process's RSS under everything that runs after it. Call it once the
// database is closed.
func Trim() { C.malloc_trim(0) }
