package duckdb

import (
	"context"
	"strings"

	"github.com/rftpipe/rftpipe/schema/store"
)

// Located returns err or, when err is DuckDB failing on a store's bytes (an
// IO error, an internal "Invalid Error" such as "don't know what type", a
// Thrift exception: a cut or overwritten page reads as any of them), the
// store reader's one-line bad-input error naming the file, row group and
// column of the first damaged store of stores. A store the reader reads
// whole leaves err as it is.
func Located(ctx context.Context, err error, stores ...string) error {
	if err == nil || ctx.Err() != nil || !readFailure(err.Error()) {
		return err
	}
	for _, s := range stores {
		if lerr := store.Locate(ctx, s); lerr != nil {
			return lerr
		}
	}
	return err
}

// readFailure reports whether a DuckDB error message is one of reading a
// file's bytes (user errors are Parser, Binder, Catalog, Conversion… errors).
func readFailure(msg string) bool {
	for _, kind := range []string{"IO Error", "Invalid Error", "TProtocolException"} {
		if strings.Contains(msg, kind) {
			return true
		}
	}
	return false
}
