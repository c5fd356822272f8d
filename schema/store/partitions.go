package store

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/table"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// Partition is a column that the directory names of a Hive-partitioned
// store give its files (`batch=0/part-0.parquet`), as DuckDB
// (hive_partitioning) and pyarrow read it: the directories below the store
// directory (or below a glob's fixed part) named KEY=VALUE, VALUE
// URL-decoded, `__HIVE_DEFAULT_PARTITION__` a null. The column is int64
// when every value of the key parses as a base-10 integer, else utf8; it
// then takes its canonical type like any column (see normalise).
type Partition struct {
	Name  string
	Type  arrow.DataType
	Value []string // per file of the store, in reading order
	Null  []bool
}

// hiveNull is the directory value Hive, Spark, pyarrow and DuckDB write for
// a null partition value.
const hiveNull = "__HIVE_DEFAULT_PARTITION__"

// Partitions returns the partition columns of the store at path, whose
// files are files (see Expand); none for a single file or a URL. Every file
// must lie under directories of the same keys, in the same order.
func Partitions(path string, files []string) ([]Partition, error) {
	root, ok := partitionRoot(path)
	if !ok {
		return nil, nil
	}
	var parts []Partition
	for i, f := range files {
		rel, err := filepath.Rel(root, filepath.Dir(f))
		if err != nil {
			rel = ""
		}
		var keys []string
		for _, dir := range strings.Split(filepath.ToSlash(rel), "/") {
			k, v, ok := strings.Cut(dir, "=")
			if !ok || k == "" {
				continue
			}
			if i == 0 {
				parts = append(parts, Partition{Name: k, Type: arrow.PrimitiveTypes.Int64})
			}
			n := len(keys)
			if n >= len(parts) || parts[n].Name != k {
				return nil, schema.Errorf(f, -1, k, "partition directories differ from %s's", files[0])
			}
			keys = append(keys, k)
			if d, err := url.PathUnescape(v); err == nil {
				v = d
			}
			p := &parts[n]
			p.Value = append(p.Value, v)
			p.Null = append(p.Null, v == hiveNull)
			if _, err := strconv.ParseInt(v, 10, 64); err != nil && v != hiveNull {
				p.Type = arrow.BinaryTypes.String
			}
		}
		if len(keys) != len(parts) {
			return nil, schema.Errorf(f, -1, "", "partition directories differ from %s's", files[0])
		}
	}
	return parts, nil
}

// partitionRoot returns the directory below which a store's directory
// names are partitions: a store directory itself, or a glob's directories
// before its first pattern.
func partitionRoot(path string) (string, bool) {
	if _, _, ok, _ := table.ParseStore(path); ok || trinity.IsURL(path) {
		return "", false // a table's files hold their columns
	}
	if strings.ContainsAny(path, "*?[") {
		dirs := strings.Split(filepath.ToSlash(path), "/")
		k := 0
		for k < len(dirs) && !strings.ContainsAny(dirs[k], "*?[") {
			k++
		}
		return filepath.FromSlash(strings.Join(dirs[:k], "/")), true
	}
	if objstore.IsURL(path) {
		return path, isObjectDir(path)
	}
	st, err := os.Stat(path)
	return path, err == nil && st.IsDir()
}

// partSource adds the partition columns of one file to its batches; a
// column the file holds too must hold the partition's value on every row.
type partSource struct {
	source
	path  string
	sc    *arrow.Schema
	parts []Partition
	file  int   // the file's index in the store
	col   []int // per partition: its column in the file, -1: added
	mem   memory.Allocator
	row   int64
	cur   arrow.Record
}

// withPartitions wraps s, the source of file number idx of the store, so
// that its batches hold the (wanted) partition columns.
func withPartitions(path string, s source, parts []Partition, idx int, wanted []string, mem memory.Allocator) source {
	in := s.Schema()
	p := &partSource{source: s, path: path, file: idx, mem: mem}
	fields := append([]arrow.Field(nil), in.Fields()...)
	for _, pt := range parts {
		if k := in.FieldIndices(pt.Name); len(k) > 0 {
			p.parts, p.col = append(p.parts, pt), append(p.col, k[0])
		} else if len(wanted) == 0 || contains(wanted, pt.Name) {
			p.parts, p.col = append(p.parts, pt), append(p.col, -1)
			fields = append(fields, arrow.Field{Name: pt.Name, Type: pt.Type, Nullable: true})
		}
	}
	if len(p.parts) == 0 {
		return s
	}
	p.sc = arrow.NewSchema(fields, trinity.StoreMeta(in.Metadata()))
	return p
}

func (p *partSource) Schema() *arrow.Schema { return p.sc }

// lastRest passes on the Rest of a deferred read.
func (p *partSource) lastRest() *Rest {
	if d, ok := p.source.(interface{ lastRest() *Rest }); ok {
		return d.lastRest()
	}
	return nil
}

func (p *partSource) Next() (arrow.Record, error) {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	rec, err := p.source.Next()
	if err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	cols := append([]arrow.Array(nil), rec.Columns()...)
	var added []arrow.Array
	defer func() {
		for _, a := range added {
			a.Release()
		}
	}()
	for k, pt := range p.parts {
		v, null := pt.Value[p.file], pt.Null[p.file]
		if c := p.col[k]; c >= 0 {
			if i := disagrees(rec.Column(c), v, null); i >= 0 {
				return nil, schema.Errorf(p.path, p.row+int64(i), pt.Name, "value %s differs from the partition directory's %s=%s", rec.Column(c).ValueStr(i), pt.Name, v)
			}
			continue
		}
		a := constant(pt.Type, v, null, n, p.mem)
		added = append(added, a)
		cols = append(cols, a)
	}
	p.cur = array.NewRecord(p.sc, cols, rec.NumRows())
	p.row += rec.NumRows()
	return p.cur, nil
}

func (p *partSource) Close() error {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	return p.source.Close()
}

// disagrees returns the first row of a whose value is not the partition
// value v (compared as text, integers in base 10), -1 if none.
func disagrees(a arrow.Array, v string, null bool) int {
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) != null || (!null && a.ValueStr(i) != v && !sameInt(a.ValueStr(i), v)) {
			return i
		}
	}
	return -1
}

func sameInt(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && x == y
}

// constant returns an array of n copies of the partition value v.
func constant(t arrow.DataType, v string, null bool, n int, mem memory.Allocator) arrow.Array {
	b := array.NewBuilder(mem, t)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		switch {
		case null:
			b.AppendNull()
		case t.ID() == arrow.INT64:
			x, _ := strconv.ParseInt(v, 10, 64)
			b.(*array.Int64Builder).Append(x)
		default:
			b.(*array.StringBuilder).Append(v)
		}
	}
	return b.NewArray()
}
