package store

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/table"
)

// heldBack returns, for the increment read of a table (DIR?since=N, see
// table.Increment), the explore steps each data file's rows of which are
// left out: the model_version values of its experiment that the files of
// snapshot N hold too (read from the files whose range overlaps). It
// returns a warning per experiment with such steps. Other stores: nil.
func heldBack(path string, cfg readConfig) (map[string]map[int64]bool, []string, error) {
	dir, spec, ok, err := table.ParseStore(path)
	if !ok || err != nil || spec.Since == 0 {
		return nil, nil, err
	}
	t, err := table.Open(dir, false)
	if err != nil {
		return nil, nil, err
	}
	added, before, err := t.Since(spec)
	if err != nil || len(before) == 0 {
		return nil, nil, err
	}
	old := map[string]map[int64]bool{} // experiment -> model_versions of snapshot N
	for _, f := range before {
		if old[f.Experiment] == nil {
			old[f.Experiment] = map[int64]bool{}
		}
		if err := versions(t.Path(f), cfg, old[f.Experiment]); err != nil {
			return nil, nil, err
		}
	}
	held := map[string]map[int64]bool{}
	steps := map[string]map[int64]bool{} // experiment -> steps held back
	for _, f := range added {
		seen := map[int64]bool{}
		if err := versions(t.Path(f), cfg, seen); err != nil {
			return nil, nil, err
		}
		for v := range seen {
			if old[f.Experiment][v] {
				if held[t.Path(f)] == nil {
					held[t.Path(f)] = map[int64]bool{}
				}
				if steps[f.Experiment] == nil {
					steps[f.Experiment] = map[int64]bool{}
				}
				held[t.Path(f)][v], steps[f.Experiment][v] = true, true
			}
		}
	}
	var warnings []string
	for _, exp := range slices.Sorted(maps.Keys(steps)) {
		var vs []string
		for _, v := range slices.Sorted(maps.Keys(steps[exp])) {
			vs = append(vs, fmt.Sprint(v))
		}
		warnings = append(warnings, fmt.Sprintf("table %s: experiment %q: explore steps (model_version) %s have rows at or before snapshot %d, which the job's last run read: their rows ingested since are left out (ingest between explore steps)",
			dir, exp, strings.Join(vs, ", "), spec.Since))
	}
	return held, warnings, nil
}

// versions adds the model_version values of a data file to set.
func versions(file string, cfg readConfig, set map[int64]bool) error {
	cfg.columns = []string{table.VersionColumn}
	s, err := openParquet(file, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	col := s.Schema().FieldIndices(table.VersionColumn)
	if len(col) == 0 {
		return nil
	}
	for {
		rec, err := s.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		a, ok := rec.Column(col[0]).(*array.Int64)
		if !ok {
			return schema.Errorf(file, -1, table.VersionColumn, "type %s: an increment reads explore steps from int64 values", rec.Column(col[0]).DataType())
		}
		for i := 0; i < a.Len(); i++ {
			if a.IsValid(i) {
				set[a.Value(i)] = true
			}
		}
	}
}

// holdSource is a data file's source that leaves out the rows of the held
// explore steps; they count as skipped rows (skipper), so row numbers stay
// those of the file.
type holdSource struct {
	source
	file    string
	held    map[int64]bool
	col     int  // model_version in the source's batches
	drop    bool // model_version was read for the filter only: drop it
	sc      *arrow.Schema
	mem     memory.Allocator
	dropped int64
	cur     arrow.Record
}

// holdBack wraps s, reading file (whose columns wanted restricts, all when
// empty), so that it leaves out the rows whose model_version is held.
func holdBack(file string, s source, held map[int64]bool, wanted []string, mem memory.Allocator) (source, error) {
	idx := s.Schema().FieldIndices(table.VersionColumn)
	if len(idx) == 0 {
		return nil, schema.Errorf(file, -1, table.VersionColumn, "missing: an increment reads explore steps from it")
	}
	h := &holdSource{source: s, file: file, held: held, col: idx[0], sc: s.Schema(), mem: mem}
	if len(wanted) > 0 && !contains(wanted, table.VersionColumn) {
		md := s.Schema().Metadata()
		fields := append([]arrow.Field{}, s.Schema().Fields()...)
		h.drop, h.sc = true, arrow.NewSchema(append(fields[:h.col:h.col], fields[h.col+1:]...), &md)
	}
	return h, nil
}

func (h *holdSource) Schema() *arrow.Schema { return h.sc }

func (h *holdSource) skippedRows() int64 {
	n := h.dropped
	if s, ok := h.source.(skipper); ok {
		n += s.skippedRows()
	}
	return n
}

func (h *holdSource) Next() (arrow.Record, error) {
	if h.cur != nil {
		h.cur.Release()
		h.cur = nil
	}
	for {
		rec, err := h.source.Next()
		if err != nil {
			return nil, err
		}
		v, ok := rec.Column(h.col).(*array.Int64)
		if !ok {
			return nil, schema.Errorf(h.file, -1, table.VersionColumn, "type %s: an increment reads explore steps from int64 values", rec.Column(h.col).DataType())
		}
		var keep [][2]int64 // runs of kept rows [from, to)
		for i := 0; i < v.Len(); i++ {
			if v.IsValid(i) && h.held[v.Value(i)] {
				h.dropped++
				continue
			}
			if n := len(keep); n > 0 && keep[n-1][1] == int64(i) {
				keep[n-1][1]++
			} else {
				keep = append(keep, [2]int64{int64(i), int64(i) + 1})
			}
		}
		if len(keep) == 0 {
			continue
		}
		if h.cur, err = h.take(rec, keep); err != nil {
			return nil, err
		}
		return h.cur, nil
	}
}

// take returns the rows of rec in runs, without model_version when drop.
func (h *holdSource) take(rec arrow.Record, runs [][2]int64) (arrow.Record, error) {
	var cols []arrow.Array
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	var rows int64
	for _, r := range runs {
		rows += r[1] - r[0]
	}
	for c := 0; c < int(rec.NumCols()); c++ {
		if h.drop && c == h.col {
			continue
		}
		parts := make([]arrow.Array, len(runs))
		for i, r := range runs {
			parts[i] = array.NewSlice(rec.Column(c), r[0], r[1])
		}
		a, err := array.Concatenate(parts, h.mem)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			return nil, schema.Errorf(h.file, -1, rec.ColumnName(c), "cannot select the rows of an increment: %v", err)
		}
		cols = append(cols, a)
	}
	return array.NewRecord(h.sc, cols, rows), nil
}

func (h *holdSource) Close() error {
	if h.cur != nil {
		h.cur.Release()
		h.cur = nil
	}
	return h.source.Close()
}
