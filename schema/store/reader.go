package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/table"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// source streams the record batches of one file.
type source interface {
	Schema() *arrow.Schema
	// Next returns the next batch, valid until the following call, or io.EOF.
	Next() (arrow.Record, error)
	Close() error
}

// ReadOption configures Open.
type ReadOption func(*readConfig)

type readConfig struct {
	columns   []string
	batchRows int
	mem       memory.Allocator
	// row groups to skip (SkipRowGroups), and the Parquet bytes read
	skipColumn string
	skipMay    func(Range) bool
	bytes      *atomic.Int64
	deferred   bool // Deferred: undecoded columns as raw chunks
	ctx        context.Context
	// Parquet row groups decoded at once (rowGroupsInFlight)
	rowGroupsInFlight int
	after             trinity.Mark // After
}

// Context makes connecting to a buffer's database and reading its table,
// and decoding a Parquet file's row groups, stop when ctx is done (a
// signal): Next then returns ctx.Err().
func Context(ctx context.Context) ReadOption {
	return func(c *readConfig) { c.ctx = ctx }
}

// skipper is a source that skips rows (SkipRowGroups): skippedRows is the
// number skipped so far.
type skipper interface {
	skippedRows() int64
}

// Columns restricts reading to the named top-level columns (Parquet reads only
// those column chunks). Names missing from the store are ignored here; use
// schema.Require to insist on them.
func Columns(names ...string) ReadOption {
	return func(c *readConfig) { c.columns = names }
}

// After makes a buffer yield only its rows past mark (an incremental read;
// see Reader.Mark).
func After(mark trinity.Mark) ReadOption {
	return func(c *readConfig) { c.after = mark }
}

// BatchRows sets the number of rows per record batch.
func BatchRows(n int) ReadOption {
	return func(c *readConfig) {
		if n > 0 {
			c.batchRows = n
		}
	}
}

// Reader streams the record batches of a store, file after file.
type Reader struct {
	cfg   readConfig
	files []string
	parts []Partition // the columns the directory names give (Partitions)
	// held: the explore steps of each file of an increment left out
	held map[string]map[int64]bool
	// wide: the columns of a table whose files differ in columns (each
	// file read widened to them), else nil
	wide   *arrow.Schema
	idx    int
	cur    source
	raw    source // cur before normalise
	schema *arrow.Schema

	fileRow   int64 // row index within the current file of the last batch's first row
	globalRow int64 // row index within the store of the last batch's first row
	nextFile  int64
	nextStore int64
	// rows skipped in the current file so far, and in the store
	skippedFile, skipped int64
	// what the sources read to their end reported (reporter)
	warnings []string
	counts   map[string]int64
}

// reporter is a source that reads rows it does not yield (a Trinity 0.6
// buffer's orphan rows) and reports them once read to its end.
type reporter interface {
	Warnings() []string
	Counts() map[string]int64
}

// Expand resolves a store path into its files: a file, a directory (every
// *.parquet file in it and in its Hive partition directories KEY=VALUE,
// sorted), a glob (sorted matches), or an experience table, DIR or
// DIR?as_of=…&where=… (the data files of its snapshot; see table.Spec); the
// same of objects for an s3:// URL (expandObjects).
func Expand(path string) ([]string, error) {
	if objstore.IsURL(path) {
		return expandObjects(path)
	}
	if trinity.IsURL(path) {
		return []string{path}, nil
	}
	if dir, spec, ok, err := table.ParseStore(path); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return tableFiles(dir, spec)
	}
	if strings.ContainsAny(path, "*?[") {
		m, err := filepath.Glob(path)
		if err != nil {
			return nil, schema.Errorf(path, -1, "", "bad glob: %v", err)
		}
		if len(m) == 0 {
			return nil, schema.Errorf(path, -1, "", "no file matches")
		}
		sort.Strings(m)
		return m, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, schema.Errorf(path, -1, "", "no such file or directory")
		}
		return nil, fileError(path, err, "cannot open")
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	return dirFiles(storeDir{root: path, fsys: os.DirFS(path), join: func(rel string) string { return filepath.Join(path, filepath.FromSlash(rel)) }})
}

