package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"runtime"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	"golang.org/x/sync/errgroup"
)

// columnSink writes each record batch as one row group (or several, past
// RowGroupRows) and encodes and compresses the columns of a batch
// concurrently, one goroutine per column, each into its own buffered column
// chunk; the row group is then flushed in column order, so the file's bytes
// do not depend on the scheduling. pqarrow's FileWriter encodes one column
// after another, which leaves all but one core idle while a store is written.
//
// It computes the Parquet definition and repetition levels itself, so it only
// takes schemas whose columns are flat (see flatColumn): every column of the
// experience store is. Other schemas are written by pqarrow's FileWriter.
type columnSink struct {
	fw      *file.Writer
	props   *parquet.WriterProperties
	aprops  pqarrow.ArrowWriterProperties
	scratch []levels // per column, reused across batches
}

// levels holds one column's definition and repetition levels.
type levels struct{ def, rep []int16 }

// flatColumn reports whether t is a primitive type or a list of one: the
// shapes columnSink computes levels for.
func flatColumn(t arrow.DataType) bool {
	if l, ok := t.(*arrow.ListType); ok {
		t = l.Elem()
	}
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.STRING, arrow.BINARY:
		return true
	}
	return false
}

func newColumnSink(w io.Writer, s *arrow.Schema, props *parquet.WriterProperties) (sink, error) {
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())
	pqs, err := pqarrow.ToParquet(s, props, aprops)
	if err != nil {
		return nil, err
	}
	// The Arrow schema goes in the footer, as pqarrow's FileWriter puts it, so
	// readers get back the exact Arrow types.
	meta := metadata.NewKeyValueMetadata()
	meta.Append("ARROW:schema", base64.StdEncoding.EncodeToString(serializeSchema(s)))
	fw := file.NewParquetWriter(w, pqs.Root(), file.WithWriterProps(props), file.WithWriteMetadata(meta))
	return &columnSink{fw: fw, props: props, aprops: aprops, scratch: make([]levels, s.NumFields())}, nil
}

func (c *columnSink) Write(rec arrow.Record) error {
	n := rec.NumRows()
	step := c.props.MaxRowGroupLength()
	for off := int64(0); off < n || off == 0; off += step {
		part := rec.NewSlice(off, min(off+step, n))
		err := c.writeRowGroup(part)
		part.Release()
		if err != nil || n == 0 {
			return err
		}
	}
	return nil
}

func (c *columnSink) writeRowGroup(rec arrow.Record) error {
	rgw := c.fw.AppendBufferedRowGroup()
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, col := range rec.Columns() {
		g.Go(func() error {
			cw, err := rgw.Column(i)
			if err != nil {
				return err
			}
			return c.writeColumn(cw, col, rec.Schema().Field(i), &c.scratch[i])
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return rgw.Close()
}

// writeColumn encodes one flat column into its column chunk.
func (c *columnSink) writeColumn(cw file.ColumnChunkWriter, col arrow.Array, f arrow.Field, lv *levels) error {
	// Each column gets its own write context: its scratch buffer is not shared.
	ctx := pqarrow.NewArrowWriteContext(context.Background(), &c.aprops)
	maxDef := cw.Descr().MaxDefinitionLevel()
	list, ok := col.(*array.List)
	if !ok {
		lv.def = lv.def[:0]
		if maxDef > 0 {
			for i := 0; i < col.Len(); i++ {
				lv.def = append(lv.def, b2i(col.IsValid(i)))
			}
		}
		return pqarrow.WriteArrowToColumn(ctx, cw, col, lv.def, nil, f.Nullable)
	}
	// A list column: a group, optional or required, holding a repeated group
	// of elements, optional or required (pqarrow decides; the levels say
	// which). An empty list sits one level below the repeated group's, a null
	// list two below; a null element one below a present one.
	info := cw.LevelInfo()
	empty := info.RepeatedAncestorDefLevel - 1
	elemOptional := maxDef > info.RepeatedAncestorDefLevel
	values := list.ListValues()
	nulls := elemOptional && values.NullN() > 0
	n := list.Len()
	var first, end int64
	if n > 0 {
		first, _ = list.ValueOffsets(0)
		_, end = list.ValueOffsets(n - 1)
	}
	// One level per value, plus one per empty or null list.
	size := int(end - first)
	for i := 0; i < n; i++ {
		if lo, hi := list.ValueOffsets(i); lo == hi {
			size++
		}
	}
	lv.def, lv.rep = grow(lv.def, size), grow(lv.rep, size)
	k := 0
	for i := 0; i < n; i++ {
		lo, hi := list.ValueOffsets(i) // Offsets() ignores a slice's offset
		switch {
		case list.IsNull(i):
			if hi != lo {
				return errors.New("a null list with values is not supported")
			}
			lv.def[k], lv.rep[k] = empty-1, 0
			k++
		case hi == lo:
			lv.def[k], lv.rep[k] = empty, 0
			k++
		default:
			def, rep := lv.def[k:k+int(hi-lo)], lv.rep[k:k+int(hi-lo)]
			for j := range def {
				def[j], rep[j] = maxDef, 1
			}
			rep[0] = 0
			if nulls {
				for j := range def {
					if values.IsNull(int(lo) + j) {
						def[j]--
					}
				}
			}
			k += len(def)
		}
	}
	leaf := array.NewSlice(values, first, end)
	defer leaf.Release()
	return pqarrow.WriteArrowToColumn(ctx, cw, leaf, lv.def, lv.rep, elemOptional)
}

// grow returns s resized to n, reallocating only when it is too small.
func grow(s []int16, n int) []int16 {
	if cap(s) < n {
		return make([]int16, n)
	}
	return s[:n]
}

func b2i(b bool) int16 {
	if b {
		return 1
	}
	return 0
}

func (c *columnSink) Close() error { return c.fw.Close() }

// serializeSchema returns the Arrow schema as Parquet's ARROW:schema holds
// it: an IPC stream of the schema and no batches (what pqarrow writes).
func serializeSchema(s *arrow.Schema) []byte {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s), ipc.WithAllocator(memory.DefaultAllocator))
	w.Close()
	return buf.Bytes()
}
