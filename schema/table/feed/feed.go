// Package feed appends a store's new rows to an experience table, exactly
// once: each source (a buffer's database and table, a file) has a watermark
// in the table, committed with its rows, and an ingest reads only what lies
// beyond it. A buffer is read from the first id after its watermark (the
// query seeks on the primary key) and, on PostgreSQL, at the ids below it
// not yet committed when it was read (trinity.Mark); a file from the first
// row after it.
package feed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"gopkg.in/yaml.v3"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/fspath"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/table"
	"github.com/rftpipe/rftpipe/schema/table/catalog"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// Options configures Ingest.
type Options struct {
	Experiment string
	// Config, when set, is the experiment's Trinity-RFT config (YAML): its
	// key fields are recorded in the table (ConfigFields).
	Config string
	Codec  string // Parquet codec of the data files (zstd when empty)
	// Catalog, when its URL is set, is the Iceberg SQL catalog the table is
	// registered in once the ingest is committed (Register).
	Catalog catalog.Target
}

// Result says what an ingest committed.
type Result struct {
	Rows int64 // rows appended, 0 when nothing was new
	Read int64 // rows read from the sources (a file's from its start)
	// Warnings are the sources' (rows a buffer read but did not yield,
	// store.Reader.Warnings), one line each.
	Warnings  []string
	Snapshots []int64 // one per source with new rows
}

// Ingest appends the rows of the store src that dir's table does not hold
// yet, creating the table when dir is a new directory. Rows are taken as
// the source holds them (null rewards too). A store of several files is
// ingested file by file, each file with its own watermark and commit.
// Last, it writes the Iceberg metadata the table lacks
// (table.Table.SyncIceberg) and registers the table in o.Catalog.
func Ingest(ctx context.Context, src, dir string, o Options) (res Result, err error) {
	if o.Experiment == "" {
		return Result{}, schema.BadInputf("ingest needs an experiment name")
	}
	cfg, err := ConfigFields(o.Config)
	if err != nil {
		return Result{}, err
	}
	if _, _, ok, _ := table.ParseStore(src); ok {
		return Result{}, schema.Errorf(src, -1, "", "an experience table: ingest reads buffers and stores, not tables")
	}
	files, err := store.Expand(src)
	if err != nil {
		return Result{}, err
	}
	for _, f := range files {
		if !trinity.IsURL(f) && fspath.Within(dir, f) { // however spelled: the table would read its own rows back
			return Result{}, schema.Errorf(f, -1, "", "lies inside the table %s: ingest reads sources outside it", dir)
		}
		if cat, in := o.Catalog.File(), sourceFile(f); cat != "" && in != "" && fspath.Same(cat, in) {
			return Result{}, schema.Usagef("catalog %s is the source's own database %s: the catalog would be written into the input", o.Catalog.URL, f)
		}
	}
	t, err := table.Open(dir, true)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		t.SyncIceberg() // what a killed commit left out
		res.Warnings = append(res.Warnings, t.Warnings()...)
		if err == nil {
			err = Register(ctx, t, o.Catalog)
		}
	}()
	for i, f := range files {
		c := cfg
		if i > 0 {
			c = nil // recorded once
		}
		n, read, snap, err := ingestSource(ctx, t, f, o, c, &res.Warnings)
		if err != nil {
			return res, err
		}
		res.Read += read
		if n > 0 {
			res.Rows += n
			res.Snapshots = append(res.Snapshots, snap)
		}
	}
	return res, nil
}

// sourceKey returns the identity of a source file or buffer URL.
func sourceKey(f string) (string, error) {
	if trinity.IsURL(f) {
		loc, err := trinity.ParseURL(f)
		if err != nil {
			return "", err
		}
		return loc.Identity(), nil
	}
	abs, err := filepath.Abs(f)
	if err != nil {
		return "", schema.Errorf(f, -1, "", "cannot resolve the path: %v", err)
	}
	return "file://" + abs, nil
}