// storeDir is the tree of a directory store: a directory, or the objects
// below a prefix (objectDir).
type storeDir struct {
	root string              // as named
	fsys fs.FS               // the tree below root
	join func(string) string // the name of a path of fsys
}

// dirFiles returns the Parquet files of directory store d (parquetFiles),
// refusing one that holds none.
func dirFiles(d storeDir) ([]string, error) {
	out, err := parquetFiles(d, ".")
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, schema.Errorf(d.root, -1, "", "directory holds no Parquet files")
	}
	return out, nil
}

// parquetFiles lists the Parquet files of directory dir of store d and of
// its partition directories (named KEY=VALUE), sorted, leaving out hidden
// files and files and directories starting with "_" (temp files, Spark's
// _SUCCESS, rftpipe's _metrics, as pyarrow does). Every other store file
// is read or refused: one in a directory that is not a partition, or of
// another format beside the Parquet files, is an error naming it, so no
// row is silently left unread.
func parquetFiles(d storeDir, dir string) ([]string, error) {
	var out []string
	entries, err := fs.ReadDir(d.fsys, dir)
	if err != nil {
		return nil, fileError(d.join(dir), err, "cannot list")
	}
	for _, e := range entries {
		name := e.Name()
		if name[0] == '.' || name[0] == '_' {
			continue
		}
		p := path.Join(dir, name)
		if e.IsDir() {
			if strings.Contains(name, "=") {
				sub, err := parquetFiles(d, p)
				if err != nil {
					return nil, err
				}
				out = append(out, sub...)
			} else if f, ok := firstStoreFile(d, p); ok {
				return nil, schema.Errorf(d.join(f), -1, "", "store file in directory %s, which is not a KEY=VALUE partition of store %s: its rows would not be read; move it, or name it as a store of its own", name, d.root)
			}
			continue
		}
		switch f, ok := storeFile(name); {
		case ok && f == Parquet:
			out = append(out, d.join(p))
		case ok:
			return nil, schema.Errorf(d.join(p), -1, "", "a %s file in the Parquet directory store %s: its rows would not be read; convert it to Parquet or read it as a store of its own", f, d.root)
		}
	}
	sort.Strings(out)
	return out, nil
}

// tableFiles returns the data files of a table's snapshot.
func tableFiles(dir string, spec table.Spec) ([]string, error) {
	t, err := table.Open(dir, false)
	if err != nil {
		return nil, err
	}
	files, err := t.Files(spec)
	if err == nil && len(files) == 0 {
		err = schema.Errorf(dir, -1, "", "no data file of the table matches (as_of %q, where %q)", spec.AsOf, spec.Where)
	}
	return files, err
}

// storeFile reports whether a file of this name holds experiences, and its
// format: a .json file (metadata beside a store, as datasets write) is not
// taken for one.
func storeFile(name string) (Format, bool) {
	if strings.EqualFold(filepath.Ext(name), ".json") {
		return 0, false
	}
	f, err := FormatOf(name)
	return f, err == nil
}

// firstStoreFile returns a file below directory dir of d (hidden and "_"
// entries left out) that a store could hold, if any.
func firstStoreFile(d storeDir, dir string) (string, bool) {
	entries, _ := fs.ReadDir(d.fsys, dir)
	for _, e := range entries {
		name := e.Name()
		if name[0] == '.' || name[0] == '_' {
			continue
		}
		p := path.Join(dir, name)
		if e.IsDir() {
			if f, ok := firstStoreFile(d, p); ok {
				return f, true
			}
		} else if _, ok := storeFile(name); ok {
			return p, true
		}
	}
	return "", false
}

