package store

import (
	"sync/atomic"

	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"
)

// Range is what the footer statistics of a Parquet row group say of one
// column: its smallest and largest value, as integers (Int) or as byte
// strings (Min, Max).
type Range struct {
	Int            bool
	MinInt, MaxInt int64
	Min, Max       []byte
}

// SkipRowGroups makes the Parquet reader skip every row group whose footer
// statistics of the top-level column say that none of its rows is wanted:
// may(r) false. A row group without (usable) statistics of the column, or
// with a null in it, is read. Skipped rows still count in the positions
// (Pos: a row keeps its file and store row) and in the proof that every row
// the footer promises is accounted for; Reader.Skipped counts them.
func SkipRowGroups(column string, may func(Range) bool) ReadOption {
	return func(c *readConfig) { c.skipColumn, c.skipMay = column, may }
}

// inputFile is an open Parquet input (a file or an object). It counts the
// bytes read from it, and stays open until its reader and every Rest that
// copies from it are done with it (Close once each).
type inputFile struct {
	handle
	n    *atomic.Int64
	refs atomic.Int32
}

func newInputFile(f handle, n *atomic.Int64) *inputFile {
	in := &inputFile{handle: f, n: n}
	in.refs.Store(1)
	return in
}

func (f *inputFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.handle.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

func (f *inputFile) Read(p []byte) (int, error) {
	n, err := f.handle.Read(p)
	f.n.Add(int64(n))
	return n, err
}

// retain adds a user of the file.
func (f *inputFile) retain() *inputFile {
	f.refs.Add(1)
	return f
}

// Close closes the file when its last user is done.
func (f *inputFile) Close() error {
	if f.refs.Add(-1) > 0 {
		return nil
	}
	return f.handle.Close()
}

// rowGroupSkipper decides which row groups of a Parquet file to skip.
type rowGroupSkipper struct {
	pf   *file.Reader
	leaf int // the column's leaf, -1: no skipping
	may  func(Range) bool
}

func newRowGroupSkipper(pf *file.Reader, cfg readConfig) rowGroupSkipper {
	s := rowGroupSkipper{pf: pf, leaf: -1, may: cfg.skipMay}
	if cfg.skipMay != nil {
		s.leaf = pf.MetaData().Schema.ColumnIndexByName(cfg.skipColumn)
	}
	return s
}

// skips reports whether row group rg holds no wanted row.
func (s rowGroupSkipper) skips(rg int) bool {
	if s.leaf < 0 {
		return false
	}
	cc, err := s.pf.MetaData().RowGroup(rg).ColumnChunk(s.leaf)
	if err != nil {
		return false
	}
	st, err := cc.Statistics()
	if err != nil || st == nil || !st.HasMinMax() || !st.HasNullCount() || st.NullCount() > 0 {
		return false
	}
	order := s.pf.MetaData().Schema.Column(s.leaf).SortOrder()
	var r Range
	switch t := st.(type) {
	case *metadata.Int64Statistics:
		r = Range{Int: true, MinInt: t.Min(), MaxInt: t.Max()}
	case *metadata.Int32Statistics:
		r = Range{Int: true, MinInt: int64(t.Min()), MaxInt: int64(t.Max())}
	case *metadata.ByteArrayStatistics:
		r = Range{Min: t.Min(), Max: t.Max()}
	default:
		return false
	}
	if r.Int && order != pqschema.SortSIGNED {
		return false // unsigned ids: the statistics' order is not int64's
	}
	return !s.may(r)
}