// ingestSource appends the new rows of one source as one commit; it
// returns the rows appended, the rows read and the snapshot, and adds the
// source's warnings to warnings.
func ingestSource(ctx context.Context, t *table.Table, f string, o Options, cfg map[string]string, warnings *[]string) (rows, read, snap int64, err error) {
	key, err := sourceKey(f)
	if err != nil {
		return 0, 0, 0, err
	}
	base, err := t.Base()
	if err != nil {
		return 0, 0, 0, err
	}
	from := base.Watermark(key)
	buffer := trinity.IsURL(f)
	var mark int64 // a file's rows read
	opts := []store.ReadOption{store.Context(ctx)}
	if buffer {
		m, err := trinity.ParseMark(from)
		if err != nil {
			return 0, 0, 0, schema.Errorf(t.Dir, -1, "", "bad watermark %q of %s: %v", from, key, err)
		}
		opts = append(opts, store.After(m))
	} else if from != "" {
		if mark, err = strconv.ParseInt(from, 10, 64); err != nil {
			return 0, 0, 0, schema.Errorf(t.Dir, -1, "", "bad watermark %q of %s", from, key)
		}
	}
	r, err := store.Open(f, opts...)
	if errors.Is(err, trinity.ErrNoRows) {
		return 0, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.Close()
	cols := columns(withExperiment(r.Schema()))
	if err := t.CheckColumns(base, f, cols); err != nil {
		return 0, 0, 0, err
	}
	out, err := dataFile(t, o.Experiment)
	if err != nil {
		return 0, 0, 0, err
	}
	df, read, err := copyRows(ctx, r, out, o, mark, buffer)
	*warnings = append(*warnings, r.Warnings()...)
	if err == nil && !buffer && read < mark {
		err = schema.Errorf(f, -1, "", "holds %d rows, but the table holds its first %d: the file was replaced, not appended to; ingest it under another name", read, mark)
	}
	if err != nil || df.Rows == 0 {
		return 0, read, 0, err
	}
	if df.Path, err = t.Rel(out); err != nil {
		os.Remove(out)
		return 0, 0, 0, err
	}
	to := strconv.FormatInt(read, 10) // a file's rows from its start
	if buffer {
		to = r.Mark().String()
	}
	snap, err = t.Commit(ctx, base, table.Append{Source: key, From: from, To: to,
		Files: []table.DataFile{df}, Columns: cols, Experiment: o.Experiment, Config: cfg})
	if err != nil {
		os.Remove(out)
		return 0, 0, 0, err
	}
	return df.Rows, read, snap, nil
}

// sourceFile returns the file a source reads: a SQLite buffer's database,
// a store's file ("" for a PostgreSQL buffer).
func sourceFile(src string) string {
	if !trinity.IsURL(src) {
		return src
	}
	if loc, err := trinity.ParseURL(src); err == nil && loc.Driver == "sqlite" {
		return loc.DSN
	}
	return ""
}

// CatalogTarget returns the catalog target of the table at dir: in the
// catalog database url (none when empty), catalog name, and the table
// ident NAMESPACE.TABLE (default.BASE, BASE dir's base name, when empty).
func CatalogTarget(url, name, ident, dir string) (catalog.Target, error) {
	if url == "" {
		return catalog.Target{}, nil
	}
	if _, _, err := catalog.Source(url); err != nil {
		return catalog.Target{}, err
	}
	if ident == "" {
		ident = "default." + filepath.Base(filepath.Clean(dir))
	}
	i := strings.LastIndexByte(ident, '.')
	if i <= 0 || i == len(ident)-1 {
		return catalog.Target{}, schema.Usagef("catalog table %q: want NAMESPACE.TABLE", ident)
	}
	return catalog.Target{URL: url, Catalog: name, Namespace: ident[:i], Table: ident[i+1:]}, nil
}

// Register makes the table's newest Iceberg metadata version its current
// metadata in the catalog target (nothing when target has no URL). The
// table's commits stand when it fails: a rerun registers them.
func Register(ctx context.Context, t *table.Table, target catalog.Target) error {
	if target.URL == "" {
		return nil
	}
	loc, err := t.IcebergMetadata()
	if err != nil || loc == "" {
		return err
	}
	if err := catalog.Register(ctx, target, loc); err != nil {
		return fmt.Errorf("%w (the table's commits stand; rerun to register them)", err)
	}
	return nil
}

// withExperiment returns the schema of a table's rows read as sc: its
// columns and the experiment, without metadata (a table spans buffers).
func withExperiment(sc *arrow.Schema) *arrow.Schema {
	fields := append([]arrow.Field{}, sc.Fields()...)
	return arrow.NewSchema(append(fields, arrow.Field{Name: table.ExperimentColumn, Type: arrow.BinaryTypes.String}), nil)
}

// columns returns the table columns of schema sc.
func columns(sc *arrow.Schema) []table.Column {
	out := make([]table.Column, sc.NumFields())
	for i, f := range sc.Fields() {
		out[i] = table.Column{Name: f.Name, Type: f.Type.String()}
	}
	return out
}

// dataFile names a new data file of experiment in the table.
func dataFile(t *table.Table, experiment string) (string, error) {
	dir := t.DataDir(experiment)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", schema.Errorf(dir, -1, "", "cannot create: %v", err)
	}
	var b [8]byte
	rand.Read(b[:])
	return filepath.Join(dir, time.Now().UTC().Format("20060102T150405")+"-"+hex.EncodeToString(b[:])+".parquet"), nil
}