// Open opens a store for streaming. Every file of a multi-file store must have
// the same schema as the first; such a store's schema carries no metadata.
func Open(path string, opts ...ReadOption) (*Reader, error) {
	cfg := defaultReadConfig()
	for _, o := range opts {
		o(&cfg)
	}
	files, err := Expand(path)
	if err != nil {
		return nil, err
	}
	parts, err := Partitions(path, files)
	if err != nil {
		return nil, err
	}
	held, warnings, err := heldBack(path, cfg)
	if err != nil {
		return nil, err
	}
	wide, err := tableSchema(path, files, cfg)
	if err != nil {
		return nil, err
	}
	if wide != nil {
		cfg.deferred = false // the raw chunks of files of other columns do not line up
	}
	r := &Reader{cfg: cfg, files: files, parts: parts, held: held, wide: wide, warnings: warnings, idx: -1}
	if err := r.openNext(); err != nil {
		return nil, err
	}
	r.schema = r.cur.Schema()
	if len(files) > 1 && r.schema.HasMetadata() {
		// The files may come from different buffers: none of them decides
		// a table's type or layout (trinity.StoreMeta).
		r.schema = arrow.NewSchema(r.schema.Fields(), nil)
	}
	if err := schema.CheckKnown(r.files[0], r.schema); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// defaultReadConfig is the configuration of a read without options.
func defaultReadConfig() readConfig {
	return readConfig{batchRows: DefaultBatchRows, mem: memory.DefaultAllocator, bytes: new(atomic.Int64), ctx: context.Background(),
		rowGroupsInFlight: rowGroupsInFlight()}
}

func (r *Reader) openNext() (err error) {
	r.idx++
	file := r.files[r.idx]
	// A corrupt file can make the decoders panic; report it as bad input.
	defer func() {
		if p := recover(); p != nil {
			err = fileError(file, fmt.Errorf("%v", p), "corrupt or unreadable store")
		}
	}()
	f, err := FormatOf(file)
	if err != nil {
		return err
	}
	var s source
	held := r.held[file]
	switch f {
	case Parquet:
		cfg := r.cfg
		if held != nil && len(cfg.columns) > 0 {
			cfg.columns = append(slices.Clone(cfg.columns), table.VersionColumn)
		}
		s, err = openParquet(file, cfg)
	case ArrowFile, ArrowStream:
		s, err = openIPC(file, f, r.cfg)
	case JSONL:
		s, err = openJSONL(file, r.cfg)
	case TrinityBuffer:
		s, err = openBuffer(file, r.cfg)
	}
	if err != nil {
		return err
	}
	if err := uniqueColumns(file, s.Schema()); err != nil {
		s.Close()
		return err
	}
	if held != nil {
		if s, err = holdBack(file, s, held, r.cfg.columns, r.cfg.mem); err != nil {
			return err
		}
	}
	r.raw, r.skippedFile = s, 0
	s = normalise(file, withPartitions(file, s, r.parts, r.idx, r.cfg.columns, r.cfg.mem), r.cfg.mem)
	if r.wide != nil {
		s = widen(s, r.wide, r.cfg.mem)
	}
	if r.schema != nil && !SameColumns(s.Schema(), r.schema) {
		s.Close()
		col, why := ColumnDiff(r.schema, s.Schema())
		return schema.Errorf(file, -1, col, "schema differs from %s: %s", r.files[0], why)
	}
	r.cur = s
	r.nextFile = 0
	return nil
}

// uniqueColumns refuses a file whose columns are not uniquely named (a
// Parquet or Arrow file may hold two columns called reward): which one a
// reader took would be a guess.
func uniqueColumns(file string, sc *arrow.Schema) error {
	seen := map[string]int{}
	for i, f := range sc.Fields() {
		if j, dup := seen[f.Name]; dup {
			return schema.Errorf(file, -1, f.Name, "duplicated column: columns %d and %d have this name", j, i)
		}
		seen[f.Name] = i
	}
	return nil
}

// Rest returns the columns of the last batch that a deferred read did not
// decode (see Deferred); nil otherwise.
func (r *Reader) Rest() *Rest {
	if d, ok := r.cur.(interface{ lastRest() *Rest }); ok && r.cfg.deferred {
		return d.lastRest()
	}
	return nil
}

// Schema returns the store's schema (after projection).
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// Files returns the files of the store, in reading order.
func (r *Reader) Files() []string { return r.files }

// Next returns the next record batch, valid until the following call to Next
// or Close, or io.EOF at the end of the store.
func (r *Reader) Next() (rec arrow.Record, err error) {
	for r.cur != nil {
		rec, err = r.next()
		r.countSkipped()
		if err == nil {
			if rec.NumRows() == 0 {
				continue
			}
			r.fileRow, r.globalRow = r.nextFile, r.nextStore
			r.nextFile += rec.NumRows()
			r.nextStore += rec.NumRows()
			return rec, nil
		}
		if err != io.EOF { // a wrapped io.EOF is a file that ends too soon
			return nil, err
		}
		if rp, ok := r.raw.(reporter); ok {
			r.warnings = append(r.warnings, rp.Warnings()...)
			for k, v := range rp.Counts() {
				if r.counts == nil {
					r.counts = map[string]int64{}
				}
				r.counts[k] += v
			}
		}
		r.cur.Close()
		r.cur = nil
		if r.idx+1 < len(r.files) {
			if err := r.openNext(); err != nil {
				return nil, err
			}
		}
	}
	return nil, io.EOF
}

// countSkipped moves the positions past the rows the source skipped since
// the last call.
func (r *Reader) countSkipped() {
	s, ok := r.raw.(skipper)
	if !ok {
		return
	}
	d := s.skippedRows() - r.skippedFile
	r.skippedFile += d
	r.skipped += d
	r.nextFile += d
	r.nextStore += d
}

// Mark returns where the next incremental read (After) of a buffer store
// read to its end resumes (zero for other stores).
func (r *Reader) Mark() trinity.Mark {
	if b, ok := r.raw.(interface{ Mark() trinity.Mark }); ok {
		return b.Mark()
	}
	return trinity.Mark{}
}

// Skipped returns the number of rows skipped so far (SkipRowGroups): rows
// the footer statistics rule out, accounted for, not lost.
func (r *Reader) Skipped() int64 { return r.skipped }

// Warnings returns one line per problem the store's sources found in rows
// they read but did not yield (a Trinity 0.6 buffer's metadata rows skipped
// for a missing blob, blob rows without metadata), once read to the end.
func (r *Reader) Warnings() []string { return r.warnings }

// Counts returns the counts behind Warnings, by metric name (for example
// trinity/missing_blob_skipped), once the store has been read to its end.
func (r *Reader) Counts() map[string]int64 { return r.counts }

// BytesRead returns the number of bytes read so far from the store's
// Parquet files (footers, pages), as they lie on disk.
func (r *Reader) BytesRead() int64 { return r.cfg.bytes.Load() }

func (r *Reader) next() (rec arrow.Record, err error) {
	file := r.files[r.idx]
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fileError(file, fmt.Errorf("%v", p), "corrupt or unreadable store")
		}
	}()
	rec, err = r.cur.Next()
	if err != nil && err != io.EOF && err != r.cfg.ctx.Err() {
		err = sourceError(file, err, r.nextFile)
	}
	return rec, err
}

