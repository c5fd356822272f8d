package duckdb

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	rsql "github.com/rftpipe/rftpipe/sql"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/table"
)

// DefaultView is the view the first store is always exposed as; the canned
// analyses read it.
const DefaultView = "experiences"

// Store is an experience store exposed to SQL as the view Name.
type Store struct {
	Name string // view name; empty: DefaultView
	Path string // a file, a directory of Parquet files or a glob
	// Cache, when set, keeps the local copies of a store in object
	// storage that DuckDB reads in place (a Parquet store without
	// partition columns); other stores in object storage are converted.
	Cache *objstore.Cache
}

// ParseStore parses a --store argument: NAME=PATH, or PATH alone (the view
// DefaultView). NAME must be a plain identifier; an argument whose part before
// "=" is not one is taken as a path.
func ParseStore(arg string) (Store, error) {
	if name, p, ok := strings.Cut(arg, "="); ok && rsql.ValidIdent(name) {
		if p == "" {
			return Store{}, schema.BadInputf("--store %s: empty path", arg)
		}
		return Store{Name: name, Path: p}, nil
	}
	if arg == "" {
		return Store{}, schema.BadInputf("--store: empty path")
	}
	return Store{Path: arg}, nil
}

// Attach creates one view per store: the first is DefaultView (and its own
// name too, when it has one), the others are their names; names that differ
// only in case are one name, given once. Parquet stores are
// read in place by read_parquet (every file of a directory or glob, which
// must agree on columns); JSONL and Arrow IPC stores, and Parquet stores
// DuckDB would not read as rftpipe does (store.ReadInPlace: Hive partition
// columns, legacy LZ4 pages), are first converted, streaming, into a
// Parquet file under tmpDir, which the caller removes when done. The
// warnings are those of the converted stores' sources (a Trinity 0.6
// buffer's orphan rows, store.Reader.Warnings), one line each.
func Attach(ctx context.Context, db *sql.DB, stores []Store, tmpDir string) (warnings []string, err error) {
	seen := map[string]string{} // the names given, by their lower case
	for i, s := range stores {
		names := []string{s.Name}
		switch {
		case i == 0 && s.Name == "":
			names = []string{DefaultView}
		case i == 0 && !strings.EqualFold(s.Name, DefaultView):
			names = append(names, DefaultView)
		case s.Name == "":
			return nil, schema.BadInputf("--store %s: only the first store may go without a NAME= (it is the view %s)", s.Path, DefaultView)
		}
		for _, n := range names {
			// DuckDB's identifiers are case-insensitive: a view named
			// anew in another case would replace the first.
			key := strings.ToLower(n)
			if had, ok := seen[key]; ok && had != n {
				return nil, schema.BadInputf("--store %s: the view name %s is taken, as %s (view names are case-insensitive)", s.Path, n, had)
			} else if ok {
				return nil, schema.BadInputf("--store %s: the view name %s is taken", s.Path, n)
			}
			seen[key] = n
		}
		files, w, err := ParquetFiles(ctx, s, fmt.Sprintf("store%d", i), tmpDir)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
		src := ReadParquet(files)
		for _, n := range names {
			q := "CREATE OR REPLACE VIEW " + QuoteIdent(n) + " AS SELECT * FROM " + src
			if _, err := db.ExecContext(ctx, q); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, schema.Errorf(s.Path, -1, "", "cannot read the store: %s", FirstLine(err.Error()))
			}
		}
		if i == 0 {
			if _, err := AttachExperiments(ctx, db, s.Path); err != nil {
				return nil, err
			}
		}
	}
	return warnings, nil
}

// ExperimentsView is the view of the experiments of a table store, one row
// each: its recorded config fields (table.ConfigFields), its first and last
// model_version (explore step) and its rows.
const ExperimentsView = "experiments"

// AttachExperiments creates ExperimentsView over the view DefaultView when
// path, the store DefaultView reads, is an experience table, and reports
// whether it did.
func AttachExperiments(ctx context.Context, db *sql.DB, path string) (bool, error) {
	dir, spec, ok, err := table.ParseStore(path)
	if !ok || err != nil {
		return false, err
	}
	t, err := table.Open(dir, false)
	if err != nil {
		return false, err
	}
	configs, err := t.Configs(spec)
	if err != nil {
		return false, err
	}
	cols := []string{QuoteIdent(table.ExperimentColumn)}
	for _, f := range table.ConfigFields {
		cols = append(cols, QuoteIdent(f.Column))
	}
	var rows []string
	for exp, c := range configs {
		vals := []string{QuoteString(exp)}
		for _, f := range table.ConfigFields {
			if v, ok := c[f.Column]; ok {
				vals = append(vals, QuoteString(v))
			} else {
				vals = append(vals, "NULL::VARCHAR")
			}
		}
		rows = append(rows, "("+strings.Join(vals, ", ")+")")
	}
	sort.Strings(rows)
	cfg := "SELECT " + strings.Repeat("NULL::VARCHAR, ", len(cols)-1) + "NULL::VARCHAR WHERE false"
	if len(rows) > 0 {
		cfg = "VALUES " + strings.Join(rows, ", ")
	}
	q := "CREATE OR REPLACE VIEW " + QuoteIdent(ExperimentsView) + " AS SELECT e." + cols[0] + ", c.* EXCLUDE (" + cols[0] + "), e.first_step, e.last_step, e.rows" +
		" FROM (SELECT " + cols[0] + ", min(model_version) AS first_step, max(model_version) AS last_step, count(*) AS rows FROM " +
		QuoteIdent(DefaultView) + " GROUP BY ALL) e LEFT JOIN (" + cfg + ") c(" + strings.Join(cols, ", ") + ") USING (" + cols[0] + ") ORDER BY e." + cols[0]
	if _, err := db.ExecContext(ctx, q); err != nil {
		return false, schema.Errorf(path, -1, "", "cannot make the view %s: %s", ExperimentsView, FirstLine(err.Error()))
	}
	return true, nil
}

