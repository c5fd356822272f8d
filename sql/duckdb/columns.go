package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/marcboeker/go-duckdb"
)

// QueryColumns runs q and appends its result's columns, in order, to dst:
// one per column of the result, each a *[]int64 (an INTEGER or BIGINT
// column), a *[]float64 (a DOUBLE or FLOAT one, widened) or a *[]bool (a
// BOOLEAN one). DuckDB hands
// the result over by columns (its Arrow interface, whose records are
// arrow-go v18's: go-duckdb's), not row by row through database/sql, which
// costs about half a microsecond a row on the Go side. go-duckdb gathers
// the whole result before the first column is read, so it is held twice
// for a moment (DuckDB's and the slices), and a cancelled ctx stops the
// query between result chunks only, not within DuckDB's execution. A null
// is an error: the query renders what is absent (coalesce). A query that
// fails while it executes is run again through database/sql, whose error
// carries DuckDB's error type (ReadFailure tells a damaged file by it); the
// Arrow interface's own error for it is untyped.
func QueryColumns(ctx context.Context, db *sql.DB, q string, dst ...any) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var failed error
	err = conn.Raw(func(dc any) error {
		dconn, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("duckdb: not a driver connection")
		}
		ar, err := duck.NewArrowFromConn(dconn)
		if err != nil {
			return err
		}
		rdr, err := ar.QueryContext(ctx, q)
		if err != nil {
			failed = err
			return nil
		}
		defer rdr.Release()
		if n := len(rdr.Schema().Fields()); n != len(dst) {
			return fmt.Errorf("duckdb: the query gives %d columns, %d wanted", n, len(dst))
		}
		for rdr.Next() {
			rec := rdr.Record()
			for i, d := range dst {
				if err := appendColumn(d, rec.Column(i), rec.ColumnName(i)); err != nil {
					return err
				}
			}
		}
		return rdr.Err()
	})
	if err != nil || failed == nil {
		return err
	}
	var de *duck.Error
	if errors.As(failed, &de) || ctx.Err() != nil {
		return failed // typed already (a prepare error), or cancelled
	}
	if _, err := conn.ExecContext(ctx, q); err != nil {
		return err
	}
	return failed
}

// appendColumn appends column a (named name) to dst.
func appendColumn(dst any, a arrow.Array, name string) error {
	if a.NullN() > 0 {
		return fmt.Errorf("duckdb: column %s of the result holds nulls", name)
	}
	switch d := dst.(type) {
	case *[]int64:
		switch c := a.(type) {
		case *array.Int64:
			*d = append(*d, c.Int64Values()...)
			return nil
		case *array.Int32:
			for _, v := range c.Int32Values() {
				*d = append(*d, int64(v))
			}
			return nil
		}
	case *[]float64:
		switch c := a.(type) {
		case *array.Float64:
			*d = append(*d, c.Float64Values()...)
			return nil
		case *array.Float32:
			for _, v := range c.Float32Values() {
				*d = append(*d, float64(v))
			}
			return nil
		}
	case *[]bool:
		if c, ok := a.(*array.Boolean); ok {
			for i := range c.Len() {
				*d = append(*d, c.Value(i))
			}
			return nil
		}
	}
	return fmt.Errorf("duckdb: column %s of the result is %s, not what %T takes", name, a.DataType(), dst)
}