// sourceError locates an error of a source. A cause that wraps io.EOF (a
// decoder that ran out of bytes) is flattened to its text, so that no caller
// testing errors.Is(err, io.EOF) takes a cut file for the end of the store.
func sourceError(file string, err error, row int64) error {
	var ie *schema.InputError
	if !errors.As(err, &ie) {
		return fileError(file, flattenEOF(err), "corrupt or unreadable store near row %d", row)
	}
	if errors.Is(err, io.EOF) {
		c := *ie
		c.Err = flattenEOF(c.Err)
		return &c
	}
	return err
}

func flattenEOF(err error) error {
	if err != nil && errors.Is(err, io.EOF) {
		return errors.New(err.Error())
	}
	return err
}

// ForEach calls fn with every record batch in order, until the end of the
// store, an error, or ctx's cancellation (checked before each batch). A
// record is valid only during its call.
func (r *Reader) ForEach(ctx context.Context, fn func(rec arrow.Record) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
}

// Pos locates the first row of the last batch Next returned: its file, its
// row index within that file and within the whole store.
func (r *Reader) Pos() (file string, fileRow, storeRow int64) {
	i := r.idx
	if i < 0 {
		i = 0
	}
	return r.files[i], r.fileRow, r.globalRow
}

// Close releases the current file.
func (r *Reader) Close() error {
	if r.cur != nil {
		err := r.cur.Close()
		r.cur = nil
		return err
	}
	return nil
}

