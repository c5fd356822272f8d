package store

import (
	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/table"
)

// tableSchema returns the columns of a table read whose data files do not
// all have the same columns (a column added by a later ingest): every
// file's columns, in the order they first appear, restricted to wanted
// (all when empty); nil when the files agree or path is not a table. A
// column of two types is refused, naming it.
func tableSchema(path string, files []string, cfg readConfig) (*arrow.Schema, error) {
	if _, _, ok, err := table.ParseStore(path); !ok || err != nil || len(files) < 2 {
		return nil, err
	}
	cfg.columns, cfg.deferred = nil, false
	var fields []arrow.Field
	from := map[string]string{} // column -> the file it first appears in
	same := true
	var first *arrow.Schema
	for _, f := range files {
		s, err := openParquet(f, cfg)
		if err != nil {
			return nil, err
		}
		sc := normalise(f, s, cfg.mem).Schema()
		s.Close()
		if first == nil {
			first = sc
		} else if !SameColumns(first, sc) {
			same = false
		}
		for _, fd := range sc.Fields() {
			k, seen := from[fd.Name]
			if !seen {
				from[fd.Name] = f
				fields = append(fields, arrow.Field{Name: fd.Name, Type: fd.Type, Nullable: true})
				continue
			}
			for _, have := range fields {
				if have.Name == fd.Name && !arrow.TypeEqual(have.Type, fd.Type) {
					return nil, schema.Errorf(f, -1, fd.Name, "type %s in this data file, %s in %s: a table column keeps its type", fd.Type, have.Type, k)
				}
			}
		}
	}
	if same {
		return nil, nil
	}
	if len(cfg.columns) > 0 {
		var kept []arrow.Field
		for _, fd := range fields {
			if contains(cfg.columns, fd.Name) {
				kept = append(kept, fd)
			}
		}
		fields = kept
	}
	return arrow.NewSchema(fields, nil), nil
}

// widenSource reads a table's data file as the table's columns (sc): in
// their order, those the file lacks null.
type widenSource struct {
	source
	sc  *arrow.Schema
	col []int // per column of sc, the source's column, -1 when it lacks it
	mem memory.Allocator
	cur arrow.Record
}

// widen wraps s so that its batches have the columns of sc.
func widen(s source, sc *arrow.Schema, mem memory.Allocator) source {
	w := &widenSource{source: s, sc: sc, mem: mem}
	for _, f := range sc.Fields() {
		k := -1
		if idx := s.Schema().FieldIndices(f.Name); len(idx) > 0 {
			k = idx[0]
		}
		w.col = append(w.col, k)
	}
	return w
}

func (w *widenSource) Schema() *arrow.Schema { return w.sc }

func (w *widenSource) Next() (arrow.Record, error) {
	if w.cur != nil {
		w.cur.Release()
		w.cur = nil
	}
	rec, err := w.source.Next()
	if err != nil {
		return nil, err
	}
	cols := make([]arrow.Array, len(w.col))
	var nulls []arrow.Array
	for i, k := range w.col {
		if k >= 0 {
			cols[i] = rec.Column(k)
			continue
		}
		cols[i] = array.MakeArrayOfNull(w.mem, w.sc.Field(i).Type, int(rec.NumRows()))
		nulls = append(nulls, cols[i])
	}
	w.cur = array.NewRecord(w.sc, cols, rec.NumRows())
	for _, a := range nulls {
		a.Release()
	}
	return w.cur, nil
}

func (w *widenSource) Close() error {
	if w.cur != nil {
		w.cur.Release()
		w.cur = nil
	}
	return w.source.Close()
}