// copyRows writes the rows r yields, past the first skip of a file source,
// with the experiment column, atomically to out; it returns the data file
// (its rows and model_version range) and the rows read (a file's new
// watermark is skip+read). Nothing is written when no row is new.
func copyRows(ctx context.Context, r *store.Reader, out string, o Options, skip int64, buffer bool) (df table.DataFile, read int64, err error) {
	df.Experiment = o.Experiment
	if buffer {
		skip = 0
	}
	sc := withExperiment(r.Schema())
	var w *store.Writer
	defer func() {
		if w != nil && err != nil {
			w.Abort()
		}
	}()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return df, 0, err
		}
		n := rec.NumRows()
		read += n
		if skip >= n {
			skip -= n
			continue
		}
		if skip > 0 {
			rec = rec.NewSlice(skip, n)
			defer rec.Release()
			skip = 0
		}
		if w == nil {
			if w, err = store.Create(out, sc, store.WriteContext(ctx), store.WithParquet(store.ParquetOptions{Codec: o.Codec})); err != nil {
				return df, 0, err
			}
		}
		versionRange(rec, &df)
		exp := constant(o.Experiment, int(rec.NumRows()))
		cols := append(append([]arrow.Array{}, rec.Columns()...), exp)
		withExp := array.NewRecord(sc, cols, rec.NumRows())
		err = w.Write(withExp)
		withExp.Release()
		exp.Release()
		if err != nil {
			return df, 0, err
		}
		df.Rows += rec.NumRows()
	}
	if w == nil {
		return df, read, nil
	}
	if err = w.Commit(); err != nil {
		return df, 0, err
	}
	w = nil
	return df, read, nil
}

// versionRange widens df's model_version range by the batch's values.
func versionRange(rec arrow.Record, df *table.DataFile) {
	idx := rec.Schema().FieldIndices(table.VersionColumn)
	if len(idx) == 0 {
		return
	}
	a, ok := rec.Column(idx[0]).(*array.Int64)
	if !ok {
		return
	}
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			continue
		}
		v := a.Value(i)
		if df.MinVersion == nil || v < *df.MinVersion {
			df.MinVersion = &v
		}
		if df.MaxVersion == nil || v > *df.MaxVersion {
			df.MaxVersion = &v
		}
	}
}

// constant returns a string array of n copies of s.
func constant(s string, n int) arrow.Array {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		b.Append(s)
	}
	return b.NewArray()
}

// ConfigFields reads the key fields of the Trinity-RFT config at path
// (table.ConfigFields; none when path is empty), by column; a field the
// config does not set is left out.
func ConfigFields(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, schema.Errorf(path, -1, "", "cannot read the config: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, schema.Errorf(path, -1, "", "not a YAML config: %v", strings.SplitN(err.Error(), "\n", 2)[0])
	}
	out := map[string]string{}
	for _, f := range table.ConfigFields {
		if v, ok := lookup(&doc, f.Path); ok {
			out[f.Column] = v
		}
	}
	return out, nil
}

// lookup returns the scalar at a dotted path of a YAML document, as
// written.
func lookup(n *yaml.Node, path string) (string, bool) {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range strings.Split(path, ".") {
		if n.Kind != yaml.MappingNode {
			return "", false
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return "", false
		}
		n = next
	}
	return n.Value, n.Kind == yaml.ScalarNode && n.Tag != "!!null"
}