// project returns the indices of the wanted fields of s (all when wanted is
// empty). A struct `eid` is wanted with any of the ids it holds.
func project(s *arrow.Schema, wanted []string) []int {
	var out []int
	for i, f := range s.Fields() {
		if len(wanted) == 0 || contains(wanted, f.Name) || (f.Name == "eid" && wantsID(wanted)) {
			out = append(out, i)
		}
	}
	return out
}

// Locate reads the store at path whole (the named columns, or every one) to
// find damage: it returns the reader's bad-input error naming the file, row
// group and column of the first, and nil when the store reads whole (or
// cannot be opened for another reason).
func Locate(ctx context.Context, path string, columns ...string) error {
	var opts []ReadOption
	if len(columns) > 0 {
		opts = append(opts, Columns(columns...))
	}
	r, err := Open(path, opts...)
	if err == nil {
		err = r.ForEach(ctx, func(arrow.Record) error { return nil })
		r.Close()
	}
	if errors.Is(err, schema.ErrBadInput) {
		return err
	}
	return nil
}

// CheckSameColumns refuses a multi-file store whose files differ in
// columns, naming the two files and the column, as a Reader does when it
// reaches the file: for the readers that see every file at once (DuckDB,
// which would bind differing files by name or fail with its internal SQL).
func CheckSameColumns(files []string) error {
	var first *arrow.Schema
	for _, f := range files {
		r, err := Open(f)
		if err != nil {
			return err
		}
		s := r.Schema()
		r.Close()
		if first == nil {
			first = s
			continue
		}
		if col, why := ColumnDiff(first, s); col != "" {
			return schema.Errorf(f, -1, col, "schema differs from %s: %s", files[0], why)
		}
	}
	return nil
}

// SameColumns reports whether two schemas have the same column names and
// types, ignoring metadata (Parquet adds field ids).
func SameColumns(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.Fields() {
		if a.Field(i).Name != b.Field(i).Name || !arrow.TypeEqual(a.Field(i).Type, b.Field(i).Type) {
			return false
		}
	}
	return true
}

// ColumnDiff names the first column in which schema b differs from a (the
// reference) and how, seen from b: a column only in b, one missing from b,
// a different type, then a different position; "" when they have the same
// columns.
func ColumnDiff(a, b *arrow.Schema) (col, why string) {
	for _, f := range b.Fields() {
		if len(a.FieldIndices(f.Name)) == 0 {
			return f.Name, "the column is only in this file"
		}
	}
	for _, f := range a.Fields() {
		if len(b.FieldIndices(f.Name)) == 0 {
			return f.Name, "the column is missing in this file"
		}
	}
	for i, f := range b.Fields() {
		k := a.FieldIndices(f.Name)[0]
		if !arrow.TypeEqual(a.Field(k).Type, f.Type) {
			return f.Name, fmt.Sprintf("type %s in this file, %s there", f.Type, a.Field(k).Type)
		}
		if k != i {
			return f.Name, fmt.Sprintf("column %d in this file, %d there", i, k)
		}
	}
	return "", ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func wantsID(wanted []string) bool {
	for _, id := range []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix} {
		if contains(wanted, id) {
			return true
		}
	}
	return false
}