// ParquetFiles returns the Parquet files DuckDB reads for the store at path
// (read_parquet: every file of a directory or glob, which must agree on
// columns). JSONL and Arrow IPC stores, and Parquet stores DuckDB would not
// read as rftpipe does (store.ReadInPlace: Hive partition columns, legacy
// LZ4 pages), are first converted, streaming, into tmpDir/NAME.parquet, and
// the warnings are then those of the conversion's reader.
func ParquetFiles(ctx context.Context, s Store, name, tmpDir string) (files, warnings []string, err error) {
	path := s.Path
	files, err = store.Expand(path)
	if err != nil {
		return nil, nil, err
	}
	storePath := path // what ReadInPlace looks for partitions under
	if s.Cache != nil {
		var hit bool
		if files, hit, err = cached(ctx, s, files); err != nil {
			return nil, nil, err
		}
		if hit {
			storePath = files[0] // plain local copies: no partitions
		}
	}
	inPlace, err := store.ReadInPlace(storePath, files)
	if err != nil {
		return nil, nil, err
	}
	if inPlace && len(files) > 1 {
		if err := store.CheckSameColumns(files); err != nil {
			return nil, nil, err
		}
	}
	if !inPlace {
		out := filepath.Join(tmpDir, name+".parquet")
		if warnings, err = convert(ctx, path, out); err != nil {
			return nil, nil, err
		}
		files = []string{out}
	}
	return files, warnings, nil
}

// cached returns the local copies (Store.Cache) of a store's files when
// they are Parquet objects DuckDB reads as they are (no partition
// columns): hit; files otherwise.
func cached(ctx context.Context, s Store, files []string) (local []string, hit bool, err error) {
	for _, f := range files {
		if ft, ferr := store.FormatOf(f); !objstore.IsURL(f) || ferr != nil || ft != store.Parquet {
			return files, false, nil
		}
	}
	if parts, err := store.Partitions(s.Path, files); err != nil || len(parts) > 0 {
		return files, false, err
	}
	c, err := objstore.Default(ctx)
	if err != nil {
		return nil, false, err
	}
	local = make([]string, len(files))
	for i, f := range files {
		u, err := objstore.Parse(f)
		if err != nil {
			return nil, false, err
		}
		if local[i], err = s.Cache.Fetch(ctx, c, u); err != nil {
			return nil, false, err
		}
	}
	return local, true, nil
}

// ReadParquet returns the read_parquet(…) call that reads files by column
// name, with the further named options given (e.g. "file_row_number = true").
func ReadParquet(files []string, options ...string) string {
	args := make([]string, len(files))
	for k, f := range files {
		args[k] = QuoteString(f)
	}
	return "read_parquet([" + strings.Join(args, ", ") + "], " + strings.Join(append([]string{"union_by_name = true"}, options...), ", ") + ")"
}

// convert streams the store at in into the Parquet file out and returns the
// warnings of its reader.
func convert(ctx context.Context, in, out string) ([]string, error) {
	r, err := store.Open(in, store.Context(ctx))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if _, err = store.Copy(ctx, r, out, nil, store.NotOver(in)); err != nil {
		return nil, err
	}
	return r.Warnings(), nil
}

// Columns returns the column names of a table or view, in order.
func Columns(ctx context.Context, db *sql.DB, view string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT column_name FROM (DESCRIBE "+QuoteIdent(view)+")")
	if err != nil {
		return nil, fmt.Errorf("duckdb: columns of %s: %w", view, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// FirstLine keeps the first line of a (multi-line) DuckDB message.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// copyTarget finds the targets of COPY … TO '…' statements in a query.
var copyTarget = regexp.MustCompile(`(?is)\bCOPY\b.*?\bTO\s+'((?:[^']|'')*)'`)

// CheckWrites refuses a query that writes (COPY … TO) onto a file of one of
// the stores it reads: DuckDB would overwrite it in place, not atomically.
func CheckWrites(query string, stores []Store) error {
	for _, m := range copyTarget.FindAllStringSubmatch(query, -1) {
		target, err := filepath.Abs(strings.ReplaceAll(m[1], "''", "'"))
		if err != nil {
			continue
		}
		for _, s := range stores {
			files, err := store.Expand(s.Path)
			if err != nil {
				continue
			}
			for _, f := range files {
				if abs, err := filepath.Abs(f); err == nil && abs == target {
					return schema.BadInputf("the query writes to %s, a file of the store %s it reads: write elsewhere (or use --out, written atomically)", m[1], s.Path)
				}
			}
		}
	}
	return nil
}
