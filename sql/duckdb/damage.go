package duckdb

import (
	"context"
	"errors"

	duck "github.com/marcboeker/go-duckdb"

	"github.com/rftpipe/rftpipe/schema/store"
)

// Located returns err or, when err is DuckDB failing on a store's bytes (an
// IO error, an internal "Invalid Error" such as "don't know what type", a
// Thrift exception: a cut or overwritten page reads as any of them), the
// store reader's one-line bad-input error naming the file, row group and
// column of the first damaged store of stores. A store the reader reads
// whole leaves err as it is.
func Located(ctx context.Context, err error, stores ...string) error {
	if err == nil || ctx.Err() != nil || !ReadFailure(err) {
		return err
	}
	for _, s := range stores {
		if lerr := store.Locate(ctx, s); lerr != nil {
			return lerr
		}
	}
	return err
}

// ReadFailure reports whether err is DuckDB failing on a file's bytes, by
// go-duckdb's error type: an IO error, an invalid-input error, or an
// "Invalid Error" (DuckDB's internal "don't know what type", and the type
// go-duckdb gives a message of no known kind, such as a Thrift
// TProtocolException). User errors (Parser, Binder, Catalog, Conversion…)
// are not.
func ReadFailure(err error) bool {
	var t duck.ErrorType
	var de *duck.Error
	var qe *QueryError
	switch {
	case errors.As(err, &qe):
		t = qe.Type
	case errors.As(err, &de):
		t = de.Type
	default:
		return false
	}
	return t == duck.ErrorTypeIO || t == duck.ErrorTypeInvalidInput || t == duck.ErrorTypeInvalid
}
